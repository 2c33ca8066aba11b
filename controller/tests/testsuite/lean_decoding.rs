//! The watches' decoding ([`kube_retention_io::lean`]): a Job as the API server sends
//! it, with three writers' `managedFields`, decodes to exactly what kube's `DynamicObject` and
//! `PartialObjectMeta` decode less those fields; what is not an object is an error, not a panic;
//! and the watches, against a mocked API server, hand the loop objects decoded so, the metadata
//! watch asking for metadata only.

use kube::api::{DynamicObject, PartialObjectMeta};
use kube::core::WatchEvent as ApiWatchEvent;
use kube::runtime::watcher::Event;
use kube_retention_common::Registry;
use kube_retention_io::initial_list::{InitialList, Lists};
use kube_retention_io::lean::{Decoded, LeanMetaText, LeanObject};
use kube_retention_io::list_turns::ListTurns;
use kube_retention_io::watch_set::Watching;
use kube_retention_io::watches::{WatchEvent, Watches};
use serde_json::{Value, json};

/// A finished Job as kube-apiserver returns it: created by one writer, finished through the
/// status subresource by another, stamped by a third.
const JOB: &str = include_str!("fixtures/job-with-managed-fields.json");

fn job() -> Value {
    serde_json::from_str(JOB).unwrap()
}

/// kube's own decoding of `value`, less `managedFields`.
fn dynamic_less_managed_fields(value: &Value) -> DynamicObject {
    let mut object: DynamicObject = serde_json::from_value(value.clone()).unwrap();
    assert!(
        object.metadata.managed_fields.is_some(),
        "the fixture has them"
    );
    object.metadata.managed_fields = None;
    object
}

#[test]
fn a_whole_object_decodes_as_kube_decodes_it_less_its_managed_fields() {
    let LeanObject(object) = serde_json::from_str(JOB).unwrap();
    assert_eq!(object, dynamic_less_managed_fields(&job()));
    assert_eq!(object.metadata.name.as_deref(), Some("job-000123"));
    assert_eq!(object.data["status"]["succeeded"], 1);
    assert_eq!(object.data["spec"]["ttlSecondsAfterFinished"], 60);
    assert!(object.data.get("metadata").is_none() && object.data.get("kind").is_none());
}

#[test]
fn a_list_item_without_its_type_decodes_without_one() {
    let mut item = job();
    let fields = item.as_object_mut().unwrap();
    fields.remove("apiVersion");
    fields.remove("kind");
    let LeanObject(object) = serde_json::from_value(item.clone()).unwrap();
    assert_eq!(object.types, None);
    assert_eq!(object, dynamic_less_managed_fields(&item));
}

#[test]
fn metadata_decodes_as_kube_decodes_it_less_its_managed_fields() {
    let text: LeanMetaText = serde_json::from_str(JOB).unwrap();
    let Decoded::Whole(lean) = text.decode() else {
        panic!("within the bound");
    };
    let mut kube: PartialObjectMeta<DynamicObject> = serde_json::from_str(JOB).unwrap();
    kube.metadata.managed_fields = None;
    assert_eq!(lean.types, kube.types);
    assert_eq!(lean.metadata, kube.metadata);
    assert_eq!(
        lean.metadata.uid.as_deref(),
        Some("8c2f6a8e-0f5e-4b7c-9a57-5b1f0d1f8f11")
    );
}

#[test]
fn a_watch_event_as_the_api_server_streams_it_decodes() {
    let line = format!("{{\"type\":\"DELETED\",\"object\":{}}}", job());
    let ApiWatchEvent::Deleted(LeanObject(object)) = serde_json::from_str(&line).unwrap() else {
        panic!("not a deletion");
    };
    assert_eq!(object, dynamic_less_managed_fields(&job()));
}

#[test]
fn what_is_not_an_object_is_an_error_saying_what_was_expected() {
    for (input, expected) in [
        ("[]", "a Kubernetes object"),
        (r#"{"metadata": 5}"#, "an object's metadata"),
        (
            r#"{"metadata": {"managedFields": [], "name": 5}}"#,
            "invalid type: integer `5`",
        ),
        (r#"{"metadata": {"managedFields": [}}"#, "expected value"),
    ] {
        let error = serde_json::from_str::<LeanObject>(input)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{input}: {error}");
        let error = serde_json::from_str::<LeanMetaText>(input)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{input}: {error}");
    }
}

/// Jobs are watched through the managed label, beside a metadata-only watch of all of them:
/// each list's item reaches the loop decoded without `managedFields` (paged lists here; streamed
/// ones decode each event as `a_watch_event_as_the_api_server_streams_it_decodes` shows).
#[tokio::test]
async fn the_watches_hand_the_loop_objects_without_their_managed_fields() {
    let (client, mut server) = kube_retention_apimock::pair();
    let (group, _watching) = kube_retention_runtime::supervise::group("watches");
    let watching = Watching {
        lists: Lists::new(InitialList::Pages, 500),
        turns: ListTurns::new(2),
        tasks: group,
        memory: kube_retention_runtime::object_memory::ObjectMemory::new(
            kube_retention_runtime::object_memory::DEFAULT_BYTES,
        ),
    };
    let mut watches = Watches::new(client, watching);
    let kinds = Registry::builtin().clone();
    let jobs = kinds.named("Job.batch").unwrap();
    watches.start(jobs, &kinds[jobs]);
    let mut lists = Vec::new();
    for _ in 0..2 {
        let list = server.next().await.expect("each watch lists");
        assert_eq!(list.method, "GET");
        assert_eq!(list.path, "/apis/batch/v1/jobs");
        let metadata_only = list.accept.contains("as=PartialObjectMetadata");
        let selected = list
            .query
            .contains("labelSelector=retention.dev%2Fmanaged%3Dtrue");
        assert!(
            metadata_only != selected,
            "{} accepting {}",
            list.line(),
            list.accept
        );
        lists.push(metadata_only);
        let kind = if metadata_only {
            "PartialObjectMetadataList"
        } else {
            "JobList"
        };
        list.reply(
            200,
            &json!({"apiVersion": "v1", "kind": kind,
                                "metadata": {"resourceVersion": "123457"}, "items": [job()]}),
        );
    }
    lists.sort();
    assert_eq!(lists, [false, true], "one whole, one metadata-only");
    let (mut object, mut metadata) = (None, None);
    while object.is_none() || metadata.is_none() {
        match watches.next().await.0 {
            WatchEvent::Object(kind, Ok(Event::InitApply(applied))) if kind == jobs => {
                object = Some(applied);
            }
            WatchEvent::Metadata(kind, Ok(Event::InitApply(applied))) if kind == jobs => {
                metadata = Some(applied);
            }
            WatchEvent::Object(_, Err(error)) | WatchEvent::Metadata(_, Err(error)) => {
                panic!("the watch failed: {error}")
            }
            _ => {}
        }
    }
    assert_eq!(object.unwrap(), dynamic_less_managed_fields(&job()));
    let metadata = metadata.unwrap().metadata;
    assert_eq!(metadata.managed_fields, None);
    assert_eq!(metadata.resource_version.as_deref(), Some("123456"));
}
