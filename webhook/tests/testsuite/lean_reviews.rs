//! What admission decodes of a review (`review::read`: a few fields of each object, by
//! `review/reads.rs`) gives the answers the whole objects give. For generated objects of every
//! kind the registry knows and of kinds it does not — retention annotations, fields and
//! statuses valid and not, values of every JSON type where the model reads one, parents named,
//! owners, noise beside them — created or updated, by a writer allowed to delete or not, both
//! hooks answer the lean decode of the body exactly as they answer the objects whole (as kube's
//! `DynamicObject` read them before): the same verdict, denial text, causes, patch and
//! warnings.

use crate::support;

use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;
use kube_retention_webhook::review::{self, Hook, Request};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::Rbac;

pub const KINDS: [(&str, &str, &str, &str); 8] = [
    ("batch", "v1", "Job", "jobs"),
    ("", "v1", "Pod", "pods"),
    ("shipwright.io", "v1beta1", "BuildRun", "buildruns"),
    ("shipwright.io", "v1beta1", "Build", "builds"),
    ("build.openshift.io", "v1", "BuildConfig", "buildconfigs"),
    ("build.openshift.io", "v1", "Build", "builds"),
    ("", "v1", "ConfigMap", "configmaps"),
    ("apps", "v1", "Deployment", "deployments"),
];

/// Values of every type, valid for some fields and not for others.
fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("1h")),
        Just(json!("36h")),
        Just(json!("1d")),
        Just(json!("")),
        Just(json!(3600)),
        Just(json!(-5)),
        Just(json!(5)),
        Just(json!(101)),
        Just(json!(true)),
        Just(json!("yes")),
        Just(json!([1, 2])),
        Just(json!({"a": 1})),
        Just(json!("hello")),
    ]
}

const ANNOTATIONS: [&str; 12] = [
    "retention.dev/ttl",
    "retention.dev/ttl-after-succeeded",
    "retention.dev/ttl-after-failed",
    "retention.dev/ttl-after-finished",
    "retention.dev/expires-at",
    "retention.dev/stamped",
    "retention.dev/keep",
    "retention.dev/snoozed-until",
    "retention.dev/notify-before",
    "retention.dev/bogus",
    "openshift.io/build-config.name",
    "unrelated.example.com/note",
];

fn annotation_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1h".to_owned()),
        Just("10m".to_owned()),
        Just("1d".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("2026-01-01T00:00:00Z".to_owned()),
        Just("2099-01-01T00:00:00Z".to_owned()),
        Just("hello".to_owned()),
    ]
}

const FIELDS: [&str; 17] = [
    "spec.retention",
    "spec.retention.ttlAfterSucceeded",
    "spec.retention.ttlAfterFailed",
    "spec.retention.succeededLimit",
    "spec.retention.failedLimit",
    "spec.retention.atBuildDeletion",
    "spec.build.name",
    "spec.build.spec.retention.ttlAfterFailed",
    "spec.build.spec.retention.failedLimit",
    "status.buildSpec.retention.ttlAfterSucceeded",
    "spec.successfulBuildTTLSeconds",
    "spec.failedBuildTTLSeconds",
    "spec.defaultSuccessfulBuildTTLSeconds",
    "spec.defaultFailedBuildTTLSeconds",
    "spec.successfulBuildsHistoryLimit",
    "spec.template.spec.containers",
    "spec",
];

fn condition() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["Succeeded", "Complete", "Failed", "Ready"]),
        prop::sample::select(vec!["True", "True", "False", "Unknown"]),
        prop::option::of(Just("2026-01-01T00:10:00Z")),
    )
        .prop_map(|(kind, status, at)| {
            let mut condition = json!({"type": kind, "status": status, "message": "noise"});
            if let Some(at) = at {
                condition["lastTransitionTime"] = json!(at);
            }
            condition
        })
}

fn status() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(condition(), 0..3),
        prop::option::of(Just("2026-01-01T00:05:00Z")),
        prop::option::of(prop::sample::select(vec![
            "Succeeded",
            "Failed",
            "Running",
            "Complete",
            "Error",
        ])),
        prop::option::of(Just("2026-01-01T00:07:00Z")),
    )
        .prop_map(|(conditions, completed, phase, finished)| {
            let mut status = json!({"conditions": conditions, "noise": [1, 2, 3]});
            if let Some(at) = completed {
                status["completionTime"] = json!(at);
                status["completionTimestamp"] = json!(at);
            }
            if let Some(phase) = phase {
                status["phase"] = json!(phase);
            }
            if let Some(at) = finished {
                status["containerStatuses"] = json!([
                    {"name": "c", "state": {"terminated": {"finishedAt": at, "exitCode": 0}}},
                    {"name": "d", "state": {"running": {}}},
                ]);
            }
            status
        })
}

/// Sets `value` at the dotted `path`, making objects on the way (replacing what is not one).
fn set(object: &mut Value, path: &str, value: Value) {
    let mut at = object;
    for key in path.split('.') {
        if !at.is_object() {
            *at = json!({});
        }
        at = at
            .as_object_mut()
            .expect("made above")
            .entry(key)
            .or_insert(Value::Null);
    }
    *at = value;
}

/// A valid TTL annotation, most of the time: settings that mutate and need the writer.
fn ttl() -> impl Strategy<Value = Option<(&'static str, &'static str)>> {
    prop::option::weighted(
        0.8,
        (
            prop::sample::select(vec![
                "retention.dev/ttl",
                "retention.dev/ttl-after-succeeded",
                "retention.dev/ttl-after-failed",
                "retention.dev/ttl-after-finished",
            ]),
            prop::sample::select(vec!["1h", "10m", "48h"]),
        ),
    )
}

pub fn object() -> impl Strategy<Value = Value> {
    (
        (
            ttl(),
            prop::collection::btree_map(
                prop::sample::select(ANNOTATIONS.to_vec()),
                annotation_value(),
                0..3,
            ),
        ),
        prop::option::of(Just("true")),
        prop::option::of(prop::sample::select(vec!["hello", "missing"])),
        prop::collection::vec((prop::sample::select(FIELDS.to_vec()), value()), 0..3),
        prop::option::of(status()),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![
            "u-1",
            // The fixture Build's: the run is its already.
            "0f6f3b0e-7e0c-4b8e-a1f1-6c1d1d7b9e11",
        ])),
    )
        .prop_map(
            |((ttl, mut annotations), managed, build, fields, status, created, owned)| {
                if let Some((key, value)) = ttl {
                    annotations.insert(key, value.to_owned());
                }
                let mut labels = json!({"app": "a"});
                if let Some(managed) = managed {
                    labels["retention.dev/managed"] = json!(managed);
                }
                if let Some(build) = build {
                    labels["build.shipwright.io/name"] = json!(build);
                }
                let mut object = json!({
                    "metadata": {"name": "x", "namespace": "team-a", "labels": labels,
                                 "annotations": annotations,
                                 "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:a": {}}}]},
                    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
                });
                if created {
                    object["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
                }
                if let Some(uid) = owned {
                    object["metadata"]["ownerReferences"] = json!([
                        {"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": uid}]);
                }
                for (path, value) in fields {
                    set(&mut object, path, value);
                }
                if let Some(status) = status {
                    object["status"] = status;
                }
                object
            },
        )
}

fn rbac() -> Arc<Rbac> {
    let allowed = KINDS
        .iter()
        .map(|&(_, _, _, plural)| ("alice", "delete", plural, Some("team-a")))
        .collect();
    Arc::new(Rbac {
        allowed,
        ..Rbac::default()
    })
}

/// The review's answer from its lean decode and from its objects whole, as JSON.
async fn both(hook: Hook, body: &Value) -> (Value, Value) {
    let context = support::context(rbac());
    let text = serde_json::to_vec(body).unwrap();
    let now = Timestamp::from_second(1_767_225_900).unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3600);
    let lean = review::read(&context, hook, &text, &mut (), Instant::now())
        .unwrap_or_else(|_| panic!("{body}"));
    let with_types = |object: &Value| {
        let mut object = object.clone();
        let kind = &body["request"]["kind"];
        let group = kind["group"].as_str().unwrap();
        let version = kind["version"].as_str().unwrap();
        object["apiVersion"] = json!(if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        });
        object["kind"] = kind["kind"].clone();
        object
    };
    let request = &body["request"];
    let whole = Request {
        about: lean.about.clone(),
        object: Some(with_types(&request["object"])),
        old_object: request
            .get("oldObject")
            .filter(|old| !old.is_null())
            .map(with_types),
    };
    let (lean_status, lean_review) =
        review::answer_at(&context, hook, &lean, deadline, Instant::now(), now).await;
    let (whole_status, whole_review) =
        review::answer_at(&context, hook, &whole, deadline, Instant::now(), now).await;
    assert_eq!(lean_status, whole_status, "{body}");
    (
        serde_json::to_value(lean_review).unwrap(),
        serde_json::to_value(whole_review).unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn the_lean_decode_answers_as_the_whole_objects_do(
        kind in prop::sample::select(KINDS.to_vec()),
        object in object(),
        old in prop::option::of(object()),
        user in prop::sample::select(vec!["alice", "eve"]),
    ) {
        let (group, version, kind, _) = kind;
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        let body = support::as_user(
            support::review(group, version, kind, operation, &object, old.as_ref()),
            user,
        );
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        for hook in [Hook::Validate, Hook::Mutate] {
            let (lean, whole) = runtime.block_on(both(hook, &body));
            prop_assert_eq!(&lean, &whole, "{:?} {}", hook, body);
        }
    }
}

/// A run whose free-form spec nests past what serde_json decodes (the API server accepts such a
/// custom resource, 10,000 deep) is read: admission reads nothing of the spec.
#[test]
fn a_review_of_an_object_nested_past_what_is_decoded_is_read() {
    let deep: Value = (0..300).fold(json!(1), |inner, _| json!({"a": inner}));
    let build = json!({"metadata": {"name": "b", "namespace": "team-a",
                                    "annotations": {"retention.dev/ttl-after-finished": "1h"}},
                       "spec": {"n": deep}});
    let body = support::as_user(
        support::review("build.openshift.io", "v1", "Build", "CREATE", &build, None),
        "alice",
    );
    let text = serde_json::to_vec(&body).unwrap();
    let context = support::context(rbac());
    let read = review::read(&context, Hook::Mutate, &text, &mut (), Instant::now());
    assert!(read.is_ok(), "{:?}", read.err());
}
