//! The client-side request budget (`--qps`), shared by everything that writes: the executor
//! takes one request's worth before each DELETE, PATCH or Event it sends, and a Cleaner before
//! each of its DELETEs, so a Cleaner of a thousand objects spends the same budget as a
//! RetentionPolicy does instead of going around it.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// A share of the request budget; clones draw from the same one.
#[derive(Clone, Default)]
pub struct Budget {
    /// `None` is unlimited.
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

impl Budget {
    /// `per_second` requests a second (and as many at once after a pause); `None` is unlimited.
    pub fn per_second(per_second: Option<NonZeroU32>) -> Self {
        Self {
            limiter: per_second.map(|rate| Arc::new(RateLimiter::direct(Quota::per_second(rate)))),
        }
    }

    /// No limit at all.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Waits until the budget has room for one request, and takes it.
    pub async fn acquire(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.until_ready().await;
        }
    }

    pub fn is_limited(&self) -> bool {
        self.limiter.is_some()
    }
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("limited", &self.is_limited())
            .finish()
    }
}
