//! What a tenant's Cleaners start is bounded: the cleans under way (a few at once, one of a
//! namespace's, the others waiting in turn, no task each), and the discovery lookups of the
//! kinds they name (a few at once, the next as one answers).

use kube_retention_apimock::Received;
use kube_retention_cleaners::book::{Clean, CleanerKey};
use kube_retention_cleaners::run::Cleans;
use serde_json::{Value, json};
use std::time::Duration;

fn clean(namespace: &str, name: &str) -> Clean {
    Clean {
        cleaner: CleanerKey {
            namespace: namespace.into(),
            name: name.into(),
        },
        uid: format!("uid-{name}"),
        generation: Some(1),
        approved: false,
        objects: Vec::new(),
        release: None,
        sink: None,
    }
}

fn names(cleans: &[Clean]) -> Vec<String> {
    cleans
        .iter()
        .map(|clean| clean.cleaner.to_string())
        .collect()
}

#[test]
fn one_clean_of_a_namespace_at_a_time_namespaces_in_turn_and_a_few_in_all() {
    let mut cleans = Cleans::default();
    for index in 0..100 {
        cleans.submit(clean("flood", &format!("c-{index}")));
    }
    cleans.submit(clean("quiet", "one"));
    let started: Vec<Clean> = std::iter::from_fn(|| cleans.start_next()).collect();
    assert_eq!(names(&started), ["flood/c-0", "quiet/one"]);
    for index in 0..20 {
        cleans.submit(clean(&format!("team-{index}"), "c"));
    }
    let more: Vec<Clean> = std::iter::from_fn(|| cleans.start_next()).collect();
    assert_eq!(
        started.len() + more.len(),
        kube_retention_cleaners::run::cleans::IN_FLIGHT
    );
    assert_eq!(cleans.load().1, 8);
    cleans.ended("flood");
    let next = cleans.start_next().expect("a place is free");
    assert_ne!(
        next.cleaner.namespace, "flood",
        "the others' turns come first"
    );
    let waiting = cleans.drain_waiting();
    let started = 8 + 1;
    assert_eq!(
        waiting.len() + started,
        100 + 1 + 20,
        "every clean is somewhere"
    );
    assert_eq!(cleans.load().0, 0);
}

/// A Cleaner in `namespace` naming a kind of a group of its own.
fn cleaner(index: usize) -> Value {
    json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": format!("c{index}"), "namespace": format!("team-{index}"),
                     "uid": format!("uid-{index}"), "resourceVersion": "3",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"targets": [{"name": "widgets", "delete": true, "reference": {
            "apiGroup": format!("example-{index}.dev"), "version": "v1", "kind": "Widget"}}]}
    })
}

/// The discovery lookups that arrive within half a second, left unanswered.
async fn lookups(
    api: &mut kube_retention_apimock::ApiServer,
    other: &mut Vec<Received>,
) -> Vec<Received> {
    let mut arrived = Vec::new();
    while let Some(received) = api.next_within(Duration::from_millis(500)).await {
        if received.path.starts_with("/apis/example-") {
            arrived.push(received);
        } else if received.path == "/apis/retention.dev/v1alpha1/cleaners"
            && !received.query.contains("watch=true")
        {
            let items: Vec<Value> = (0..20).map(cleaner).collect();
            received.reply(
                200,
                &json!({"apiVersion": "v1", "kind": "CleanerList",
                "metadata": {"resourceVersion": "10"}, "items": items}),
            );
        } else {
            other.push(received);
        }
    }
    arrived
}

#[tokio::test]
async fn the_kinds_cleaners_name_are_looked_up_a_few_at_a_time() {
    let (client, mut api) = kube_retention_apimock::pair();
    let cleaners = crate::clean_support::run_cleaners(client.clone());
    let mut other = Vec::new();
    let mut first = lookups(&mut api, &mut other).await;
    assert_eq!(
        first.len(),
        kube_retention_cleaners::run::DISCOVERIES,
        "twenty kinds named, a few looked up at once"
    );
    first.pop().expect("a lookup").refuse(404, "no such group");
    let next = lookups(&mut api, &mut other).await;
    assert_eq!(next.len(), 1, "one answered, the next goes");
    cleaners.running.abort();
    drop((first, next, other, cleaners));
}
