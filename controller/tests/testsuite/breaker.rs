//! The circuit breaker: its count on an injected clock, and the executor and a Cleaner's DELETE
//! held while it is open (the executor's stamps and Events still going) and sent once released.

use crate::work_support;

use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::Registry;
use kube_retention_controller::executor::{Budget, Executor, Parts, Settings};
use kube_retention_controller::metrics::Metrics;
use kube_retention_io::breaker::{Admission, Breaker, DeletionWindow, Position};
use tokio::sync::mpsc;
use work_support::{deletion, recording_client, stamping};

const MINUTE: Duration = Duration::from_secs(60);

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
fn deletions_older_than_the_window_no_longer_count() {
    let start = Instant::now();
    let mut window = DeletionWindow::new(2, MINUTE, Position::Closed);
    assert_eq!(admissions(&mut window, start, 2), [Admission::Go; 2]);
    let next = start + MINUTE;
    assert_eq!(admissions(&mut window, next, 2), [Admission::Go; 2]);
    assert!(matches!(
        window.admit(next, Timestamp::UNIX_EPOCH),
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
    let mut window = DeletionWindow::new(0, MINUTE, Position::Unknown);
    assert_eq!(window.position(), &Position::Closed);
    assert_eq!(
        admissions(&mut window, Instant::now(), 10_000),
        vec![Admission::Go; 10_000]
    );
    assert!(Breaker::off().admit());
}

async fn settled() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test]
async fn the_executor_holds_deletions_while_open_sends_its_other_work_and_the_held_on_release() {
    let (client, seen) = recording_client();
    let breaker = Breaker::new(2, MINUTE, kube_retention_io::clock::Clock::System);
    breaker.close(); // the stored state, read: closed
    let (feedback, _) = mpsc::unbounded_channel();
    let reporter = Reporter {
        controller: "test".into(),
        instance: None,
    };
    let (executor, _tasks) = Executor::spawn(Parts {
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
        clock: kube_retention_io::clock::Clock::System,
    });
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
        "the third DELETE opened the breaker and waits; the stamp went"
    );
    assert!(matches!(breaker.position(), Position::Open(_)));
    assert_eq!(breaker.waiting(), 1);
    executor.submit(deletion("other", "e"), Registry::builtin());
    settled().await;
    assert_eq!(seen.lock().unwrap().len(), 3, "no DELETE while open");
    assert_eq!(breaker.waiting(), 2);

    breaker.close();
    settled().await;
    let sent = seen.lock().unwrap()[3..].to_vec();
    assert_eq!(
        sent.len(),
        2,
        "the two held go on release, uncounted: {sent:?}"
    );
    assert!(sent.contains(&"DELETE /apis/batch/v1/namespaces/ns/jobs/c".to_owned()));
    assert!(sent.contains(&"DELETE /apis/batch/v1/namespaces/other/jobs/e".to_owned()));
    assert_eq!(breaker.position(), Position::Closed);
    assert_eq!(breaker.waiting(), 0);
}

#[tokio::test]
async fn a_cleaners_delete_waits_while_the_breaker_is_open() {
    let breaker = Breaker::new(1, MINUTE, kube_retention_io::clock::Clock::System);
    breaker.close();
    assert!(breaker.admit());
    assert!(!breaker.admit(), "the second within the minute opens it");
    let waiting = tokio::spawn({
        let breaker = breaker.clone();
        async move { breaker.admit_or_wait().await }
    });
    settled().await;
    assert!(!waiting.is_finished(), "held while open");
    assert_eq!(breaker.waiting(), 1);
    breaker.close();
    waiting.await.unwrap();
    assert_eq!(breaker.waiting(), 0);
}
