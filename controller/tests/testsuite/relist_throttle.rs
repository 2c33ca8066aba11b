//! Relists caused by policy changes: the first at once, the rest of a window coalesced into one
//! when it ends, so any number of changes cost one LIST per kind per window.

use std::time::Duration;

use kube_retention_common::Registry;
use kube_retention_common::kinds::KindId;
use kube_retention_io::relist_throttle::{RelistThrottle, WINDOW};
use proptest::prelude::*;
use tokio::time::Instant;

fn kind(group: &str, kind: &str) -> KindId {
    Registry::builtin()
        .find_group_kind(group, kind)
        .expect("a built-in kind")
}

#[test]
fn a_single_change_relists_at_once() {
    let mut throttle = RelistThrottle::default();
    let now = Instant::now();
    assert!(throttle.request(kind("batch", "Job"), now));
    assert_eq!(throttle.next(), None);
    assert_eq!(throttle.waiting(), 0);
}

#[test]
fn changes_within_the_window_become_one_relist_when_it_ends() {
    let mut throttle = RelistThrottle::default();
    let job = kind("batch", "Job");
    let start = Instant::now();
    assert!(throttle.request(job, start));
    for second in 1..=4 {
        assert!(!throttle.request(job, start + Duration::from_secs(second)));
    }
    assert_eq!(throttle.next(), Some(start + WINDOW));
    assert_eq!(throttle.due(start + WINDOW - Duration::from_millis(1)), []);
    assert_eq!(throttle.due(start + WINDOW), [job]);
    assert_eq!(throttle.next(), None, "one relist for the five changes");
    // The coalesced relist opened a new window.
    assert!(!throttle.request(job, start + WINDOW + Duration::from_secs(1)));
    assert_eq!(throttle.next(), Some(start + WINDOW * 2));
}

#[test]
fn kinds_have_windows_of_their_own() {
    let mut throttle = RelistThrottle::default();
    let (job, pod) = (kind("batch", "Job"), kind("", "Pod"));
    let start = Instant::now();
    assert!(throttle.request(job, start));
    assert!(throttle.request(pod, start + Duration::from_secs(1)));
    assert!(!throttle.request(job, start + Duration::from_secs(2)));
    assert!(!throttle.request(pod, start + Duration::from_secs(2)));
    assert_eq!(throttle.next(), Some(start + WINDOW));
    assert_eq!(throttle.due(start + WINDOW), [job]);
    assert_eq!(throttle.due(start + WINDOW + Duration::from_secs(1)), [pod]);
}

#[test]
fn a_watch_restarted_meanwhile_makes_the_waiting_relist_unneeded() {
    let mut throttle = RelistThrottle::default();
    let job = kind("batch", "Job");
    let start = Instant::now();
    assert!(throttle.request(job, start));
    assert!(!throttle.request(job, start + Duration::from_secs(1)));
    throttle.listed(job, start + Duration::from_secs(2));
    assert_eq!(throttle.next(), None);
    assert!(!throttle.request(job, start + Duration::from_secs(3)));
    assert_eq!(
        throttle.next(),
        Some(start + Duration::from_secs(2) + WINDOW)
    );
}

proptest! {
    /// However requests fall, relists of one kind are at least a window apart, and every
    /// request is served by a relist at or after it.
    #[test]
    fn relists_are_a_window_apart_and_none_is_lost(gaps in prop::collection::vec(0u64..8_000, 1..60)) {
        let mut throttle = RelistThrottle::default();
        let job = kind("batch", "Job");
        let start = Instant::now();
        let mut now = start;
        let mut relists = Vec::new();
        let mut unserved: Option<Instant> = None;
        for gap in gaps {
            let at = now + Duration::from_millis(gap);
            // The loop wakes for every coalesced relist due before the next request.
            while let Some(next) = throttle.next().filter(|next| *next <= at) {
                prop_assert_eq!(throttle.due(next), vec![job]);
                relists.push(next);
                unserved = None;
            }
            now = at;
            if throttle.request(job, now) {
                relists.push(now);
            } else {
                unserved.get_or_insert(now);
            }
        }
        if let Some(next) = throttle.next() {
            prop_assert_eq!(throttle.due(next), vec![job]);
            relists.push(next);
            unserved = None;
        }
        prop_assert!(unserved.is_none(), "a request was never served");
        for pair in relists.windows(2) {
            prop_assert!(pair[1] - pair[0] >= WINDOW, "{:?} apart", pair[1] - pair[0]);
        }
    }
}
