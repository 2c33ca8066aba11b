//! When a Cleaner acts, as a pure function of its spec, its creation, the clock and the objects
//! its targets resolve to: not before `ttl` has passed; then when every condition holds; and
//! otherwise when to look again — the `retry.period`, or with `retry.monotonic` the very moment
//! the conditions turn true, found by a binary search over time.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{CleanerSpec, TIME, errors};
use crate::cel::{EvalError, Expect, Expression, Variables};
use crate::duration;
use crate::field_error::FieldError;

/// How often a Cleaner without `retry.period` is evaluated again.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(10 * 60);

/// How soon a condition that failed to evaluate is tried again (or the period, if shorter).
pub const ERROR_RETRY: Duration = Duration::from_secs(30);

/// How close the search for the moment conditions turn true gets to it.
pub const SEARCH_RESOLUTION: SignedDuration = SignedDuration::from_millis(10);

/// A Cleaner's spec, checked and compiled once.
#[derive(Debug)]
pub struct Judge {
    ttl: SignedDuration,
    period: SignedDuration,
    monotonic: bool,
    conditions: Vec<Expression>,
}

/// What a Cleaner does now.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Its `ttl` has not passed: nothing is evaluated before `until`.
    TooEarly { until: Timestamp },
    /// Every condition holds: the group goes.
    Clean,
    /// `spec.conditions[unmet]` is false; look again at `until` (`found` when a monotonic
    /// search showed the conditions turn true exactly then).
    Wait {
        until: Timestamp,
        unmet: usize,
        found: bool,
    },
    /// A condition could not be evaluated; never taken as true, tried again at `until`.
    Failed { until: Timestamp, error: EvalError },
}

impl Verdict {
    /// When the Cleaner is evaluated next, if it stays.
    pub fn next(&self) -> Option<Timestamp> {
        match self {
            Self::TooEarly { until } | Self::Wait { until, .. } | Self::Failed { until, .. } => {
                Some(*until)
            }
            Self::Clean => None,
        }
    }
}

impl Judge {
    /// Compiles `spec`, or gives every error admission would have named.
    pub fn new(spec: &CleanerSpec) -> Result<Self, Vec<FieldError>> {
        let value = serde_json::to_value(spec).unwrap_or_default();
        let problems = errors(&value);
        if !problems.is_empty() {
            return Err(problems);
        }
        let length = |text: Option<&String>, default: Duration| {
            let parsed = text.map_or(Ok(default), |text| duration::parse(text));
            SignedDuration::try_from(parsed.unwrap_or(default)).unwrap_or(SignedDuration::MAX)
        };
        let mut declared = spec.evaluated_names();
        declared.push(TIME);
        let conditions = spec
            .conditions
            .iter()
            .filter_map(|source| {
                Expression::compile_over(source, Expect::Condition, &declared).ok()
            })
            .collect();
        let retry = spec.retry.clone().unwrap_or_default();
        Ok(Self {
            ttl: length(spec.ttl.as_ref(), Duration::ZERO),
            period: length(retry.period.as_ref(), DEFAULT_PERIOD).max(SignedDuration::from_secs(1)),
            monotonic: retry.monotonic,
            conditions,
        })
    }

    /// When the `ttl` counted from `created` passes.
    pub fn ripe_at(&self, created: Timestamp) -> Timestamp {
        created.saturating_add(self.ttl).unwrap_or(Timestamp::MAX)
    }

    /// The verdict at `now` over the targets' `variables`.
    pub fn judge(&self, created: Timestamp, now: Timestamp, variables: &Variables) -> Verdict {
        let ripe = self.ripe_at(created);
        if now < ripe {
            return Verdict::TooEarly { until: ripe };
        }
        let later = |wait: SignedDuration| now.saturating_add(wait).unwrap_or(Timestamp::MAX);
        match self.first_unmet(variables, now) {
            Ok(None) => Verdict::Clean,
            Ok(Some(unmet)) => {
                let horizon = later(self.period);
                let found = self
                    .monotonic
                    .then(|| self.search(variables, now, horizon))
                    .flatten();
                Verdict::Wait {
                    until: found.unwrap_or(horizon),
                    unmet,
                    found: found.is_some(),
                }
            }
            Err(error) => Verdict::Failed {
                until: later(
                    self.period
                        .min(SignedDuration::try_from(ERROR_RETRY).unwrap_or_default()),
                ),
                error,
            },
        }
    }

    /// The index of the first condition that is false at `at`, if any.
    fn first_unmet(
        &self,
        variables: &Variables,
        at: Timestamp,
    ) -> Result<Option<usize>, EvalError> {
        for (index, condition) in self.conditions.iter().enumerate() {
            if !condition.condition_in(variables, Some((TIME, at)))? {
                return Ok(Some(index));
            }
        }
        Ok(None)
    }

    fn holds(&self, variables: &Variables, at: Timestamp) -> bool {
        matches!(self.first_unmet(variables, at), Ok(None))
    }

    /// The earliest time in (`false_at`, `horizon`] at which every condition holds, assuming
    /// they only turn from false to true; `None` when they do not hold at the horizon.
    fn search(
        &self,
        variables: &Variables,
        false_at: Timestamp,
        horizon: Timestamp,
    ) -> Option<Timestamp> {
        if !self.holds(variables, horizon) {
            return None;
        }
        let (mut low, mut high) = (false_at, horizon);
        while high.duration_since(low) > SEARCH_RESOLUTION {
            let middle = low.saturating_add(high.duration_since(low) / 2).ok()?;
            if self.holds(variables, middle) {
                high = middle;
            } else {
                low = middle;
            }
        }
        Some(high)
    }
}
