//! Deletion Events aggregated per parent (or per kind in a namespace) over a window, without a
//! cluster: notices and the clock in, Events out.

use jiff::{SignedDuration, Timestamp};
use kube_retention_controller::executor::digest::{Digest, Notice};
use kube_retention_state::{EventTarget, Reason};

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn target(kind: &str, name: &str) -> EventTarget {
    EventTarget {
        api_version: "v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: Some(format!("uid-{name}")),
    }
}

fn buildrun(name: &str, build: &str) -> Notice {
    Notice {
        target: target("Build", build),
        namespace: "ci".into(),
        kind: "BuildRun".into(),
        name: name.into(),
        reason: Reason::Ttl,
        by: String::new(),
    }
}

fn job(name: &str) -> Notice {
    Notice {
        target: target("Job", name),
        namespace: "ci".into(),
        kind: "Job".into(),
        name: name.into(),
        reason: Reason::Ttl,
        by: " (by RetentionPolicy ci/nightly)".into(),
    }
}

#[test]
fn deletions_of_one_parent_within_the_window_share_one_event() {
    let mut digest = Digest::new(SignedDuration::from_secs(5));
    let start = at("2026-11-23T10:00:00Z");
    for index in (0..37).rev() {
        let name = format!("hello-{index:02}");
        assert_eq!(digest.add(buildrun(&name, "hello"), start), None);
    }
    assert_eq!(
        digest.add(
            buildrun("other-1", "other"),
            start + SignedDuration::from_secs(1)
        ),
        None
    );
    assert_eq!(digest.next_due(), Some(at("2026-11-23T10:00:05Z")));
    assert_eq!(digest.due(at("2026-11-23T10:00:04.999Z")), []);

    let events = digest.due(at("2026-11-23T10:00:05Z"));
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].note,
        "Deleted 37 BuildRuns of Build hello: their retention time passed: \
         hello-00, hello-01, hello-02, hello-03, hello-04 and 32 more"
    );
    assert_eq!(events[0].reason, "RetentionExpired");
    assert_eq!(events[0].target, target("Build", "hello"));

    let events = digest.due(at("2026-11-23T10:00:06Z"));
    assert_eq!(
        events[0].note, "Deleted BuildRun other-1: its retention time passed",
        "a lone deletion reads as before"
    );
    assert_eq!(digest.next_due(), None);
}

#[test]
fn objects_without_a_parent_are_grouped_by_kind_namespace_and_policy() {
    let mut digest = Digest::new(SignedDuration::from_secs(5));
    let start = at("2026-11-23T10:00:00Z");
    for name in ["nightly-1", "nightly-2", "nightly-3"] {
        digest.add(job(name), start);
    }
    let mut limit = job("nightly-4");
    limit.reason = Reason::Limit;
    digest.add(limit, start);
    let events = digest.due(at("2026-11-23T10:00:05Z"));
    let notes: Vec<&str> = events.iter().map(|event| event.note.as_str()).collect();
    assert_eq!(
        notes,
        [
            "Deleted 3 Jobs in namespace ci: their retention time passed (by RetentionPolicy ci/nightly): nightly-1, nightly-2, nightly-3",
            "Deleted Job nightly-4: it exceeded its history limit (by RetentionPolicy ci/nightly)",
        ]
    );
    assert_eq!(
        events[0].target,
        target("Job", "nightly-3"),
        "the last one deleted"
    );
}

#[test]
fn a_zero_window_records_each_deletion_at_once() {
    let mut digest = Digest::new(SignedDuration::ZERO);
    let event = digest
        .add(buildrun("hello-1", "hello"), at("2026-11-23T10:00:00Z"))
        .unwrap();
    assert_eq!(
        event.note,
        "Deleted BuildRun hello-1: its retention time passed"
    );
    assert_eq!(digest.next_due(), None);
}
