//! The Lease elector (`leader.rs`) against a mocked API server (tower-test), in the style of
//! controller-rs's `ApiServerVerifier`, on paused time: each scenario asserts the exact requests
//! (method, path, when, and the Lease fields written) and the leadership the elector publishes.
//! With a 15 s Lease it checks every 2 s; it creates a missing Lease, takes another's only 15 s
//! after it last saw it renewed (on its own clock) or at once when released, renews while it
//! leads, steps down at once on a conflict and at its 13 s renew deadline when the API server
//! fails or does not answer, and releases the Lease when it stops.

use crate::lease_support;

use jiff::Timestamp;
use lease_support::{
    ACQUIRED, ApiServer, ME, OTHER, RENEWED, RENEWED_AGAIN, get, lease, post, published, put,
};
use serde_json::{Value, json};

/// Asserts `renewTime` is a time this elector wrote now (not the one it read) and returns it.
fn fresh_renewal(spec: &Value) -> String {
    let renewed = spec["renewTime"].as_str().unwrap();
    renewed.parse::<Timestamp>().unwrap();
    assert!(![RENEWED, RENEWED_AGAIN].contains(&renewed), "{spec}");
    renewed.to_owned()
}

#[tokio::test(start_paused = true)]
async fn a_missing_lease_is_created_held_by_this_replica_which_then_leads() {
    let mut server = ApiServer::start();
    server.refuse(404).await;
    let created = server.reply(201, &lease(Some(ME), RENEWED, 0, "1")).await;
    server.reply(200, &lease(Some(ME), RENEWED, 0, "1")).await;

    assert_eq!(server.calls, [get(0), post(0), get(2)]);
    assert_eq!(server.published, [published(0, true)]);
    assert_eq!(created["metadata"]["name"], "kube-retention-controller");
    let spec = &created["spec"];
    let renewed = fresh_renewal(spec);
    assert_eq!(spec["acquireTime"], renewed.as_str());
    assert_eq!(
        (&spec["holderIdentity"], &spec["leaseDurationSeconds"]),
        (&json!(ME), &json!(15))
    );
    assert_eq!(spec["leaseTransitions"], 0);
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_loses_the_race_to_create_the_lease_follows_the_winner() {
    let mut server = ApiServer::start();
    server.refuse(404).await;
    server.refuse(409).await;
    server
        .reply(200, &lease(Some(OTHER), RENEWED, 0, "1"))
        .await;
    server
        .reply(200, &lease(Some(OTHER), RENEWED, 0, "1"))
        .await;

    assert_eq!(server.calls, [get(0), post(0), get(2), get(4)]);
    assert!(server.published.is_empty(), "never leads");
}

#[tokio::test(start_paused = true)]
async fn a_lease_renewed_elsewhere_is_taken_a_duration_after_this_replica_last_saw_it_change() {
    let mut server = ApiServer::start();
    server
        .reply(200, &lease(Some(OTHER), RENEWED, 3, "7"))
        .await;
    // Renewed at 2 s, then never again: 15 s from 2 s is 17 s, so the check at 18 s takes it.
    let renewed = lease(Some(OTHER), RENEWED_AGAIN, 3, "8");
    for _ in (2..=18).step_by(2) {
        server.reply(200, &renewed).await;
    }
    let taken = server.reply(200, &lease(Some(ME), RENEWED, 4, "9")).await;
    server.reply(200, &lease(Some(ME), RENEWED, 4, "9")).await;

    let mut expected: Vec<_> = (0..=18).step_by(2).map(get).collect();
    expected.extend([put(18), get(20)]);
    assert_eq!(
        server.calls, expected,
        "15 s after the renewal seen at 2 s, not from 0 s"
    );
    assert_eq!(server.published, [published(18, true)]);
    assert_eq!(
        taken["metadata"]["resourceVersion"], "8",
        "the version it read"
    );
    let spec = &taken["spec"];
    let renewed = fresh_renewal(spec);
    assert_eq!(spec["acquireTime"], renewed.as_str(), "acquired now");
    assert_eq!(spec["holderIdentity"], ME);
    assert_eq!(spec["leaseDurationSeconds"], 15);
    assert_eq!(spec["leaseTransitions"], 4, "one more transition");
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_the_first_check_without_waiting_out_its_duration() {
    let mut server = ApiServer::start();
    server.reply(200, &lease(None, RENEWED, 4, "9")).await;
    let taken = server.reply(200, &lease(Some(ME), RENEWED, 5, "10")).await;
    server.next().await.unwrap();

    assert_eq!(server.calls, [get(0), put(0), get(2)]);
    assert_eq!(server.published, [published(0, true)]);
    assert_eq!(taken["metadata"]["resourceVersion"], "9");
    assert_eq!(taken["spec"]["holderIdentity"], ME);
    assert_eq!(taken["spec"]["leaseTransitions"], 5);
}

#[tokio::test(start_paused = true)]
async fn the_leader_renews_every_two_seconds_keeping_its_acquire_time_and_transitions() {
    let mut server = ApiServer::start();
    server.lead().await;
    for version in 1..=3 {
        let held = lease(Some(ME), RENEWED, 0, &version.to_string());
        server.reply(200, &held).await;
        let renewal = server.reply(200, &held).await;
        assert_eq!(renewal["metadata"]["resourceVersion"], version.to_string());
        let spec = &renewal["spec"];
        fresh_renewal(spec);
        assert_eq!(spec["acquireTime"], ACQUIRED, "still the first acquisition");
        assert_eq!(
            (&spec["holderIdentity"], &spec["leaseTransitions"]),
            (&json!(ME), &json!(0))
        );
    }
    server.next().await.unwrap();

    let expected = [
        get(0),
        post(0),
        get(2),
        put(2),
        get(4),
        put(4),
        get(6),
        put(6),
        get(8),
    ];
    assert_eq!(server.calls, expected);
    assert_eq!(server.published, [published(0, true)], "leads throughout");
}

#[tokio::test(start_paused = true)]
async fn a_renewal_refused_409_steps_down_at_once_and_the_next_check_follows_the_new_holder() {
    let mut server = ApiServer::start();
    server.lead().await;
    server.reply(200, &lease(Some(ME), RENEWED, 0, "1")).await;
    server.refuse(409).await;
    // Another replica wrote it meanwhile: it holds the Lease now, renewed.
    let taken = lease(Some(OTHER), RENEWED_AGAIN, 1, "2");
    server.reply(200, &taken).await;
    server.reply(200, &taken).await;

    assert_eq!(
        server.calls,
        [get(0), post(0), get(2), put(2), get(4), get(6)]
    );
    assert_eq!(server.published, [published(0, true), published(2, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_refused_409_by_an_unrelated_write_leads_again_at_the_next_check() {
    let mut server = ApiServer::start();
    server.lead().await;
    server.reply(200, &lease(Some(ME), RENEWED, 0, "1")).await;
    server.refuse(409).await;
    server.reply(200, &lease(Some(ME), RENEWED, 0, "2")).await;
    let renewal = server.reply(200, &lease(Some(ME), RENEWED, 0, "3")).await;
    server.next().await.unwrap();

    assert_eq!(
        server.calls,
        [get(0), post(0), get(2), put(2), get(4), put(4), get(6)]
    );
    assert_eq!(renewal["metadata"]["resourceVersion"], "2");
    assert_eq!(renewal["spec"]["leaseTransitions"], 0, "not a take-over");
    let steps = [published(0, true), published(2, false), published(4, true)];
    assert_eq!(server.published, steps);
}

#[tokio::test(start_paused = true)]
async fn a_leader_the_api_server_refuses_leads_until_the_first_check_past_13_s_then_follows() {
    let mut server = ApiServer::start();
    server.lead().await;
    for _ in (2..=14).step_by(2) {
        server.refuse(500).await;
    }
    server
        .reply(200, &lease(Some(OTHER), RENEWED_AGAIN, 1, "2"))
        .await;

    let mut expected = vec![get(0), post(0)];
    expected.extend((2..=16).step_by(2).map(get));
    assert_eq!(server.calls, expected);
    // Stepped down before the check at 14 s was sent: 1 s before its Lease could be taken.
    assert_eq!(server.published, [published(0, true), published(14, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_leader_the_api_server_does_not_answer_steps_down_at_its_13_s_renew_deadline() {
    let mut server = ApiServer::start();
    server.lead().await;
    let _unanswered = server.hang().await;
    server.refuse(500).await;

    assert_eq!(
        server.calls,
        [get(0), post(0), get(2), get(15)],
        "given up at 13 s"
    );
    assert_eq!(server.published, [published(0, true), published(13, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_stopping_leader_releases_the_lease_clearing_its_holder_and_ends() {
    let mut server = ApiServer::start();
    server.lead().await;
    server.until(true).await;
    server.stop();
    server.reply(200, &lease(Some(ME), RENEWED, 2, "5")).await;
    let released = server.reply(200, &lease(None, RENEWED, 2, "6")).await;

    assert!(server.ended().await, "the task ends once released");
    assert!(server.quiet().await);
    assert_eq!(server.calls, [get(0), post(0), get(0), put(0)]);
    assert_eq!(released["metadata"]["resourceVersion"], "5");
    let spec = &released["spec"];
    assert_eq!(spec.get("holderIdentity"), None, "no holder: {spec}");
    assert_eq!(spec["leaseDurationSeconds"], 1);
    fresh_renewal(spec);
    assert_eq!(
        (&spec["acquireTime"], &spec["leaseTransitions"]),
        (&json!(ACQUIRED), &json!(2))
    );
}

#[tokio::test(start_paused = true)]
async fn a_stopping_replica_leaves_a_lease_it_does_not_hold_alone() {
    let mut server = ApiServer::start();
    server
        .reply(200, &lease(Some(OTHER), RENEWED, 0, "1"))
        .await;
    server.stop();
    assert!(server.ended().await);
    assert_eq!(server.calls, [get(0)], "a follower releases nothing");

    let mut server = ApiServer::start();
    server.lead().await;
    server.until(true).await;
    server.stop();
    server
        .reply(200, &lease(Some(OTHER), RENEWED_AGAIN, 1, "2"))
        .await;
    assert!(server.ended().await);
    assert_eq!(
        server.calls,
        [get(0), post(0), get(0)],
        "taken meanwhile: no PUT"
    );
}

#[tokio::test(start_paused = true)]
async fn the_leader_keeps_what_it_publishes_on_the_lease_when_it_creates_renews_and_takes_it() {
    let kinds = r#"{"disabledKinds":["Pod"]}"#;
    let mut server =
        ApiServer::start_with(|elector| elector.publishing("retention.dev/kinds", kinds.into()));
    let created = server.lead().await;
    assert_eq!(
        created["metadata"]["annotations"]["retention.dev/kinds"],
        kinds
    );
    server.reply(200, &lease(Some(ME), RENEWED, 0, "1")).await;
    let renewal = server.reply(200, &lease(Some(ME), RENEWED, 0, "1")).await;
    assert_eq!(
        renewal["metadata"]["annotations"]["retention.dev/kinds"],
        kinds
    );

    // Another elector's Lease, released: taken with the annotation beside what it carried.
    let mut server =
        ApiServer::start_with(|elector| elector.publishing("retention.dev/kinds", kinds.into()));
    let mut released = lease(None, RENEWED, 3, "7");
    released["metadata"]["annotations"] = json!({"team": "platform"});
    server.reply(200, &released).await;
    let taken = server.reply(200, &released).await;
    assert_eq!(
        taken["metadata"]["annotations"],
        json!({"team": "platform", "retention.dev/kinds": kinds})
    );
    assert_eq!(taken["spec"]["holderIdentity"], ME);
}
