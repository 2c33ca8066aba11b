//! The Cleaners' loop against a mocked API server, the requests asserted: a Cleaner's targets
//! are listed and watched in the Cleaner's namespace only, asking for the one object its
//! reference names, as metadata where no condition reads it; and its condition is judged on the
//! evaluator's thread, the verdict written to its status by the status writer, which retries a
//! write the API server failed.

use serde_json::{Value, json};

fn cleaner() -> Value {
    json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": "p42", "namespace": "previews", "uid": "uid-p42",
                     "resourceVersion": "3", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "targets": [{"name": "settings", "delete": true,
                         "reference": {"version": "v1", "kind": "ConfigMap", "name": "p42-settings"}}],
            "conditions": ["time < timestamp('2000-01-01T00:00:00Z')"]
        }
    })
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "10"}, "items": items})
}

fn core_resources() -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [
        {"name": "configmaps", "singularName": "configmap", "namespaced": true, "kind": "ConfigMap",
         "verbs": ["get", "list", "watch", "delete"]}]})
}

#[tokio::test]
async fn a_cleaners_targets_are_watched_in_its_namespace_for_the_one_name_it_refers_to() {
    let (client, mut api) = kube_retention_apimock::pair();
    let cleaners = crate::clean_support::run_cleaners(client.clone());
    // The requests in their order, and the watches (which run beside them, in an order of
    // their own).
    let mut seen = Vec::new();
    let mut watches = Vec::new();
    let mut watching = Vec::new();
    let mut patched = false;
    let mut refused_once = false;
    while !(patched && watches.len() == 2) {
        let received = api.next().await.expect("a request");
        let line = received.line();
        if received.query.contains("watch=true") {
            watches.push(received.path.clone());
            // Watches stay open: nothing more happens on them.
            watching.push(received.unanswered());
            continue;
        }
        seen.push(format!("{line} accept={}", received.accept));
        match (received.method.as_str(), received.path.as_str()) {
            ("GET", "/apis/retention.dev/v1alpha1/cleaners") => {
                received.reply(200, &list("CleanerList", vec![cleaner()]))
            }
            ("GET", "/api/v1") => received.reply(200, &core_resources()),
            ("GET", "/api/v1/namespaces/previews/configmaps") => {
                let settings = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                                      "metadata": {"name": "p42-settings", "namespace": "previews",
                                                   "uid": "uid-s", "resourceVersion": "9"}});
                let mut items = list("PartialObjectMetadataList", vec![settings]);
                items["apiVersion"] = json!("meta.k8s.io/v1");
                received.reply(200, &items)
            }
            ("PATCH", "/apis/retention.dev/v1alpha1/namespaces/previews/cleaners/p42/status") => {
                let waiting = received.body["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|condition| condition["type"] == "Waiting")
                    .cloned()
                    .unwrap();
                assert_eq!(waiting["status"], "True", "{waiting}");
                assert!(
                    waiting["message"]
                        .as_str()
                        .unwrap()
                        .contains("spec.conditions[0]"),
                    "{waiting}"
                );
                assert_eq!(
                    received.body["status"]["resolvedTargets"],
                    json!(["p42-settings.configmaps/v1"])
                );
                if refused_once {
                    received.reply(200, &cleaner());
                    patched = true;
                } else {
                    // The status writer retries it, as it does a policy's.
                    received.refuse(500, "etcd is unavailable");
                    refused_once = true;
                }
            }
            _ => received.refuse(404, "not served here"),
        }
    }
    cleaners.running.abort();
    drop((watching, cleaners));
    watches.sort();
    assert_eq!(
        watches,
        [
            "/api/v1/namespaces/previews/configmaps",
            "/apis/retention.dev/v1alpha1/cleaners"
        ]
    );
    let metadata = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    assert_eq!(
        seen,
        [
            "GET /apis/retention.dev/v1alpha1/cleaners?&limit=500 accept=".to_owned(),
            "GET /api/v1 accept=".to_owned(),
            format!(
                "GET /api/v1/namespaces/previews/configmaps?&fieldSelector=metadata.name%3Dp42-settings&limit=500 accept={metadata}"
            ),
            "PATCH /apis/retention.dev/v1alpha1/namespaces/previews/cleaners/p42/status accept=application/json".to_owned(),
            "PATCH /apis/retention.dev/v1alpha1/namespaces/previews/cleaners/p42/status accept=application/json".to_owned(),
        ]
    );
}

/// A target that holds more decoded than the controller reads of one object is not judged:
/// its Cleaner says so, naming it, and nothing is deleted. Watched whole, a field of 24,000
/// one-entry maps (280 KB of text, past 16 MiB decoded); watched as metadata only (no condition
/// reads it), 120,000 labels (1 MB of text, some 20 MiB decoded), which the metadata watch once
/// decoded whole and judged.
#[tokio::test]
async fn a_target_past_the_bound_of_one_object_makes_its_cleaner_say_so_and_delete_nothing() {
    for whole in [true, false] {
        let message = past_the_bound(whole).await;
        assert!(
            message.contains(
                "p42-settings holds more than the controller decodes of one object (16 MiB"
            ),
            "watched whole: {whole}: {message}"
        );
    }
}

/// The Ready message of a Cleaner whose target is past the bound, watched `whole` or as
/// metadata only.
async fn past_the_bound(whole: bool) -> String {
    let (client, mut api) = kube_retention_apimock::pair();
    let cleaners = crate::clean_support::run_cleaners(client.clone());
    let mut reading = cleaner();
    reading["spec"]["targets"][0]["includeWhenEvaluating"] = json!(whole);
    let mut watching = Vec::new();
    let message = loop {
        let received = api.next().await.expect("a request");
        if received.query.contains("watch=true") {
            watching.push(received.unanswered());
            continue;
        }
        match (received.method.as_str(), received.path.as_str()) {
            ("GET", "/apis/retention.dev/v1alpha1/cleaners") => {
                received.reply(200, &list("CleanerList", vec![reading.clone()]))
            }
            ("GET", "/api/v1") => received.reply(200, &core_resources()),
            ("GET", "/api/v1/namespaces/previews/configmaps") => {
                assert_eq!(
                    received.accept.contains("PartialObjectMetadata"),
                    !whole,
                    "{}",
                    received.accept
                );
                let mut dense = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "p42-settings", "namespace": "previews",
                                                "uid": "uid-s", "resourceVersion": "9"}});
                match whole {
                    true => dense["spec"] = json!({"env": vec![json!({"name": "E"}); 24_000]}),
                    false => {
                        let labels: serde_json::Map<String, serde_json::Value> = (0..120_000)
                            .map(|label| (format!("{label:x}"), json!("")))
                            .collect();
                        dense["metadata"]["labels"] = serde_json::Value::Object(labels);
                    }
                }
                received.reply(200, &list("ConfigMapList", vec![dense]))
            }
            ("PATCH", "/apis/retention.dev/v1alpha1/namespaces/previews/cleaners/p42/status") => {
                let conditions = received.body["status"]["conditions"].as_array().unwrap();
                let ready = conditions
                    .iter()
                    .find(|condition| condition["type"] == "Ready")
                    .cloned()
                    .unwrap();
                received.reply(200, &reading);
                if ready["reason"] == "TargetKindUnavailable" {
                    assert_eq!(ready["status"], "False", "{ready}");
                    break ready["message"].as_str().unwrap().to_owned();
                }
            }
            ("DELETE", path) => panic!("deleted {path}"),
            _ => received.refuse(404, "not served here"),
        }
    };
    cleaners.running.abort();
    drop((watching, cleaners));
    message
}
