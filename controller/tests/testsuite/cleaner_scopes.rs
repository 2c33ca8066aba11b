//! Which targets the Cleaners watch: one watch per kind in each Cleaner's own namespace, as
//! narrow as the references allow, metadata only where no condition reads the objects, and at
//! most [`KINDS_PER_NAMESPACE`] kinds for one namespace — so a tenant's Cleaner never makes the
//! controller hold another namespace's objects.

use crate::book_support::evaluate;
use jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube_retention_cleaners::book::{
    Book, CleanerKey, KINDS_PER_NAMESPACE, Scope, ScopeWatch, TARGETS_HELD_IN_ALL,
    TARGETS_HELD_PER_NAMESPACE,
};
use kube_retention_cleaners::status::Problem;
use kube_retention_cleaners::targets::KindObjects;
use kube_retention_common::cleaner::Cleaner;
use serde_json::{Value, json};

fn cleaner(namespace: &str, name: &str, targets: Value) -> Cleaner {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                     "creationTimestamp": "2026-11-22T10:00:00Z"},
        "spec": {"targets": targets, "conditions": []}
    }))
    .unwrap()
}

fn target(name: &str, kind: &str, reference: Value, read: bool) -> Value {
    let mut reference = reference;
    reference["version"] = json!("v1");
    reference["kind"] = json!(kind);
    json!({"name": name, "includeWhenEvaluating": read, "delete": true, "reference": reference})
}

fn gvk(kind: &str) -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", kind)
}

/// Every kind served, by the plural of its lowercased name.
fn serve_all(book: &mut Book) {
    let kinds: Vec<GroupVersionKind> = book.kinds().map(|(kind, _)| kind.clone()).collect();
    for kind in kinds {
        let plural = format!("{}s", kind.kind.to_lowercase());
        book.resolved(&kind, Ok(ApiResource::from_gvk_with_plural(&kind, &plural)));
    }
}

/// The watches the book plans, started and listed as the loop would: kind, namespace, how.
fn plan(book: &mut Book) -> Vec<(String, String, ScopeWatch)> {
    let mut plan = Vec::new();
    for (scope, resource, how) in book.plan_watches().unwrap() {
        book.watch_started(&scope, resource, &how);
        book.objects_listed(&scope);
        plan.push((scope.kind.kind, scope.namespace, how));
    }
    plan.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    plan
}

fn watch(labels: Option<&str>, fields: Option<&str>, bodies: bool) -> ScopeWatch {
    ScopeWatch {
        labels: labels.map(str::to_owned),
        fields: fields.map(str::to_owned),
        bodies,
    }
}

#[test]
fn targets_are_watched_in_each_cleaners_namespace_as_narrowly_as_their_references_allow() {
    let mut book = Book::default();
    book.relist_started();
    let previews = json!([
        target(
            "revisions",
            "Revision",
            json!({"matchLabels": {"app": "p42"}}),
            true
        ),
        target(
            "settings",
            "ConfigMap",
            json!({"name": "p42-settings"}),
            false
        ),
    ]);
    book.applied(&cleaner("previews", "p42", previews));
    let staging = json!([target("all", "ConfigMap", json!({}), false)]);
    book.applied(&cleaner("staging", "everything", staging));
    book.relist_done();
    serve_all(&mut book);
    assert_eq!(
        plan(&mut book),
        [
            (
                "ConfigMap".into(),
                "previews".into(),
                watch(None, Some("metadata.name=p42-settings"), false)
            ),
            (
                "ConfigMap".into(),
                "staging".into(),
                watch(None, None, false)
            ),
            (
                "Revision".into(),
                "previews".into(),
                watch(Some("app=p42"), None, true)
            ),
        ]
    );
    assert!(
        book.plan_watches().is_none(),
        "nothing changed: nothing to plan"
    );
    // A second Cleaner selecting other revisions there widens that watch to the namespace.
    book.applied(&cleaner(
        "previews",
        "p43",
        json!([target(
            "revisions",
            "Revision",
            json!({"matchLabels": {"app": "p43"}}),
            false
        )]),
    ));
    let revisions = plan(&mut book)
        .into_iter()
        .find(|(kind, _, _)| kind == "Revision");
    assert_eq!(
        revisions,
        Some((
            "Revision".into(),
            "previews".into(),
            watch(None, None, true)
        ))
    );
    // Labels that cannot be written in a selector are not: the whole namespace is watched.
    book.removed(&CleanerKey {
        namespace: "previews".into(),
        name: "p43".into(),
    });
    book.applied(&cleaner(
        "previews",
        "p42",
        json!([target(
            "revisions",
            "Revision",
            json!({"matchLabels": {"app": "a,b=c"}}),
            true
        )]),
    ));
    let revisions = plan(&mut book)
        .into_iter()
        .find(|(kind, _, _)| kind == "Revision");
    assert_eq!(revisions.unwrap().2, watch(None, None, true));
}

#[test]
fn a_namespace_past_its_kinds_is_told_which_kind_is_not_watched() {
    let mut book = Book::default();
    book.relist_started();
    let kinds: Vec<String> = (0..=KINDS_PER_NAMESPACE)
        .map(|n| format!("Kind{n:02}"))
        .collect();
    let (first, last) = kinds.split_at(KINDS_PER_NAMESPACE);
    let many: Vec<Value> = first
        .iter()
        .map(|kind| target(&kind.to_lowercase(), kind, json!({}), false))
        .collect();
    book.applied(&cleaner("greedy", "many", json!(many)));
    let one_more = json!([target("more", &last[0], json!({}), false)]);
    book.applied(&cleaner("greedy", "one-more", one_more));
    book.applied(&cleaner(
        "quiet",
        "one",
        json!([target("x", &last[0], json!({}), false)]),
    ));
    book.relist_done();
    serve_all(&mut book);
    let plan = plan(&mut book);
    let greedy = plan
        .iter()
        .filter(|(_, namespace, _)| namespace == "greedy")
        .count();
    assert_eq!(greedy, KINDS_PER_NAMESPACE);
    assert!(
        plan.contains(&(last[0].clone(), "quiet".into(), watch(None, None, false))),
        "another namespace's watch of that kind is its own"
    );
    let now: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
    let key = CleanerKey {
        namespace: "greedy".into(),
        name: "one-more".into(),
    };
    let evaluation = evaluate(&mut book, &key, now).unwrap();
    let Err(Problem::TargetKind { kind, reason }) = evaluation.verdict else {
        panic!("expected a problem, got {:?}", evaluation.verdict);
    };
    assert_eq!(kind, format!("v1/{}", last[0]));
    assert!(
        reason.contains("refer to 17 kinds, and at most 16 are watched for one namespace"),
        "{reason}"
    );
}

#[test]
fn objects_no_condition_reads_are_kept_as_what_selecting_and_deleting_them_needs() {
    let kind = gvk("ConfigMap");
    let mut objects = KindObjects::new(
        ApiResource::from_gvk_with_plural(&kind, "configmaps"),
        false,
    );
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "previews", "uid": "uid-big",
                     "resourceVersion": "9", "labels": {"app": "p42"},
                     "annotations": {"filler": "x".repeat(200_000)},
                     "finalizers": ["example.com/hold"]},
        "data": {"payload": "y".repeat(500_000)}
    }))
    .unwrap();
    let (kept, _) = objects.applied(object);
    let kept = kept.unwrap();
    assert_eq!(kept.metadata.name.as_deref(), Some("big"));
    assert_eq!(kept.metadata.uid.as_deref(), Some("uid-big"));
    assert_eq!(kept.metadata.labels.as_ref().unwrap()["app"], "p42");
    assert_eq!(kept.metadata.annotations, None);
    assert_eq!(kept.data, Value::Null);
    assert!(serde_json::to_vec(kept.as_ref()).unwrap().len() < 1024);
}

#[test]
fn nothing_is_watched_before_the_cleaners_are_listed_and_a_widened_watch_holds_its_cleaners() {
    let mut book = Book::default();
    book.relist_started();
    let first = json!([target(
        "revisions",
        "Revision",
        json!({"matchLabels": {"app": "p42"}}),
        true
    )]);
    book.applied(&cleaner("previews", "p42", first));
    serve_all(&mut book);
    assert!(
        book.plan_watches().is_none(),
        "planned for one Cleaner, the watch would be planned and listed again for the next"
    );
    book.relist_done();
    assert_eq!(
        plan(&mut book),
        [(
            "Revision".into(),
            "previews".into(),
            watch(Some("app=p42"), None, true)
        )]
    );
    let now: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
    assert_eq!(book.take_due(now).len(), 1);
    // Another Cleaner widens the watch, which started too recently to start again at once:
    // what it holds lacks p43's revisions, so both wait for the wider watch's list.
    let second = json!([target(
        "revisions",
        "Revision",
        json!({"matchLabels": {"app": "p43"}}),
        true
    )]);
    book.applied(&cleaner("previews", "p43", second));
    let scope = Scope::new(GroupVersionKind::gvk("", "v1", "Revision"), "previews");
    book.plan_watches().unwrap();
    book.scope_waits(&scope);
    assert_eq!(
        book.take_due(now),
        Vec::<CleanerKey>::new(),
        "waiting for the list"
    );
    book.replan();
    assert_eq!(plan(&mut book)[0].2, watch(None, None, true));
    assert_eq!(book.take_due(now).len(), 2, "listed: both evaluated");
}

/// A ConfigMap of `namespace` carrying `bytes` of data.
fn config_map_of(namespace: &str, name: &str, bytes: usize) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
        "data": {"payload": "x".repeat(bytes)}
    }))
    .unwrap()
}

/// A namespace editor's Cleaner reading every ConfigMap of its namespace, and megabyte
/// ConfigMaps by the dozen: the controller held them all, whole. Now its namespace's targets
/// hold at most TARGETS_HELD_PER_NAMESPACE: past it the scope is let go of — its objects
/// dropped, its watch not planned, its Cleaner judged not and saying why — while another
/// namespace's Cleaner reading its own ConfigMaps goes on; the next retry watches it again.
#[test]
fn a_namespace_whose_targets_outgrow_its_bound_is_let_go_of_and_says_why() {
    let mut book = Book::default();
    book.relist_started();
    let reads_every_config_map = json!([target("maps", "ConfigMap", json!({}), true)]);
    book.applied(&cleaner("greedy", "reads", reads_every_config_map.clone()));
    book.applied(&cleaner("quiet", "reads", reads_every_config_map));
    book.relist_done();
    serve_all(&mut book);
    plan(&mut book);
    let greedy = Scope::new(gvk("ConfigMap"), "greedy");
    let quiet = Scope::new(gvk("ConfigMap"), "quiet");
    book.object_applied(
        &quiet,
        config_map_of("quiet", "settings", 10_000),
        kube_retention_runtime::object_memory::Charge::none(),
    );
    let megabyte = 1024 * 1024;
    let mut applied = 0;
    while book.objects_held("greedy").0 > 0 || applied == 0 {
        book.object_applied(
            &greedy,
            config_map_of("greedy", &format!("big-{applied}"), megabyte),
            kube_retention_runtime::object_memory::Charge::none(),
        );
        applied += 1;
        let (held, in_all) = book.objects_held("greedy");
        assert!(held <= TARGETS_HELD_PER_NAMESPACE, "{held} bytes held");
        assert!(in_all <= TARGETS_HELD_IN_ALL, "{in_all} bytes held in all");
        assert!(applied < 64, "never let go of");
    }
    assert!(
        (14..=17).contains(&applied),
        "let go of at the {applied}th megabyte"
    );
    let now: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
    let key = |namespace: &str| CleanerKey {
        namespace: namespace.into(),
        name: "reads".into(),
    };
    let evaluation = evaluate(&mut book, &key("greedy"), now).unwrap();
    let Err(Problem::TargetKind { kind, reason }) = evaluation.verdict else {
        panic!("expected a problem, got {:?}", evaluation.verdict);
    };
    assert_eq!(kind, "v1/ConfigMap");
    assert!(
        reason.starts_with(
            "the objects the Cleaners of namespace greedy refer to would hold more than 16 MiB"
        ) && reason.contains("delete nothing"),
        "{reason}"
    );
    assert!(evaluation.clean.is_none(), "nothing deleted");
    let quiet_evaluation = evaluate(&mut book, &key("quiet"), now).unwrap();
    assert!(
        quiet_evaluation.verdict.is_ok(),
        "{:?}",
        quiet_evaluation.verdict
    );
    let watched = plan(&mut book);
    assert!(
        !watched
            .iter()
            .any(|(_, namespace, _)| namespace == "greedy"),
        "the greedy scope's watch is stopped: {watched:?}"
    );
    book.retry_unavailable();
    let watched = plan(&mut book);
    assert!(
        watched
            .iter()
            .any(|(_, namespace, _)| namespace == "greedy"),
        "watched again at the retry: {watched:?}"
    );
}
