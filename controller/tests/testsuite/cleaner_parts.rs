//! The Cleaner's parts that need no cluster: a Helm release read from its storage record and
//! what uninstalling it deletes, the CloudEvent's binary-mode request, and the status written.

use std::io::Write;

use base64::Engine;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube_retention_cleaners::status::{self, Problem, Resolved};
use kube_retention_common::cleaner::{CleanerSpec, Verdict};
use kube_retention_helm::storage::{self as helm, HelmError, ManifestObject};
use kube_retention_sinks as sinks;
use serde_json::{Value, json};

const MANIFEST: &str = "---\n# Source: preview/templates/settings.yaml\napiVersion: v1\nkind: ConfigMap\n\
metadata:\n  name: preview-42-settings\n---\n# Source: preview/templates/data.yaml\napiVersion: v1\n\
kind: PersistentVolumeClaim\nmetadata:\n  name: preview-42-data\n  annotations:\n    \
helm.sh/resource-policy: keep\n---\n# Source: preview/templates/service.yaml\napiVersion: v1\n\
kind: Service\nmetadata:\n  name: preview-42\n  namespace: previews\n";

/// A storage record as Helm writes it: the release as JSON, gzipped, base64-encoded.
fn record(version: i64, hooks: Value) -> Secret {
    let release = json!({"name": "preview-42", "version": version, "namespace": "previews",
                         "info": {"status": "deployed"}, "manifest": MANIFEST, "hooks": hooks});
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(release.to_string().as_bytes())
        .expect("in memory");
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(gzip.finish().expect("in memory"));
    serde_json::from_value(json!({
        "metadata": {"name": format!("sh.helm.release.v1.preview-42.v{version}"),
                     "labels": {"owner": "helm", "name": "preview-42", "version": version.to_string()}},
        "type": "helm.sh/release.v1",
        "data": {"release": base64::engine::general_purpose::STANDARD.encode(encoded)}
    }))
    .expect("a Secret")
}

fn resource(kind: &str, name: &str, namespace: Option<&str>) -> ManifestObject {
    ManifestObject {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}

#[test]
fn uninstalling_deletes_the_manifest_in_reverse_except_what_helm_keeps() {
    let records = [record(1, json!([])), record(2, json!([]))];
    let latest = helm::latest(&records).expect("a record");
    let release = helm::decode(latest).expect("readable");
    assert_eq!((release.name.as_str(), release.version), ("preview-42", 2));
    let uninstall = helm::plan(&release, "previews").expect("no hooks");
    assert_eq!(
        uninstall.delete,
        [
            resource("Service", "preview-42", Some("previews")),
            resource("ConfigMap", "preview-42-settings", None)
        ]
    );
    assert_eq!(
        uninstall.keep,
        [resource("PersistentVolumeClaim", "preview-42-data", None)]
    );
    assert_eq!(
        helm::records_selector("preview-42"),
        "owner=helm,name=preview-42"
    );
}

#[test]
fn a_release_with_delete_hooks_is_refused_whole() {
    let hooks = json!([{"name": "backup", "events": ["pre-delete"]}, {"name": "migrate", "events": ["pre-install"]}]);
    let release = helm::decode(&record(1, hooks)).expect("readable");
    let refused = helm::plan(&release, "previews").expect_err("refused");
    assert_eq!(
        refused,
        HelmError::Hooks {
            release: "preview-42".into(),
            hooks: vec!["backup".into()]
        }
    );
    assert!(
        refused.to_string().contains("uninstall it with helm"),
        "{refused}"
    );
}

#[test]
fn a_release_reaching_outside_the_cleaners_namespace_is_refused_whole() {
    let release = helm::decode(&record(1, json!([]))).expect("readable");
    let refused = helm::plan(&release, "team-b").expect_err("refused");
    assert_eq!(
        refused.to_string(),
        "release preview-42 holds objects outside namespace team-b (Service/previews/preview-42); \
         a Cleaner deletes only in its own namespace: uninstall it with helm"
    );
    assert_eq!(refused.reason(), "HelmReleaseOutsideNamespace");
}

#[test]
fn an_unreadable_record_is_named() {
    let mut broken = record(1, json!([]));
    broken.data = Some([("release".to_owned(), ByteString(b"%%%".to_vec()))].into());
    let error = helm::decode(&broken).expect_err("unreadable");
    assert!(
        error.to_string().starts_with(
            "release record sh.helm.release.v1.preview-42.v1 cannot be read: not base64"
        ),
        "{error}"
    );
}

/// A namespace editor's forged record: 20 KB of gzip that expands to 64 MiB (gzip expands a
/// thousandfold; a Secret of etcd's 1.5 MiB would give a gigabyte). Decompressed no further
/// than the bound, and unreadable.
#[test]
fn a_record_that_decompresses_past_its_bound_is_unreadable() {
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![b' '; 1024 * 1024];
    for _ in 0..64 {
        gzip.write_all(&zeros).expect("in memory");
    }
    let compressed = gzip.finish().expect("in memory");
    assert!(compressed.len() < 1024 * 1024);
    let mut bomb = record(1, json!([]));
    let encoded = base64::engine::general_purpose::STANDARD.encode(compressed);
    bomb.data = Some([("release".to_owned(), ByteString(encoded.into_bytes()))].into());
    let error = helm::decode(&bomb).expect_err("unreadable");
    assert_eq!(
        error.to_string(),
        "release record sh.helm.release.v1.preview-42.v1 cannot be read: more than 16 MiB decompressed"
    );
    assert_eq!(error.reason(), "HelmReleaseUnreadable");
}

#[test]
fn the_cloud_event_goes_in_binary_mode() {
    let data = json!({"deleted": ["ConfigMap/preview-42-settings"], "release": "preview-42"});
    let source = "/apis/retention.dev/v1alpha1/namespaces/previews/cleaners/preview-42";
    let event = sinks::event(
        kube_retention_common::cleaner::EVENT_TYPE,
        "id-1",
        source,
        data.clone(),
        jiff::Timestamp::now(),
    )
    .expect("an event");
    let request = sinks::request("http://sink.example/", event).expect("a request");
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    assert_eq!(request.method(), "POST");
    assert_eq!(header("ce-specversion"), Some("1.0"));
    assert_eq!(header("ce-type"), Some("dev.retention.cleaner.deleted"));
    assert_eq!(header("ce-source"), Some(source));
    assert_eq!(header("ce-id"), Some("id-1"));
    assert_eq!(header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(request.body()).expect("JSON data");
    assert_eq!(body, data);
}

#[test]
fn the_status_names_what_holds_the_cleaner_back_and_keeps_transition_times() {
    let spec: CleanerSpec = serde_json::from_value(
        json!({"ttl": "1h", "conditions": ["time > timestamp(\"2030-01-01T00:00:00Z\")"]}),
    )
    .expect("a spec");
    let first: Timestamp = "2026-11-22T12:00:00Z".parse().expect("a time");
    let until: Timestamp = "2026-11-22T13:00:00Z".parse().expect("a time");
    let waiting = Ok(Verdict::Wait {
        until,
        unmet: 0,
        found: false,
    });
    let before = status::status(
        &spec,
        Some(3),
        &waiting,
        Resolved::all(vec!["a.configmaps/v1".into()]),
        Some(until),
        None,
        first,
    );
    assert_eq!(
        before.next_scheduled_evaluation.as_deref(),
        Some("2026-11-22T13:00:00Z")
    );
    let condition = |status: &kube_retention_common::cleaner::CleanerStatus, kind: &str| {
        let found = status
            .conditions
            .iter()
            .find(|condition| condition.type_ == kind)
            .cloned();
        found.expect("the condition")
    };
    assert!(
        before
            .conditions
            .iter()
            .all(|condition| condition.observed_generation == Some(3)),
        "each condition says the generation it observed: {:?}",
        before.conditions
    );
    let wait = condition(&before, "Waiting");
    assert_eq!(
        (wait.status.as_str(), wait.reason.as_str()),
        ("True", "ConditionsFalse")
    );
    assert!(
        wait.message
            .starts_with("spec.conditions[0] is false: time > timestamp"),
        "{}",
        wait.message
    );
    let later: Timestamp = "2026-11-22T12:30:00Z".parse().expect("a time");
    let failed = Err(Problem::Helm(HelmError::Hooks {
        release: "preview-42".into(),
        hooks: vec!["backup".into()],
    }));
    let after = status::status(
        &spec,
        Some(4),
        &failed,
        Resolved::default(),
        None,
        Some(&before),
        later,
    );
    let ready = condition(&after, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "HelmReleaseHasDeleteHooks")
    );
    assert_eq!(ready.last_transition_time.0, later, "Ready changed");
    assert_eq!(
        ready.observed_generation,
        Some(4),
        "the spec's new generation"
    );
    let again = status::status(
        &spec,
        Some(4),
        &failed,
        Resolved::default(),
        None,
        Some(&after),
        until,
    );
    assert_eq!(
        condition(&again, "Ready").last_transition_time.0,
        later,
        "Ready did not change"
    );
}

#[test]
fn a_condition_past_its_cost_limit_makes_the_cleaner_not_ready_saying_so() {
    use kube_retention_common::cel::{Expect, Expression, Variables};
    let source = r#"pods.items.exists(p, p == "never")"#;
    let spec: CleanerSpec =
        serde_json::from_value(json!({"conditions": [source]})).expect("a spec");
    let condition =
        Expression::compile_over(source, Expect::Condition, &["pods", "time"]).expect("admitted");
    // Far more items than the estimate assumes: the run-time limit stops the evaluation.
    let pods = json!({"items": vec!["x"; 600_000]});
    let variables = Variables::new([("pods", &pods)]).expect("variables");
    let error = condition
        .condition_in(&variables, None)
        .expect_err("stopped at its limit");
    assert!(error.exceeded().is_some(), "{error}");
    let now: Timestamp = "2026-11-22T12:00:00Z".parse().expect("a time");
    let failed = Ok(Verdict::Failed {
        until: now,
        condition: 0,
        error,
    });
    let written = status::status(
        &spec,
        Some(1),
        &failed,
        Resolved::default(),
        None,
        None,
        now,
    );
    let ready = &written.conditions[0];
    assert_eq!(
        (
            ready.type_.as_str(),
            ready.status.as_str(),
            ready.reason.as_str()
        ),
        ("Ready", "False", "CostLimitExceeded")
    );
    assert!(ready.message.contains("limit"), "{}", ready.message);
}
