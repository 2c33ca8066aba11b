//! Each namespace's share of the CEL evaluator's time. Round robin ([`crate::evaluator::backlog`])
//! shares turns, and turns alone are not fair when one tenant's evaluations run to their cost limit
//! (tens of milliseconds each) and another's take microseconds: the heavy tenant would keep the
//! evaluator busy up to its cap on the machine, and every other tenant's watches, deletions and the
//! API server they share would pay for it in CPU. So each namespace is charged the time its
//! evaluations took and credited [`NAMESPACE_SHARE`] of a core as time passes, holding at most
//! [`BURST`] of credit; a namespace in debt waits, while the others' turns go on. This is how the
//! API server charges the CEL of a request to the flow that sent it (API Priority and Fairness),
//! with time in place of seats.
//!
//! Hand-written: an evaluation's cost is known only once it has run, and rate limiters
//! (`governor`'s GCRA among them) decide before; this one lets a namespace run into debt and then
//! makes it wait it off. Pure, with the time passed in, so that it is tested without sleeping.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A namespace's share of one core: what its evaluations may take, over time.
pub const NAMESPACE_SHARE: f64 = 0.05;

/// The most credit a namespace holds: a quiet namespace's burst (a list of thousands of everyday
/// objects at start) goes at once.
pub const BURST: Duration = Duration::from_millis(250);

/// Namespaces with an account beyond which those back at full credit are forgotten (an account
/// at full credit is the same as none).
const ACCOUNTS_KEPT: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Account {
    /// Credit in seconds at `at`: negative while in debt.
    credit: f64,
    at: Instant,
}

#[derive(Debug)]
pub struct TimeShares<K> {
    share: f64,
    burst: f64,
    accounts: HashMap<K, Account>,
}

impl<K: Hash + Eq + Clone> Default for TimeShares<K> {
    fn default() -> Self {
        Self::new(NAMESPACE_SHARE, BURST)
    }
}

impl<K: Hash + Eq + Clone> TimeShares<K> {
    /// Each key is credited `share` of a core, and holds at most `burst` of credit.
    pub fn new(share: f64, burst: Duration) -> Self {
        Self {
            share,
            burst: burst.as_secs_f64(),
            accounts: HashMap::new(),
        }
    }

    fn credit(&self, key: &K, now: Instant) -> f64 {
        self.accounts.get(key).map_or(self.burst, |account| {
            let earned = now.saturating_duration_since(account.at).as_secs_f64() * self.share;
            (account.credit + earned).min(self.burst)
        })
    }

    /// `key`'s evaluation took `took`, ending at `now`.
    pub fn charge(&mut self, key: &K, took: Duration, now: Instant) {
        let credit = self.credit(key, now) - took.as_secs_f64();
        self.accounts
            .insert(key.clone(), Account { credit, at: now });
        if self.accounts.len() > ACCOUNTS_KEPT {
            let (share, burst) = (self.share, self.burst);
            self.accounts.retain(|_, account| {
                let earned = now.saturating_duration_since(account.at).as_secs_f64() * share;
                account.credit + earned < burst
            });
        }
    }

    /// When `key` may be served: `None` now, else once its debt is paid.
    pub fn ready_at(&self, key: &K, now: Instant) -> Option<Instant> {
        let credit = self.credit(key, now);
        if credit >= 0.0 {
            return None;
        }
        Some(now + Duration::from_secs_f64(-credit / self.share))
    }

    /// How many keys have an account (in debt, or short of full credit).
    pub fn accounts(&self) -> usize {
        self.accounts.len()
    }
}
