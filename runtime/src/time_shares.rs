//! Each tenant's share of a CPU-bound service's time: the controller's CEL evaluator shares one
//! core between namespaces, the webhook its CEL compilations. Round robin shares turns, and turns
//! alone are not fair when one tenant's work runs to its limit (tens of milliseconds each) and
//! another's takes microseconds: the heavy tenant would keep the service busy up to its cap on the
//! machine, and every other tenant, and the API server they share, would pay for it in CPU. So
//! each key is charged the time its work took and credited its share of a core as time passes,
//! holding at most its burst of credit; a key in debt waits (or is refused), while the others go
//! on. This is how the API server charges the CEL of a request to the flow that sent it (API
//! Priority and Fairness), with time in place of seats.
//!
//! Hand-written: a piece of work's cost is known only once it has run, and rate limiters
//! (`governor`'s GCRA among them) decide before; this one lets a key run into debt and then makes
//! it wait it off. Pure, with the time passed in, so that it is tested without sleeping.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Keys with an account beyond which those back at full credit are forgotten (an account
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

    /// `key`'s work took `took`, ending at `now`.
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
