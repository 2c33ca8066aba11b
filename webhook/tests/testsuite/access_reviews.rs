//! `access::Reviews`'s SubjectAccessReviews against a mocked API server (tower-test), in the
//! style of controller-rs's `ApiServerVerifier`: each scenario asserts the exact requests — a
//! review POSTed with the subject (user, groups, uid, extra) and the question (verb, group,
//! resource, namespace, name), the controller's carrying its ServiceAccount's groups — and what
//! the cache makes of the answers: one review per question within the time to live and one
//! again after it, one review for many concurrent askers, a failure (500) returned to every
//! asker waiting for it and not remembered.
//!
//! Time is paused (a request that never comes is seen at once) except in the expiry test: the
//! cache's clock is not tokio's, so that one uses a 50 ms time to live and waits for real.

use crate::api_server;

use std::time::Duration;

use api_server::{CONTROLLER, REVIEWS, ask, code, delete_job, start, writer};
use kube_retention_webhook::access::{CACHE_FOR, ControllerAccess};
use serde_json::json;
use tokio::task::JoinSet;

#[tokio::test(start_paused = true)]
async fn a_review_posts_the_writer_and_the_question() {
    let (mut server, reviews) = start(CACHE_FOR);
    let asked = ask(&reviews, writer("alice"), delete_job(Some("nightly")));
    let spec = server.review(true).await;
    assert_eq!(
        spec,
        json!({
            "user": "alice",
            "groups": ["team-a-editors", "system:authenticated"],
            "uid": "uid-of-alice",
            "extra": {"scopes": ["edit"]},
            "resourceAttributes": {"verb": "delete", "group": "batch", "resource": "jobs",
                                   "namespace": "team-a", "name": "nightly"},
        })
    );
    assert!(asked.await.unwrap().unwrap());
    assert!(server.quiet().await);
}

#[tokio::test(start_paused = true)]
async fn the_controllers_reviews_carry_its_service_accounts_groups_one_per_verb() {
    let (mut server, reviews) = start(CACHE_FOR);
    let missing = {
        let reviews = reviews.clone();
        tokio::spawn(async move { reviews.missing("batch", "jobs").await })
    };
    let mut verbs = Vec::new();
    for allowed in [true, true, false, false] {
        let spec = server.review(allowed).await;
        assert_eq!(spec["user"], CONTROLLER);
        assert_eq!(
            spec["groups"],
            json!([
                "system:serviceaccounts",
                "system:authenticated",
                "system:serviceaccounts:kube-retention"
            ])
        );
        let attributes = &spec["resourceAttributes"];
        assert_eq!(
            (&attributes["group"], &attributes["resource"]),
            (&json!("batch"), &json!("jobs"))
        );
        assert!(
            attributes.get("namespace").is_none(),
            "cluster-wide: {attributes}"
        );
        assert!(
            spec.get("uid").is_none() && spec.get("extra").is_none(),
            "{spec}"
        );
        verbs.push(attributes["verb"].as_str().unwrap().to_owned());
    }
    assert_eq!(verbs, ["list", "watch", "patch", "delete"]);
    assert_eq!(missing.await.unwrap().unwrap(), ["patch", "delete"]);
    assert!(server.quiet().await);

    // Asked again within the time to live: every answer is remembered.
    assert_eq!(
        reviews.missing("batch", "jobs").await.unwrap(),
        ["patch", "delete"]
    );
    assert!(server.quiet().await);
}

#[tokio::test(start_paused = true)]
async fn an_answer_is_reused_within_its_time_to_live_per_subject_and_question() {
    let (mut server, reviews) = start(CACHE_FOR);
    let asked = ask(&reviews, writer("alice"), delete_job(None));
    server.review(false).await;
    assert!(!asked.await.unwrap().unwrap());

    // The same question: answered from the cache, without the API server.
    assert!(
        !reviews
            .review(&writer("alice"), &delete_job(None))
            .await
            .unwrap()
    );
    assert!(server.quiet().await);

    // Another writer, or another question, is asked about.
    let asked = ask(&reviews, writer("bob"), delete_job(None));
    assert_eq!(server.review(true).await["user"], "bob");
    assert!(asked.await.unwrap().unwrap());
    let asked = ask(&reviews, writer("alice"), delete_job(Some("nightly")));
    assert_eq!(
        server.review(true).await["resourceAttributes"]["name"],
        "nightly"
    );
    assert!(asked.await.unwrap().unwrap());
    assert!(server.quiet().await);
}

#[tokio::test]
async fn after_its_time_to_live_the_question_is_asked_again() {
    // The cache's clock is not tokio's: a short time to live, waited for in real time.
    let time_to_live = Duration::from_millis(50);
    let (mut server, reviews) = start(time_to_live);
    let asked = ask(&reviews, writer("alice"), delete_job(None));
    server.review(true).await;
    assert!(asked.await.unwrap().unwrap());

    tokio::time::sleep(time_to_live * 2).await;
    let asked = ask(&reviews, writer("alice"), delete_job(None));
    server.review(false).await;
    assert!(
        !asked.await.unwrap().unwrap(),
        "the new answer, not the expired one"
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_asks_for_one_question_send_one_review() {
    let (mut server, reviews) = start(CACHE_FOR);
    let mut asks = JoinSet::new();
    for _ in 0..16 {
        let reviews = reviews.clone();
        asks.spawn(async move { reviews.review(&writer("alice"), &delete_job(None)).await });
    }
    server.review(true).await;
    assert!(server.quiet().await, "one review for every asker");
    let answers = asks.join_all().await;
    assert_eq!(answers.len(), 16);
    assert!(answers.into_iter().all(|answer| answer.unwrap()));
}

#[tokio::test(start_paused = true)]
async fn a_failed_review_is_an_error_and_not_remembered() {
    let (mut server, reviews) = start(CACHE_FOR);
    let asked = ask(&reviews, writer("alice"), delete_job(None));
    assert_eq!(
        server.fail(500).await,
        ("POST".to_owned(), REVIEWS.to_owned())
    );
    assert_eq!(code(&asked.await.unwrap().unwrap_err()), 500);

    // The next ask sends the review again, and its answer is remembered.
    let asked = ask(&reviews, writer("alice"), delete_job(None));
    server.review(true).await;
    assert!(asked.await.unwrap().unwrap());
    assert!(
        reviews
            .review(&writer("alice"), &delete_job(None))
            .await
            .unwrap()
    );
    assert!(server.quiet().await);
}

#[tokio::test(start_paused = true)]
async fn concurrent_asks_share_one_failure_with_its_status() {
    let (mut server, reviews) = start(CACHE_FOR);
    let mut asks = JoinSet::new();
    for _ in 0..8 {
        let reviews = reviews.clone();
        asks.spawn(async move { reviews.review(&writer("alice"), &delete_job(None)).await });
    }
    server.fail(500).await;
    assert!(
        server.quiet().await,
        "the failure is every waiting asker's answer"
    );
    for answer in asks.join_all().await {
        assert_eq!(code(&answer.unwrap_err()), 500);
    }

    let asked = ask(&reviews, writer("alice"), delete_job(None));
    server.review(true).await;
    assert!(
        asked.await.unwrap().unwrap(),
        "asked again after the failure"
    );
}
