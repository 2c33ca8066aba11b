//! When a Cleaner acts, as a pure function of its spec, its creation, the clock and the objects
//! its targets resolve to: not before `ttl` has passed; then when every condition holds; and
//! otherwise when to look again — the `retry.period`, or with `retry.monotonic` the very moment
//! the conditions turn true, found by a binary search over time.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{CleanerSpec, TIME, checked};
use crate::cel::{Check, EvalError, Expression, InProcess, Interpreter, Variables};
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
    /// `spec.conditions[condition]` could not be evaluated; never taken as true, tried again
    /// at `until`.
    Failed {
        until: Timestamp,
        condition: usize,
        error: EvalError,
    },
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
        let (problems, conditions) = checked(&value, Check::Compile);
        if !problems.is_empty() {
            return Err(problems);
        }
        let length = |text: Option<&String>, default: Duration| {
            let parsed = text.map_or(Ok(default), |text| duration::parse(text));
            SignedDuration::try_from(parsed.unwrap_or(default)).unwrap_or(SignedDuration::MAX)
        };
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

    /// The verdict at `now` over the targets' `variables`, every step at once.
    pub fn judge(&self, created: Timestamp, now: Timestamp, variables: &Variables) -> Verdict {
        let mut judging = match self.start(created, now) {
            Ok(verdict) => return verdict,
            Err(judging) => judging,
        };
        loop {
            if let Some(verdict) = self.step_in(&mut InProcess, &mut judging, variables) {
                return verdict;
            }
        }
    }

    /// Begins a judgement at `now`: the verdict where no condition needs evaluating (the `ttl`
    /// has not passed, or there are no conditions), else the judgement to go on with
    /// [`Judge::step`].
    pub fn start(&self, created: Timestamp, now: Timestamp) -> Result<Verdict, Judging> {
        let ripe = self.ripe_at(created);
        if now < ripe {
            return Ok(Verdict::TooEarly { until: ripe });
        }
        if self.conditions.is_empty() {
            return Ok(Verdict::Clean);
        }
        Err(Judging {
            now,
            horizon: later(now, self.period),
            phase: Phase::Now,
            next: 0,
            steps: 0,
        })
    }

    /// Evaluates one condition at one time — the unit the controller's evaluator runs at a
    /// turn — and answers the verdict once the judgement is complete. Every condition at `now`
    /// first, in order; with `retry.monotonic`, then every condition at the period's end and a
    /// binary search between the two for the moment they all hold: at most
    /// [`Judge::most_steps`] in all.
    pub fn step(&self, judging: &mut Judging, variables: &Variables) -> Option<Verdict> {
        self.step_in(&mut InProcess, judging, variables)
    }

    /// [`Judge::step`] with the conditions evaluated by `interpreter` on `targets`.
    pub fn step_in<I: Interpreter>(
        &self,
        interpreter: &mut I,
        judging: &mut Judging,
        targets: &I::Bound,
    ) -> Option<Verdict> {
        let Some(condition) = self.conditions.get(judging.next) else {
            return Some(Verdict::Clean);
        };
        judging.steps += 1;
        let holds = interpreter.condition(condition, targets, Some((TIME, judging.time())));
        let all = judging.next + 1 == self.conditions.len();
        let horizon = judging.horizon;
        match (judging.phase, holds) {
            (Phase::Now, Err(error)) => Some(Verdict::Failed {
                condition: judging.next,
                until: later(
                    judging.now,
                    self.period
                        .min(SignedDuration::try_from(ERROR_RETRY).unwrap_or_default()),
                ),
                error,
            }),
            (_, Ok(true)) if !all => {
                judging.next += 1;
                None
            }
            (Phase::Now, Ok(true)) => Some(Verdict::Clean),
            (Phase::Now, Ok(false)) if self.monotonic => {
                judging.phase = Phase::Horizon {
                    unmet: judging.next,
                };
                judging.next = 0;
                None
            }
            (Phase::Now, Ok(false)) => Some(Verdict::Wait {
                until: horizon,
                unmet: judging.next,
                found: false,
            }),
            (Phase::Horizon { unmet }, Ok(false) | Err(_)) => Some(Verdict::Wait {
                until: horizon,
                unmet,
                found: false,
            }),
            (Phase::Horizon { unmet }, Ok(true)) => judging.narrowed(unmet, judging.now, horizon),
            (Phase::Search { unmet, low, .. }, Ok(true)) => {
                judging.narrowed(unmet, low, judging.time())
            }
            (Phase::Search { unmet, high, .. }, Ok(false) | Err(_)) => {
                judging.narrowed(unmet, judging.time(), high)
            }
        }
    }

    /// The most steps a judgement takes: every condition at `now`, at the period's end, and at
    /// each point of the search (the period halved down to [`SEARCH_RESOLUTION`]).
    pub fn most_steps(&self) -> u64 {
        let mut points = 0u64;
        let mut span = self.period;
        while span > SEARCH_RESOLUTION {
            span /= 2;
            points += 1;
        }
        let conditions = u64::try_from(self.conditions.len()).unwrap_or(u64::MAX);
        conditions.saturating_mul(points + 2)
    }
}

/// A Cleaner's judgement in progress ([`Judge::start`], [`Judge::step`]): the time its
/// conditions are being evaluated at, and the next condition to evaluate there.
#[derive(Debug, Clone)]
pub struct Judging {
    now: Timestamp,
    /// The period's end: when the Cleaner is evaluated again unless the search finds sooner.
    horizon: Timestamp,
    phase: Phase,
    next: usize,
    steps: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// At `now`.
    Now,
    /// At the horizon, condition `unmet` having been false now.
    Horizon { unmet: usize },
    /// The conditions were false at `low` and hold at `high`: at the middle.
    Search {
        unmet: usize,
        low: Timestamp,
        high: Timestamp,
    },
}

impl Judging {
    /// How many conditions were evaluated so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    fn time(&self) -> Timestamp {
        match self.phase {
            Phase::Now => self.now,
            Phase::Horizon { .. } => self.horizon,
            Phase::Search { low, high, .. } => middle(low, high).unwrap_or(high),
        }
    }

    /// The conditions are false at `low` and hold at `high`: the moment found, or the search
    /// goes on between them.
    fn narrowed(&mut self, unmet: usize, low: Timestamp, high: Timestamp) -> Option<Verdict> {
        self.next = 0;
        if high.duration_since(low) <= SEARCH_RESOLUTION || middle(low, high).is_none() {
            return Some(Verdict::Wait {
                until: high,
                unmet,
                found: true,
            });
        }
        self.phase = Phase::Search { unmet, low, high };
        None
    }
}

fn later(now: Timestamp, wait: SignedDuration) -> Timestamp {
    now.saturating_add(wait).unwrap_or(Timestamp::MAX)
}

fn middle(low: Timestamp, high: Timestamp) -> Option<Timestamp> {
    low.saturating_add(high.duration_since(low) / 2).ok()
}
