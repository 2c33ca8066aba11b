//! The circuit breakers: one namespace's count and the cluster's on an injected clock, a
//! namespace's burst holding only that namespace (issue 57's sixth reproduction: one tenant's
//! own deletions held every namespace's), the cluster's total holding all, memory bounded
//! whatever the namespaces, and the executor and a Cleaner's DELETE held while open (the
//! executor's stamps and Events, and other namespaces' DELETEs, still going) and sent once
//! released.

use crate::work_support;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::Registry;
use kube_retention_common::breaker::MAX_OPEN_NAMESPACES;
use kube_retention_controller::executor::{Budget, Executor, Parts, Settings};
use kube_retention_controller::metrics::Metrics;
use kube_retention_io::breaker::{
    Admission, BUCKETS, Breaker, Breakers, Cause, DeletionWindow, Limit, MAX_COUNTED_NAMESPACES,
    Position, Scope, Trip, Verdict,
};
use kube_retention_io::clock::Clock;
use proptest::prelude::*;
use tokio::sync::mpsc;
use work_support::{deletion, recording_client, stamping};

const MINUTE: Duration = Duration::from_secs(60);
/// How much longer than its window a DELETE may count: a bucket.
const BUCKET: Duration = Duration::from_millis(60_000 / BUCKETS as u64);

fn limit(deletions: u32) -> Limit {
    Limit {
        deletions,
        window: MINUTE,
    }
}

fn admissions(window: &mut DeletionWindow, at: Instant, count: usize) -> Vec<Admission> {
    (0..count)
        .map(|_| window.admit(at, Timestamp::UNIX_EPOCH))
        .collect()
}

#[test]
fn the_deletion_past_the_limit_within_the_window_opens_the_breaker_and_waits() {
    let start = Instant::now();
    let mut window = DeletionWindow::new(3, MINUTE, Position::Closed);
    assert_eq!(admissions(&mut window, start, 3), [Admission::Go; 3]);
    let Admission::Trips(trip) =
        window.admit(start + Duration::from_secs(59), Timestamp::UNIX_EPOCH)
    else {
        panic!("the fourth within a minute opens it");
    };
    assert_eq!((trip.limit, trip.window), (3, MINUTE));
    assert!(
        trip.message()
            .starts_with("more than 3 deletions within 1m: ")
    );
    // Open: nothing goes, however long after.
    let later = start + Duration::from_secs(3600);
    assert_eq!(admissions(&mut window, later, 2), [Admission::Held; 2]);
}

#[test]
fn deletions_older_than_the_window_and_a_bucket_no_longer_count() {
    let start = Instant::now();
    let mut window = DeletionWindow::new(2, MINUTE, Position::Closed);
    assert_eq!(admissions(&mut window, start, 2), [Admission::Go; 2]);
    let next = start + MINUTE + BUCKET;
    assert_eq!(admissions(&mut window, next, 2), [Admission::Go; 2]);
    assert!(matches!(
        window.admit(next, Timestamp::UNIX_EPOCH),
        Admission::Trips(_)
    ));
}

#[test]
fn a_deletion_counts_for_at_least_its_window() {
    let start = Instant::now();
    let mut window = DeletionWindow::new(1, MINUTE, Position::Closed);
    assert_eq!(admissions(&mut window, start, 1), [Admission::Go]);
    // A whole window later to the nanosecond, it still counts: no window sees two.
    assert!(matches!(
        window.admit(
            start + MINUTE - Duration::from_nanos(1),
            Timestamp::UNIX_EPOCH
        ),
        Admission::Trips(_)
    ));
}

#[test]
fn nothing_goes_until_the_stored_state_is_read_and_a_release_lets_what_waited_through() {
    let start = Instant::now();
    let mut window = DeletionWindow::new(2, MINUTE, Position::Unknown);
    assert_eq!(admissions(&mut window, start, 1), [Admission::Held]);
    window.close(1);
    assert_eq!(
        admissions(&mut window, start, 2),
        [Admission::Go; 2],
        "closed from unknown: counted as usual"
    );
    assert!(matches!(
        window.admit(start, Timestamp::UNIX_EPOCH),
        Admission::Trips(_)
    ));
    // Released with three waiting: they go uncounted, then the limit counts afresh.
    window.close(3);
    assert_eq!(admissions(&mut window, start, 5), [Admission::Go; 5]);
    assert!(matches!(
        window.admit(start, Timestamp::UNIX_EPOCH),
        Admission::Trips(_)
    ));
}

#[test]
fn a_limit_of_zero_is_no_breaker() {
    let mut window = DeletionWindow::new(0, MINUTE, Position::Closed);
    assert_eq!(
        admissions(&mut window, Instant::now(), 10_000),
        vec![Admission::Go; 10_000]
    );
    let breaker = Breaker::off();
    assert_eq!(breaker.position(), Position::Closed);
    assert!(breaker.admit("team-a"));
}

fn verdicts(breakers: &mut Breakers, namespace: &str, at: Instant, count: usize) -> Vec<Verdict> {
    (0..count)
        .map(|_| breakers.admit(namespace, at, Timestamp::UNIX_EPOCH))
        .collect()
}

fn known(cluster: Limit, per_namespace: Limit) -> Breakers {
    let mut breakers = Breakers::new(cluster, per_namespace);
    breakers.close();
    breakers
}

/// Reproduction 6 of issue 57: one tenant's 10,001 deletions held every other namespace's.
#[test]
fn a_namespaces_burst_holds_that_namespace_only() {
    let start = Instant::now();
    let mut breakers = known(limit(100_000), limit(10_000));
    let go = verdicts(&mut breakers, "tenant-a", start, 10_000);
    assert!(go.iter().all(|verdict| *verdict == Verdict::Go));
    let Verdict::Trips(Scope::Namespace(namespace), trip) =
        breakers.admit("tenant-a", start, Timestamp::UNIX_EPOCH)
    else {
        panic!("the 10,001st in tenant-a opens its breaker");
    };
    assert_eq!(&*namespace, "tenant-a");
    assert_eq!(trip.limit, 10_000);
    assert!(
        trip.message_in("tenant-a").starts_with(
            "more than 10000 deletions in namespace tenant-a within 1m: none of its deletions"
        ),
        "{}",
        trip.message_in("tenant-a")
    );
    assert_eq!(
        breakers.admit("tenant-a", start, Timestamp::UNIX_EPOCH),
        Verdict::Held(Scope::Namespace("tenant-a".into()))
    );
    assert_eq!(
        breakers.admit("tenant-b", start, Timestamp::UNIX_EPOCH),
        Verdict::Go,
        "another namespace deletes on"
    );
    assert_eq!(breakers.position(), &Position::Closed);
    assert_eq!(breakers.open_namespaces(), 1);
    assert!(breakers.holds("tenant-a") && !breakers.holds("tenant-b"));

    // Released with 5 waiting: those go uncounted by tenant-a, then its limit counts afresh.
    breakers.hold("tenant-a", 5);
    breakers.close_namespace("tenant-a");
    breakers.held_went("tenant-a", 5);
    let go = verdicts(&mut breakers, "tenant-a", start, 10_005);
    assert!(go.iter().all(|verdict| *verdict == Verdict::Go));
    assert!(matches!(
        breakers.admit("tenant-a", start, Timestamp::UNIX_EPOCH),
        Verdict::Trips(Scope::Namespace(_), _)
    ));
}

#[test]
fn the_clusters_total_across_namespaces_holds_every_namespace() {
    let start = Instant::now();
    let mut breakers = known(limit(5), limit(3));
    for namespace in ["a", "b"] {
        assert_eq!(
            verdicts(&mut breakers, namespace, start, 2),
            vec![Verdict::Go; 2]
        );
    }
    assert_eq!(
        breakers.admit("c", start, Timestamp::UNIX_EPOCH),
        Verdict::Go
    );
    let Verdict::Trips(Scope::Cluster, trip) = breakers.admit("d", start, Timestamp::UNIX_EPOCH)
    else {
        panic!("the sixth across namespaces opens the cluster's breaker");
    };
    assert_eq!((trip.limit, trip.cause), (5, Cause::Deletions));
    for namespace in ["a", "d", ""] {
        assert_eq!(
            breakers.admit(namespace, start, Timestamp::UNIX_EPOCH),
            Verdict::Held(Scope::Cluster)
        );
    }
    assert_eq!(
        breakers.open_namespaces(),
        0,
        "no namespace went past its own"
    );
    breakers.close();
    assert_eq!(
        breakers.admit("d", start, Timestamp::UNIX_EPOCH),
        Verdict::Go
    );
}

#[test]
fn objects_outside_namespaces_count_toward_the_cluster_only() {
    let start = Instant::now();
    let mut breakers = known(limit(3), limit(1));
    assert_eq!(verdicts(&mut breakers, "", start, 3), vec![Verdict::Go; 3]);
    assert!(matches!(
        breakers.admit("", start, Timestamp::UNIX_EPOCH),
        Verdict::Trips(Scope::Cluster, _)
    ));
}

#[test]
fn nothing_goes_until_the_stored_state_is_known_and_stored_trips_hold_after_a_restart() {
    let start = Instant::now();
    let mut breakers = Breakers::new(Limit::OFF, limit(10));
    assert_eq!(
        breakers.admit("a", start, Timestamp::UNIX_EPOCH),
        Verdict::Held(Scope::Cluster),
        "the namespaces' state is not known yet, even with the cluster's breaker off"
    );
    let trip = Trip::of_deletions(Timestamp::UNIX_EPOCH, 10, MINUTE);
    breakers.open_namespace("a", trip);
    breakers.close();
    assert_eq!(
        breakers.admit("a", start, Timestamp::UNIX_EPOCH),
        Verdict::Held(Scope::Namespace("a".into()))
    );
    assert_eq!(
        breakers.admit("b", start, Timestamp::UNIX_EPOCH),
        Verdict::Go
    );
    let mut off = Breakers::new(Limit::OFF, Limit::OFF);
    off.open_namespace("a", trip);
    assert_eq!(off.admit("a", start, Timestamp::UNIX_EPOCH), Verdict::Go);
}

#[test]
fn past_the_namespaces_a_configmap_holds_the_clusters_breaker_opens_instead() {
    let start = Instant::now();
    let mut breakers = known(Limit::OFF, limit(1));
    for index in 0..MAX_OPEN_NAMESPACES {
        let namespace = format!("ns-{index}");
        assert_eq!(
            breakers.admit(&namespace, start, Timestamp::UNIX_EPOCH),
            Verdict::Go
        );
        assert!(matches!(
            breakers.admit(&namespace, start, Timestamp::UNIX_EPOCH),
            Verdict::Trips(Scope::Namespace(_), _)
        ));
    }
    assert_eq!(breakers.open_namespaces(), MAX_OPEN_NAMESPACES);
    assert_eq!(
        breakers.admit("one-more", start, Timestamp::UNIX_EPOCH),
        Verdict::Go
    );
    let Verdict::Trips(Scope::Cluster, trip) =
        breakers.admit("one-more", start, Timestamp::UNIX_EPOCH)
    else {
        panic!("no room for another namespace's trip: the cluster's breaker opens");
    };
    assert_eq!(trip.cause, Cause::NamespacesOpen);
    assert!(
        trip.message()
            .contains("the breakers of 4096 namespaces open")
    );
    assert_eq!(breakers.open_namespaces(), MAX_OPEN_NAMESPACES);
}

#[test]
fn idle_namespaces_are_forgotten_and_at_most_so_many_are_counted() {
    let start = Instant::now();
    let mut breakers = known(Limit::OFF, limit(1));
    for index in 0..MAX_COUNTED_NAMESPACES + 10 {
        let namespace = format!("ns-{index}");
        assert_eq!(
            breakers.admit(&namespace, start, Timestamp::UNIX_EPOCH),
            Verdict::Go
        );
    }
    // Every place is taken by a namespace that counted a deletion this minute: the newcomers
    // count toward the cluster's total only, and go.
    let late = format!("ns-{}", MAX_COUNTED_NAMESPACES + 5);
    assert_eq!(
        breakers.admit(&late, start, Timestamp::UNIX_EPOCH),
        Verdict::Go
    );
    // A window later the first ones are idle, forgotten to make room.
    let later = start + MINUTE + BUCKET;
    assert_eq!(
        breakers.admit("fresh", later, Timestamp::UNIX_EPOCH),
        Verdict::Go
    );
    assert!(matches!(
        breakers.admit("fresh", later, Timestamp::UNIX_EPOCH),
        Verdict::Trips(Scope::Namespace(_), _)
    ));
}

/// One step of a generated run: a DELETE in one of a few namespaces, some time on.
#[derive(Debug, Clone)]
struct Step {
    namespace: usize,
    after: Duration,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = (0usize..5, 0u64..20_000).prop_map(|(namespace, millis)| Step {
        namespace,
        after: Duration::from_millis(millis),
    });
    proptest::collection::vec(step, 1..400)
}

/// The DELETEs that went within the window ending `now` (a window and a bucket: the most a
/// count ever spans).
fn within(sent: &VecDeque<Instant>, now: Instant, span: Duration) -> usize {
    sent.iter()
        .filter(|at| now.saturating_duration_since(**at) < span)
        .count()
}

proptest! {
    /// Whatever the interleaving of namespaces and times: no namespace, and not the cluster,
    /// ever sends more than its limit within a window; a DELETE is held only by its own
    /// namespace's open breaker or the cluster's; and one namespace's trip never holds another
    /// namespace's DELETE.
    #[test]
    fn no_window_sees_more_than_a_limit_and_only_the_tripped_namespace_is_held(
        steps in steps(),
        per_namespace in 1u32..6,
        cluster in 1u32..20,
    ) {
        let mut breakers = known(limit(cluster), limit(per_namespace));
        let mut now = Instant::now();
        let mut sent: HashMap<usize, VecDeque<Instant>> = HashMap::new();
        let mut all: VecDeque<Instant> = VecDeque::new();
        for step in steps {
            now += step.after;
            let namespace = format!("ns-{}", step.namespace);
            let namespace_open = matches!(
                breakers.namespace_position(&namespace),
                Some(Position::Open(_))
            );
            let cluster_open = matches!(breakers.position(), Position::Open(_));
            let verdict = breakers.admit(&namespace, now, Timestamp::UNIX_EPOCH);
            match &verdict {
                Verdict::Go => {
                    prop_assert!(!namespace_open && !cluster_open);
                    sent.entry(step.namespace).or_default().push_back(now);
                    all.push_back(now);
                }
                Verdict::Held(Scope::Namespace(held)) => {
                    prop_assert!(namespace_open && **held == *namespace);
                }
                Verdict::Held(Scope::Cluster) => prop_assert!(cluster_open),
                Verdict::Trips(Scope::Namespace(tripped), _) => {
                    prop_assert_eq!(&**tripped, namespace.as_str());
                    let counted = sent
                        .get(&step.namespace)
                        .map_or(0, |times| within(times, now, MINUTE + BUCKET));
                    prop_assert!(counted >= per_namespace as usize, "{counted} counted");
                }
                Verdict::Trips(Scope::Cluster, _) => {
                    prop_assert!(within(&all, now, MINUTE + BUCKET) >= cluster as usize);
                }
            }
            for (index, times) in &sent {
                let recent = within(times, now, MINUTE);
                prop_assert!(recent <= per_namespace as usize, "ns-{index}: {recent} within a minute");
            }
            prop_assert!(within(&all, now, MINUTE) <= cluster as usize);
            // A release now and then, as an admin would: the breakers open then start afresh.
            if step.after > Duration::from_millis(19_000) {
                for index in 0..5 {
                    let namespace = format!("ns-{index}");
                    if matches!(breakers.namespace_position(&namespace), Some(Position::Open(_))) {
                        breakers.close_namespace(&namespace);
                        sent.remove(&index);
                    }
                }
                if matches!(breakers.position(), Position::Open(_)) {
                    breakers.close();
                    all.clear();
                }
            }
        }
    }
}

async fn settled() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// What an executor's test holds: the executor, the requests it sent, its tasks.
type Running = (
    Executor,
    work_support::Seen,
    [kube_retention_runtime::supervise::Supervised; 2],
);

fn executor(breaker: &Breaker) -> Running {
    let (client, seen) = recording_client();
    let (feedback, _) = mpsc::unbounded_channel();
    let reporter = Reporter {
        controller: "test".into(),
        instance: None,
    };
    let (executor, tasks) = Executor::spawn(Parts {
        client: client.clone(),
        settings: Settings {
            breaker: breaker.clone(),
            budget: Budget::unlimited(),
            propagation: PropagationPolicy::Background,
            concurrency: 1,
            events: false,
            event_window: Duration::ZERO,
        },
        metrics: Metrics::default(),
        recorder: Recorder::new(client, reporter),
        feedback,
        ledger: None,
        clock: Clock::System,
    });
    (executor, seen, tasks)
}

#[tokio::test]
async fn the_executor_holds_a_namespaces_deletions_sends_the_others_and_the_held_on_release() {
    let breaker = Breaker::new(limit(100), limit(2), Clock::System);
    breaker.close(); // the stored state, read: closed
    let (executor, seen, _tasks) = executor(&breaker);
    for name in ["a", "b", "c"] {
        executor.submit(deletion("ns", name), Registry::builtin());
    }
    let deadline = Timestamp::now() + jiff::SignedDuration::from_hours(1);
    executor.submit(stamping("ns", "d", deadline), Registry::builtin());
    settled().await;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "DELETE /apis/batch/v1/namespaces/ns/jobs/a",
            "DELETE /apis/batch/v1/namespaces/ns/jobs/b",
            "PATCH /apis/batch/v1/namespaces/ns/jobs/d",
        ],
        "the third DELETE opened ns's breaker and waits; the stamp went"
    );
    assert!(matches!(
        breaker.namespace_position("ns"),
        Position::Open(_)
    ));
    assert_eq!(breaker.position(), Position::Closed);
    assert_eq!(breaker.waiting(), 1);
    executor.submit(deletion("other", "e"), Registry::builtin());
    executor.submit(deletion("ns", "f"), Registry::builtin());
    settled().await;
    assert_eq!(
        seen.lock().unwrap()[3..],
        ["DELETE /apis/batch/v1/namespaces/other/jobs/e"],
        "another namespace's DELETE goes while ns's breaker is open"
    );
    assert_eq!(breaker.waiting(), 2);

    breaker.close_namespace("ns");
    settled().await;
    let sent = seen.lock().unwrap()[4..].to_vec();
    assert_eq!(
        sent.len(),
        2,
        "the two held go on release, uncounted: {sent:?}"
    );
    assert!(sent.contains(&"DELETE /apis/batch/v1/namespaces/ns/jobs/c".to_owned()));
    assert!(sent.contains(&"DELETE /apis/batch/v1/namespaces/ns/jobs/f".to_owned()));
    assert_eq!(breaker.namespace_position("ns"), Position::Closed);
    assert_eq!(breaker.waiting(), 0);
}

#[tokio::test]
async fn the_executor_holds_every_deletion_while_the_clusters_breaker_is_open() {
    let breaker = Breaker::new(limit(2), limit(100), Clock::System);
    breaker.close();
    let (executor, seen, _tasks) = executor(&breaker);
    for (namespace, name) in [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")] {
        executor.submit(deletion(namespace, name), Registry::builtin());
    }
    settled().await;
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "two went; the third opened it"
    );
    assert!(matches!(breaker.position(), Position::Open(_)));
    assert_eq!(breaker.waiting(), 2);
    breaker.close();
    settled().await;
    assert_eq!(seen.lock().unwrap().len(), 4, "released: the held went");
    assert_eq!(breaker.waiting(), 0);
}

#[tokio::test]
async fn a_cleaners_delete_waits_while_its_namespaces_breaker_is_open() {
    let breaker = Breaker::new(Limit::OFF, limit(1), Clock::System);
    breaker.close();
    assert!(breaker.admit("team-a"));
    assert!(
        !breaker.admit("team-a"),
        "the second within the minute opens it"
    );
    let waiting = tokio::spawn({
        let breaker = breaker.clone();
        async move { breaker.admit_or_wait("team-a").await }
    });
    settled().await;
    assert!(!waiting.is_finished(), "held while open");
    assert_eq!(breaker.waiting(), 1);
    assert!(
        breaker.admit("team-b"),
        "another namespace's clean deletes on"
    );
    breaker.close_namespace("team-a");
    waiting.await.unwrap();
    assert_eq!(breaker.waiting(), 0);
}
