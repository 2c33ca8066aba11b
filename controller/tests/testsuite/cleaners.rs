//! The Cleaners' book without a cluster: when Cleaners are evaluated (once each after a restart,
//! at once when a target changes, at their schedule otherwise) and what a clean deletes.

use crate::book_support::evaluate;
use jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube_retention_cleaners::book::{Book, CleanerKey, Scope, ScopeWatch, Unavailable};
use kube_retention_cleaners::status::Problem;
use kube_retention_common::cleaner::{Cleaner, Verdict};
use serde_json::{Value, json};

const NOW: &str = "2026-11-22T12:00:00Z";

fn at(text: &str) -> Timestamp {
    text.parse().expect("a timestamp")
}

fn revision() -> GroupVersionKind {
    GroupVersionKind::gvk("e2e.retention.dev", "v1", "Revision")
}

fn config_map() -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", "ConfigMap")
}

fn resource(kind: &GroupVersionKind, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(kind, plural)
}

fn cleaner(name: &str, conditions: &[&str]) -> Cleaner {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": name, "namespace": "previews", "uid": format!("uid-{name}"),
                     "generation": 3, "creationTimestamp": "2026-11-22T10:00:00Z"},
        "spec": {
            "ttl": "1h", "retry": {"period": "1h"},
            "targets": [
                {"name": "revisions", "includeWhenEvaluating": true, "delete": true,
                 "reference": {"apiGroup": "e2e.retention.dev", "version": "v1", "kind": "Revision",
                               "matchLabels": {"app": name}}},
                {"name": "settings", "delete": true,
                 "reference": {"version": "v1", "kind": "ConfigMap", "name": format!("{name}-settings")}}
            ],
            "conditions": conditions
        }
    }))
    .expect("a Cleaner")
}

fn object(kind: &GroupVersionKind, name: &str, labels: Value, status: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": kind.api_version(), "kind": kind.kind,
        "metadata": {"name": name, "namespace": "previews", "uid": format!("uid-{name}"), "labels": labels},
        "status": status
    }))
    .expect("an object")
}

/// `kind` in the Cleaners' namespace.
fn here(kind: GroupVersionKind) -> Scope {
    Scope::new(kind, "previews")
}

/// Starts the watches the book plans, each listing.
fn start_watches(book: &mut Book) -> Vec<(Scope, ScopeWatch)> {
    let plan = book.plan_watches().expect("something to plan");
    let mut started = Vec::new();
    for (scope, resource, how) in plan {
        book.watch_started(&scope, resource, &how);
        book.objects_relisting(&scope);
        started.push((scope, how));
    }
    started
}

fn key(name: &str) -> CleanerKey {
    CleanerKey {
        namespace: "previews".into(),
        name: name.into(),
    }
}

const NOT_ACTIVE: &str = "!revisions.items.exists(r, r.status.phase == \"Active\")";

/// A book with Cleaners `names` listed and both target kinds listed with `revisions`.
fn listed(names: &[&str], revisions: Vec<DynamicObject>) -> Book {
    let mut book = Book::default();
    book.relist_started();
    for name in names {
        book.applied(&cleaner(name, &[NOT_ACTIVE]));
    }
    book.relist_done();
    book.resolved(&revision(), Ok(resource(&revision(), "revisions")));
    book.resolved(&config_map(), Ok(resource(&config_map(), "configmaps")));
    start_watches(&mut book);
    for object in revisions {
        book.object_applied(
            &here(revision()),
            object,
            kube_retention_runtime::object_memory::Charge::none(),
        );
    }
    let settings = object(&config_map(), "p42-settings", json!({}), json!({}));
    book.object_applied(
        &here(config_map()),
        settings,
        kube_retention_runtime::object_memory::Charge::none(),
    );
    book
}

#[test]
fn after_a_restart_each_cleaner_is_evaluated_once_when_every_target_kind_is_listed() {
    let active = object(
        &revision(),
        "r1",
        json!({"app": "p42"}),
        json!({"phase": "Active"}),
    );
    let mut book = listed(&["p42", "p43"], vec![active]);
    assert_eq!(
        book.take_due(at(NOW)),
        Vec::<CleanerKey>::new(),
        "the kinds are still listing"
    );
    book.objects_listed(&here(revision()));
    assert_eq!(
        book.take_due(at(NOW)),
        Vec::<CleanerKey>::new(),
        "ConfigMaps are still listing"
    );
    book.objects_listed(&here(config_map()));
    assert_eq!(book.take_due(at(NOW)), vec![key("p42"), key("p43")]);
    let waiting = evaluate(&mut book, &key("p42"), at(NOW)).expect("tracked");
    let until = at("2026-11-22T13:00:00Z");
    let expected = Verdict::Wait {
        until,
        unmet: 0,
        found: false,
    };
    assert_eq!(waiting.verdict, Ok(expected), "p42 has an active revision");
    let clean = evaluate(&mut book, &key("p43"), at(NOW)).expect("tracked");
    assert_eq!(clean.verdict, Ok(Verdict::Clean), "p43 has none");
    assert_eq!(
        book.take_due(at(NOW)),
        Vec::<CleanerKey>::new(),
        "evaluated once each"
    );
    assert_eq!(book.next_deadline(), Some(at("2026-11-22T13:00:00Z")));
}

#[test]
fn a_target_change_wakes_only_the_cleaners_that_select_it() {
    let active = object(
        &revision(),
        "r1",
        json!({"app": "p42"}),
        json!({"phase": "Active"}),
    );
    let other = object(
        &revision(),
        "r2",
        json!({"app": "p43"}),
        json!({"phase": "Active"}),
    );
    let mut book = listed(&["p42", "p43"], vec![active, other]);
    book.objects_listed(&here(revision()));
    book.objects_listed(&here(config_map()));
    for due in book.take_due(at(NOW)) {
        evaluate(&mut book, &due, at(NOW));
    }
    let retired = object(
        &revision(),
        "r1",
        json!({"app": "p42"}),
        json!({"phase": "Retired"}),
    );
    book.object_applied(
        &here(revision()),
        retired,
        kube_retention_runtime::object_memory::Charge::none(),
    );
    assert_eq!(book.take_due(at(NOW)), vec![key("p42")]);
    let evaluation = evaluate(&mut book, &key("p42"), at(NOW)).expect("tracked");
    assert_eq!(evaluation.verdict, Ok(Verdict::Clean));
    assert_eq!(
        evaluation.resolved,
        [
            "p42-settings.configmaps/v1",
            "r1.revisions.e2e.retention.dev/v1"
        ]
    );
    let clean = evaluation.clean.expect("the group goes");
    let doomed: Vec<(&str, &str)> = clean
        .objects
        .iter()
        .map(|doomed| (doomed.name.as_str(), doomed.uid.as_str()))
        .collect();
    assert_eq!(
        doomed,
        [("r1", "uid-r1"), ("p42-settings", "uid-p42-settings")]
    );
    assert_eq!(clean.uid, "uid-p42");
    // A relabelled revision wakes the Cleaner that selected it before.
    let moved = object(&revision(), "r9", json!({"app": "p43"}), json!({}));
    book.object_applied(
        &here(revision()),
        moved.clone(),
        kube_retention_runtime::object_memory::Charge::none(),
    );
    assert_eq!(book.take_due(at(NOW)), vec![key("p43")]);
    book.object_applied(
        &here(revision()),
        object(&revision(), "r9", json!({"app": "none"}), json!({})),
        kube_retention_runtime::object_memory::Charge::none(),
    );
    assert_eq!(book.take_due(at(NOW)), vec![key("p43")]);
}

#[test]
fn a_cleaner_being_cleaned_is_not_evaluated_again_and_a_failed_clean_is_retried() {
    let mut book = listed(&["p42"], Vec::new());
    book.objects_listed(&here(revision()));
    book.objects_listed(&here(config_map()));
    assert_eq!(book.take_due(at(NOW)), vec![key("p42")]);
    let evaluation = evaluate(&mut book, &key("p42"), at(NOW)).expect("tracked");
    assert!(evaluation.clean.is_some());
    book.object_deleted(&here(config_map()), "p42-settings");
    assert_eq!(book.take_due(at(NOW)), Vec::<CleanerKey>::new(), "cleaning");
    book.clean_done(&key("p42"), false, at(NOW));
    assert_eq!(book.next_deadline(), Some(at("2026-11-22T12:00:30Z")));
    assert_eq!(book.take_due(at("2026-11-22T12:00:30Z")), vec![key("p42")]);
    let again = evaluate(&mut book, &key("p42"), at("2026-11-22T12:00:30Z")).expect("tracked");
    assert!(again.clean.is_some());
    book.clean_done(&key("p42"), true, at("2026-11-22T12:00:31Z"));
    // The deletions the clean caused must not clean the group a second time.
    book.object_applied(
        &here(config_map()),
        object(&config_map(), "p42-settings", json!({}), json!({})),
        kube_retention_runtime::object_memory::Charge::none(),
    );
    book.object_deleted(&here(config_map()), "p42-settings");
    assert_eq!(
        book.take_due(at("2026-11-22T14:00:00Z")),
        Vec::<CleanerKey>::new()
    );
    assert_eq!(book.next_deadline(), None);
}

#[test]
fn its_own_status_write_does_not_wake_a_cleaner_but_a_new_spec_does() {
    let mut book = listed(&["p42"], Vec::new());
    book.objects_listed(&here(revision()));
    book.objects_listed(&here(config_map()));
    book.take_due(at(NOW));
    let mut with_status = cleaner("p42", &[NOT_ACTIVE]);
    with_status.status = Some(Default::default());
    book.applied(&with_status);
    assert_eq!(book.take_due(at(NOW)), Vec::<CleanerKey>::new());
    book.applied(&cleaner("p42", &["revisions.items.size() > 5"]));
    assert_eq!(book.take_due(at(NOW)), vec![key("p42")]);
}

#[test]
fn a_target_kind_that_cannot_be_watched_is_a_problem_retried_soon() {
    let mut book = Book::default();
    book.relist_started();
    book.applied(&cleaner("p42", &[]));
    book.relist_done();
    let unserved = Unavailable::NotServed("404 page not found".into());
    book.resolved(&revision(), Err(unserved));
    book.resolved(&config_map(), Ok(resource(&config_map(), "configmaps")));
    let started = start_watches(&mut book);
    assert_eq!(
        started.len(),
        1,
        "only the served kind is watched: {started:?}"
    );
    book.objects_listed(&here(config_map()));
    assert_eq!(book.take_due(at(NOW)), vec![key("p42")]);
    let evaluation = evaluate(&mut book, &key("p42"), at(NOW)).expect("tracked");
    let Err(Problem::TargetKind { kind, reason }) = evaluation.verdict else {
        panic!("expected a problem, got {:?}", evaluation.verdict);
    };
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        (
            "e2e.retention.dev/v1/Revision",
            "not served by this cluster: 404 page not found"
        )
    );
    assert!(
        evaluation.clean.is_none(),
        "nothing is deleted while a target kind is unknown"
    );
    assert_eq!(book.next_deadline(), Some(at("2026-11-22T12:00:30Z")));
}

#[test]
fn a_clean_the_guard_holds_waits_unscheduled_for_its_approval_which_wakes_it() {
    let mut book = listed(&["p42"], Vec::new());
    book.objects_listed(&here(revision()));
    book.objects_listed(&here(config_map()));
    assert_eq!(book.take_due(at(NOW)), vec![key("p42")]);
    let evaluation = evaluate(&mut book, &key("p42"), at(NOW)).expect("tracked");
    let clean = evaluation.clean.expect("its conditions hold");
    assert_eq!((clean.generation, clean.approved), (Some(3), false));
    book.clean_awaits_approval(&key("p42"));
    assert_eq!(book.next_deadline(), None, "no retry on a schedule");
    assert_eq!(
        book.take_due(at("2026-11-22T18:00:00Z")),
        Vec::<CleanerKey>::new()
    );
    // `kubectl retention approve cleaner p42` names the generation: the Cleaner is evaluated
    // again, and this time its clean is approved.
    let mut approved = cleaner("p42", &[NOT_ACTIVE]);
    approved
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("retention.dev/approved-generation".into(), "3".into());
    book.applied(&approved);
    assert_eq!(book.take_due(at(NOW)), vec![key("p42")]);
    let again = evaluate(&mut book, &key("p42"), at(NOW)).expect("tracked");
    assert!(again.clean.expect("it cleans").approved);
    // A new spec is a new generation: the approval of the one before approves nothing.
    book.clean_awaits_approval(&key("p42"));
    let mut changed = cleaner("p42", &[NOT_ACTIVE, "1 == 1"]);
    changed.metadata.generation = Some(4);
    changed
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("retention.dev/approved-generation".into(), "3".into());
    book.applied(&changed);
    assert_eq!(book.take_due(at(NOW)), vec![key("p42")]);
    let changed = evaluate(&mut book, &key("p42"), at(NOW)).expect("tracked");
    let clean = changed.clean.expect("it cleans");
    assert_eq!((clean.generation, clean.approved), (Some(4), false));
}
