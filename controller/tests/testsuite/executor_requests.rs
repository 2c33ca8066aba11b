//! The executor's requests against a mocked API server (tower-test), in the style of
//! controller-rs's `ApiServerVerifier`: each scenario asserts the exact request the executor
//! sends for an action — a DELETE carrying uid and resourceVersion preconditions and the
//! propagation policy, a stamp or label as a merge patch — and what each answer means for the
//! state: 404 nothing (the object is gone), 409 a conflict, 429 and 5xx or no answer at all the
//! API server unavailable, any other refusal an error with the server's own sentence.

use crate::work_support;

use std::time::Duration;

use http::StatusCode;
use jiff::Timestamp;
use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::{Registry, StampChange};
use kube_retention_controller::executor::{Budget, Executor, Feedback, Parts, Settings};
use kube_retention_controller::metrics::{DeletionLabels, KindLabels, Metrics};
use kube_retention_state::{Action, Failure};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use work_support::{deletion, key, labelling, stamping};

const JOB: &str = "/apis/batch/v1/namespaces/team/jobs/done";

struct ApiServer {
    server: kube_retention_apimock::ApiServer,
    executor: Executor,
    feedback: mpsc::UnboundedReceiver<Feedback>,
    metrics: Metrics,
}

impl ApiServer {
    fn start(propagation: PropagationPolicy) -> Self {
        let (client, server) = kube_retention_apimock::pair();
        let metrics = Metrics::default();
        let (feedback_tx, feedback) = mpsc::unbounded_channel();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "test".into(),
                instance: None,
            },
        );
        let (executor, _tasks) = Executor::spawn(Parts {
            client,
            settings: Settings {
                breaker: kube_retention_io::breaker::Breaker::off(),
                budget: Budget::unlimited(),
                propagation,
                concurrency: 1,
                events: false,
                event_window: Duration::ZERO,
            },
            metrics: metrics.clone(),
            recorder,
            feedback: feedback_tx,
            ledger: None,
            clock: kube_retention_io::clock::Clock::System,
        });
        Self {
            server,
            executor,
            feedback,
            metrics,
        }
    }

    /// The next request: its method, path, content type and body; answered with `status` and a
    /// Status object saying `message`.
    /// Answers the next request with a Status of `status` saying `message`; returns its
    /// method, path, content type and body.
    async fn answer(
        &mut self,
        status: StatusCode,
        message: &str,
    ) -> (String, String, String, Value) {
        let received = self.server.next().await.expect("a request");
        let seen = (
            received.method.clone(),
            received.path.clone(),
            received.content_type.clone(),
            received.body.clone(),
        );
        received.refuse(status.as_u16(), message);
        seen
    }

    /// What the state hears back, if anything, once the executor is idle.
    async fn feedback(&mut self) -> Option<Feedback> {
        tokio::time::timeout(Duration::from_secs(5), self.feedback.recv())
            .await
            .ok()
            .flatten()
    }
}

fn delete_failure(feedback: Option<Feedback>) -> Option<Failure> {
    match feedback {
        Some(Feedback::DeleteFailed {
            key: failed,
            failure,
        }) => {
            assert_eq!(failed, key("team", "done"));
            Some(failure)
        }
        None => None,
        Some(other) => panic!("unexpected feedback {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_deletion_carries_uid_and_resource_version_preconditions_and_the_propagation_policy() {
    for (propagation, said) in [
        (PropagationPolicy::Background, "Background"),
        (PropagationPolicy::Foreground, "Foreground"),
        (PropagationPolicy::Orphan, "Orphan"),
    ] {
        let mut server = ApiServer::start(propagation);
        server
            .executor
            .submit(deletion("team", "done"), Registry::builtin());
        let (method, path, _, body) = server.answer(StatusCode::OK, "").await;
        assert_eq!((method.as_str(), path.as_str()), ("DELETE", JOB));
        assert_eq!(
            body["preconditions"],
            json!({"uid": "uid", "resourceVersion": "1"})
        );
        assert_eq!(body["propagationPolicy"], said);
        assert!(
            server.feedback().await.is_none(),
            "a deletion done is not fed back"
        );
        let deleted = DeletionLabels {
            kind: "Job.batch".into(),
            reason: "ttl",
        };
        assert_eq!(server.metrics.deletions.get_or_create(&deleted).get(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn each_refusal_of_a_deletion_means_what_it_says() {
    let cases = [
        (StatusCode::NOT_FOUND, None),
        (StatusCode::CONFLICT, Some(Failure::Conflict)),
        (
            StatusCode::TOO_MANY_REQUESTS,
            Some(Failure::Unavailable("said by the server".into())),
        ),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(Failure::Unavailable("said by the server".into())),
        ),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Some(Failure::Unavailable("said by the server".into())),
        ),
        (
            StatusCode::FORBIDDEN,
            Some(Failure::Error("said by the server".into())),
        ),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some(Failure::Error("said by the server".into())),
        ),
    ];
    for (status, expected) in cases {
        let mut server = ApiServer::start(PropagationPolicy::Background);
        server
            .executor
            .submit(deletion("team", "done"), Registry::builtin());
        server.answer(status, "said by the server").await;
        assert_eq!(
            delete_failure(server.feedback().await),
            expected,
            "{status}"
        );
        let conflicts = server
            .metrics
            .conflicts
            .get_or_create(&KindLabels {
                kind: "Job.batch".into(),
            })
            .get();
        assert_eq!(
            conflicts,
            u64::from(status == StatusCode::CONFLICT),
            "{status}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn no_answer_at_all_is_the_api_server_unavailable() {
    let mut server = ApiServer::start(PropagationPolicy::Background);
    server
        .executor
        .submit(deletion("team", "done"), Registry::builtin());
    let received = server.server.next().await.unwrap();
    received.break_off("connection reset");
    let failure = delete_failure(server.feedback().await);
    assert!(
        matches!(&failure, Some(Failure::Unavailable(message)) if message.contains("connection reset")),
        "{failure:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stamp_is_a_merge_patch_and_its_removal_is_conditional_on_the_version_judged() {
    let mut server = ApiServer::start(PropagationPolicy::Background);
    let at = Timestamp::from_second(1_800_000_000).unwrap();
    server
        .executor
        .submit(stamping("team", "done", at), Registry::builtin());
    let (method, path, content_type, body) = server.answer(StatusCode::OK, "").await;
    assert_eq!((method.as_str(), path.as_str()), ("PATCH", JOB));
    assert_eq!(content_type, "application/merge-patch+json");
    let stamp = "2027-01-15T08:00:00Z";
    assert_eq!(
        body,
        json!({"metadata": {"annotations": {
            "retention.dev/expires-at": stamp, "retention.dev/stamped": stamp}}})
    );
    server.executor.submit(
        Action::Stamp {
            key: key("team", "done"),
            change: StampChange::Remove(at),
            resource_version: "7".into(),
        },
        Registry::builtin(),
    );
    let (_, _, _, body) = server.answer(StatusCode::CONFLICT, "changed").await;
    assert_eq!(
        body,
        json!({"metadata": {"resourceVersion": "7", "annotations": {
            "retention.dev/expires-at": null, "retention.dev/stamped": null}}})
    );
    match server.feedback().await {
        Some(Feedback::StampFailed { failure, .. }) => assert_eq!(failure, Failure::Conflict),
        other => panic!("a refused stamp is fed back: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_object_the_webhook_never_saw_is_labelled_and_a_refusal_fed_back() {
    let mut server = ApiServer::start(PropagationPolicy::Background);
    server
        .executor
        .submit(labelling("team", "done"), Registry::builtin());
    let (method, path, _, body) = server.answer(StatusCode::OK, "").await;
    assert_eq!((method.as_str(), path.as_str()), ("PATCH", JOB));
    assert_eq!(
        body,
        json!({"metadata": {"labels": {"retention.dev/managed": "true"}}})
    );
    assert!(
        server.feedback().await.is_none(),
        "a label done is not fed back"
    );
    assert_eq!(server.metrics.labelled.get(), 1);
    server
        .executor
        .submit(labelling("team", "done"), Registry::builtin());
    server
        .answer(StatusCode::FORBIDDEN, "no patch for you")
        .await;
    match server.feedback().await {
        Some(Feedback::LabelFailed { failure, .. }) => {
            assert_eq!(failure, Failure::Error("no patch for you".into()));
        }
        other => panic!("a refused label is fed back: {other:?}"),
    }
}

/// A label's answer is the object as it is now, which its tenant may since have nested 300 deep
/// or filled with 24,000 one-entry maps: read within the bound of one object, not a failure (a
/// failure would be retried, spending every namespace's request budget on it).
#[tokio::test(start_paused = true)]
async fn a_label_answered_with_an_object_past_the_bound_is_done() {
    let mut server = ApiServer::start(PropagationPolicy::Background);
    let dense = json!({"env": vec![json!({"name": "E"}); 24_000]});
    let deep = (0..300).fold(json!(1), |inner, _| json!({"a": inner}));
    for spec in [dense, deep] {
        server
            .executor
            .submit(labelling("team", "done"), Registry::builtin());
        let received = server.server.next().await.expect("the PATCH");
        assert_eq!(received.method, "PATCH");
        received.reply(
            200,
            &json!({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": "done", "namespace": "team", "uid": "uid",
                                 "resourceVersion": "8",
                                 "labels": {"retention.dev/managed": "true"}},
                    "spec": spec}),
        );
        assert!(
            server.feedback().await.is_none(),
            "a label done is not fed back"
        );
    }
    assert_eq!(server.metrics.labelled.get(), 2);
}
