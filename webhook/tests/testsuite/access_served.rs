//! `access::Reviews::served` against a mocked API server (tower-test): the plural a kind is
//! served under, from a discovery GET of its group version (`/api/v1` for the core group),
//! subresources skipped; a group version not served (404) is `None`, any other failure an error;
//! answers remembered for `DISCOVERY_CACHE_FOR`, failures not.

use crate::api_server;

use std::sync::Arc;

use api_server::{code, start};
use kube_retention_webhook::access::{CACHE_FOR, ControllerAccess, Reviews};
use serde_json::{Value, json};

fn resources(group_version: &str, resources: &[(&str, &str)]) -> Value {
    let resources: Vec<Value> = resources
        .iter()
        .map(|(name, kind)| {
            json!({"name": name, "singularName": "", "namespaced": true, "kind": kind,
                   "verbs": ["get", "list"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
           "resources": resources})
}

#[tokio::test(start_paused = true)]
async fn served_finds_the_plural_by_discovery_of_the_group_version() {
    let (mut server, reviews) = start(CACHE_FOR);
    for (api_version, kind, path, listed, plural) in [
        (
            "batch/v1",
            "Job",
            "/apis/batch/v1",
            vec![("jobs/status", "Job"), ("jobs", "Job")],
            Some("jobs"),
        ),
        (
            "v1",
            "Pod",
            "/api/v1",
            vec![("pods", "Pod"), ("pods/log", "Pod")],
            Some("pods"),
        ),
        (
            "apps/v1",
            "Build",
            "/apis/apps/v1",
            vec![("deployments", "Deployment")],
            None,
        ),
    ] {
        let served = {
            let reviews = reviews.clone();
            tokio::spawn(async move { reviews.served(api_version, kind).await })
        };
        let seen = server.next().await.expect("a discovery request");
        assert_eq!((seen.method.as_str(), seen.path.as_str()), ("GET", path));
        seen.reply(200, &resources(api_version, &listed));
        assert_eq!(
            served.await.unwrap().unwrap().as_deref(),
            plural,
            "{api_version} {kind}"
        );
    }
    assert!(server.quiet().await);
}

#[tokio::test(start_paused = true)]
async fn served_is_none_for_a_group_version_not_served_and_an_error_otherwise() {
    let (mut server, reviews) = start(CACHE_FOR);
    let served = |reviews: &Arc<Reviews>| {
        let reviews = reviews.clone();
        tokio::spawn(async move { reviews.served("shipwright.io/v1beta1", "BuildRun").await })
    };
    let asked = served(&reviews);
    let expected = ("GET".to_owned(), "/apis/shipwright.io/v1beta1".to_owned());
    assert_eq!(server.fail(404).await, expected);
    assert_eq!(asked.await.unwrap().unwrap(), None);

    // A fresh cache: the answer above is remembered (`access::DISCOVERY_CACHE_FOR`).
    let (mut server, reviews) = start(CACHE_FOR);
    let asked = served(&reviews);
    assert_eq!(server.fail(503).await, expected);
    assert_eq!(code(&asked.await.unwrap().unwrap_err()), 503);
}

/// An admission naming a kind of a group version looked up within
/// `access::DISCOVERY_CACHE_FOR` costs no discovery request; a failed lookup is not remembered,
/// and concurrent lookups share one request.
#[tokio::test(start_paused = true)]
async fn served_answers_are_remembered_and_failures_are_not() {
    let (mut server, reviews) = start(CACHE_FOR);
    let served = |reviews: &Arc<Reviews>, kind: &'static str| {
        let reviews = reviews.clone();
        tokio::spawn(async move { reviews.served("batch/v1", kind).await })
    };
    let failing = served(&reviews, "Job");
    assert_eq!(
        server.fail(503).await,
        ("GET".to_owned(), "/apis/batch/v1".to_owned())
    );
    assert_eq!(code(&failing.await.unwrap().unwrap_err()), 503);
    let askers: Vec<_> = (0..5).map(|_| served(&reviews, "Job")).collect();
    let seen = server.next().await.expect("the lookup again, once");
    assert_eq!(seen.path, "/apis/batch/v1");
    seen.reply(200, &resources("batch/v1", &[("jobs", "Job")]));
    for asker in askers {
        assert_eq!(asker.await.unwrap().unwrap().as_deref(), Some("jobs"));
    }
    let again = served(&reviews, "Job");
    assert_eq!(again.await.unwrap().unwrap().as_deref(), Some("jobs"));
    let other = served(&reviews, "CronJob");
    assert_eq!(
        other.await.unwrap().unwrap(),
        None,
        "not in batch/v1's listing"
    );
    assert!(server.quiet().await, "answered from the cache");
}
