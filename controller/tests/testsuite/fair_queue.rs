//! The fair queue: one backlog never keeps another key waiting more than a round.

use kube_retention_runtime::fair::FairQueue;
use proptest::prelude::*;

#[test]
fn a_flood_waits_behind_itself() {
    let mut queue = FairQueue::default();
    for n in 0..100_000 {
        queue.push("a", n);
    }
    queue.push("b", -1);
    assert_eq!(queue.pop(), Some(0));
    assert_eq!(queue.pop(), Some(-1));
    assert_eq!(queue.pop(), Some(1));
    assert_eq!(queue.len(), 99_998);
}

#[test]
fn keys_take_turns_and_a_newcomer_joins_at_the_back() {
    let mut queue = FairQueue::default();
    for item in ["a1", "a2", "a3"] {
        queue.push('a', item);
    }
    queue.push('b', "b1");
    assert_eq!(queue.pop(), Some("a1"));
    queue.push('c', "c1");
    let rest: Vec<&str> = std::iter::from_fn(|| queue.pop()).collect();
    assert_eq!(rest, ["b1", "a2", "c1", "a3"]);
    assert!(queue.is_empty());
    assert_eq!(queue.keys(), 0);
}

#[test]
fn the_bound_costs_the_longest_backlog() {
    let mut queue = FairQueue::default();
    for n in 0..5 {
        queue.push('a', n);
    }
    queue.push('b', 10);
    assert_eq!(queue.drop_oldest_of_longest(0), Some(0));
    assert_eq!(
        queue.drop_oldest_of_longest(1),
        None,
        "a lane past the last"
    );
    assert_eq!(queue.len(), 5);
}

#[test]
fn the_bound_counts_one_lane_and_drops_from_it_alone() {
    let mut queue = FairQueue::with_lanes(2);
    for n in 0..5 {
        queue.push_to(0, 'a', n);
    }
    queue.push_to(1, 'a', 20);
    queue.push_to(1, 'b', 10);
    queue.push_to(1, 'b', 11);
    assert_eq!(queue.lane_len(1), 3);
    assert_eq!(
        queue.drop_oldest_of_longest(1),
        Some(10),
        "b has the most in lane 1, though a has the most in all"
    );
    assert_eq!(
        queue.drop_oldest_of_longest(1),
        Some(20),
        "a and b tie: a is first in the round"
    );
    assert_eq!(queue.drop_oldest_of_longest(1), Some(11));
    assert_eq!(queue.drop_oldest_of_longest(1), None);
    assert_eq!(queue.keys(), 1, "b left the round with its last item");
    assert_eq!(queue.len(), 5);
}

#[test]
fn a_keys_turn_goes_to_its_most_urgent_lane_and_the_keys_still_alternate() {
    let mut queue = FairQueue::with_lanes(3);
    for n in 0..100_000 {
        queue.push_to(0, 'a', n);
    }
    queue.push_to(2, 'b', -2);
    queue.push_to(1, 'b', -1);
    queue.push_to(2, 'a', -3);
    let first: Vec<i32> = (0..4).filter_map(|_| queue.pop()).collect();
    assert_eq!(
        first,
        [0, -1, 1, -2],
        "b's less urgent work goes within a round of a's flood, its own lane 1 first"
    );
    assert_eq!(queue.keys(), 1);
    assert_eq!(queue.lane_len(2), 1);
    assert_eq!(queue.len(), 99_999);
}

#[test]
fn discarded_items_do_not_use_up_a_turn() {
    let mut queue = FairQueue::default();
    queue.push('a', 1);
    queue.push('a', 2);
    queue.push('b', 10);
    queue.push('b', 11);
    assert_eq!(queue.pop_valid(|_| true), Some(1));
    assert_eq!(queue.pop_valid(|item| *item != 10), Some(11));
    assert_eq!(queue.pop_valid(|_| true), Some(2));
    assert_eq!(queue.pop_valid(|_| true), None);
    assert!(queue.is_empty());
}

proptest! {
    #[test]
    fn every_item_comes_out_once_in_its_keys_order(pushes in prop::collection::vec((0u8..4, any::<u16>()), 0..200)) {
        let mut queue = FairQueue::default();
        for (index, (key, _)) in pushes.iter().enumerate() {
            queue.push(*key, index);
        }
        let out: Vec<usize> = std::iter::from_fn(|| queue.pop()).collect();
        let mut sorted = out.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..pushes.len()).collect::<Vec<_>>());
        for key in 0u8..4 {
            let mine: Vec<usize> = out.iter().copied().filter(|&index| pushes[index].0 == key).collect();
            prop_assert!(mine.windows(2).all(|pair| pair[0] < pair[1]));
        }
        // Between two items of one key, each other key with items left comes once at most.
        for (position, &index) in out.iter().enumerate() {
            let key = pushes[index].0;
            if let Some(next) = out[position + 1..].iter().position(|&other| pushes[other].0 == key) {
                let between = &out[position + 1..position + 1 + next];
                for other in 0u8..4 {
                    prop_assert!(between.iter().filter(|&&i| pushes[i].0 == other).count() <= 1);
                }
            }
        }
    }
}

#[test]
fn keys_that_must_wait_keep_their_place_and_the_ready_ones_go() {
    let mut queue = FairQueue::default();
    queue.push('a', "a1");
    queue.push('a', "a2");
    queue.push('b', "b1");
    queue.push('c', "c1");
    assert_eq!(queue.pop_ready(|key| *key != 'a', |_| true), Some("b1"));
    assert_eq!(queue.pop_ready(|key| *key != 'a', |_| true), Some("c1"));
    assert_eq!(
        queue.pop_ready(|key| *key != 'a', |_| true),
        None,
        "only a has work, and it waits"
    );
    assert_eq!(queue.waiting_keys().collect::<Vec<_>>(), [&'a']);
    assert_eq!(queue.pop_ready(|_| true, |_| true), Some("a1"));
    assert_eq!(queue.len(), 1);
}

#[test]
fn a_ready_key_with_only_superseded_work_leaves_the_round() {
    let mut queue = FairQueue::default();
    queue.push('a', 1);
    queue.push('b', 2);
    assert_eq!(queue.pop_ready(|key| *key == 'b', |item| *item != 2), None);
    assert_eq!(queue.keys(), 1, "b's superseded item is gone, a waits");
    assert_eq!(queue.pop_ready(|_| true, |_| true), Some(1));
    assert!(queue.is_empty());
}
