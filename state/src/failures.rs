//! Writes that keep failing: each object backs off on its own, reset when the object changes.
//! A write the API server refuses for the object's sake (a policy that denies DELETE, a missing
//! permission) waits 1 s doubling to 5 min, so doomed requests cannot eat the budget the other
//! objects need, and each new step is reported once as a Warning Event on the object — not each
//! attempt. An API server that is unreachable, overloaded (429) or failing (5xx) is nobody's
//! object's fault: those retry 1 s doubling to 8 s, so deletions resume promptly after an outage.

use jiff::{SignedDuration, Timestamp};

use super::{Action, EventTarget, ObjectKey, Warning};
use kube_retention_common::kinds::Registry;

pub const FIRST_RETRY: SignedDuration = SignedDuration::from_secs(1);
pub const MAX_RETRY: SignedDuration = SignedDuration::from_secs(300);
/// The longest wait while the API server is unavailable.
pub const MAX_UNAVAILABLE_RETRY: SignedDuration = SignedDuration::from_secs(8);

/// How long to wait after the `failures`-th refusal in a row (1-based).
pub fn retry_delay(failures: u8) -> SignedDuration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_RETRY * (1_i32 << doublings)).min(MAX_RETRY)
}

/// Why a write did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A precondition failed: the object changed and the watch brings the version to judge.
    /// Retried after the backoff too, in case the watch has nothing newer, but not reported.
    Conflict,
    /// The API server refused the request for this object, with its message.
    Error(String),
    /// The API server could not be reached or could not answer (429, 5xx).
    Unavailable(String),
}

impl Failure {
    pub(super) fn delay(&self, failures: u8) -> SignedDuration {
        match self {
            Self::Unavailable(_) => retry_delay(failures).min(MAX_UNAVAILABLE_RETRY),
            Self::Conflict | Self::Error(_) => retry_delay(failures),
        }
    }
}

/// One more failure of a write: the wait it earns, and the Warning Event it deserves, if any.
pub(super) struct Step {
    failure: Failure,
    failures: u8,
    retry_at: Timestamp,
}

impl Step {
    /// Counts a failure into `failures` and sets `retry_at` by its kind.
    pub(super) fn take<Time: From<Timestamp>>(
        failures: &mut u8,
        retry_at: &mut Option<Time>,
        failure: Failure,
        now: Timestamp,
    ) -> Self {
        *failures = failures.saturating_add(1);
        let at = now + failure.delay(*failures);
        *retry_at = Some(at.into());
        Self {
            failure,
            failures: *failures,
            retry_at: at,
        }
    }

    /// A Warning Event on the object, for a refusal that starts a longer wait.
    pub(super) fn warning(
        self,
        kinds: &Registry,
        key: &ObjectKey,
        uid: &str,
        warning: Warning,
    ) -> Option<Action> {
        let Failure::Error(error) = self.failure else {
            return None;
        };
        is_new_step(self.failures).then(|| Action::Warn {
            key: key.clone(),
            target: object_target(kinds, key, uid),
            warning,
            note: step_note(warning, &error, self.failures, self.retry_at),
        })
    }
}

/// The object itself as an Event's subject.
pub(super) fn object_target(kinds: &Registry, key: &ObjectKey, uid: &str) -> EventTarget {
    let resource = &kinds[key.kind].resource;
    EventTarget {
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        name: key.name.to_string(),
        uid: Some(uid.to_owned()),
    }
}

/// Whether the `failures`-th failure starts a longer wait than the one before.
pub(super) fn is_new_step(failures: u8) -> bool {
    failures == 1 || retry_delay(failures) > retry_delay(failures - 1)
}

pub(super) fn step_note(
    warning: Warning,
    error: &str,
    failures: u8,
    retry_at: Timestamp,
) -> String {
    let what = match warning {
        Warning::DeleteFailing => "delete it",
        Warning::StampFailing => "update its retention.dev/expires-at stamp",
        Warning::LabelFailing => "label it retention.dev/managed",
        Warning::FinishInFuture | Warning::Expiring => "judge it",
    };
    format!(
        "kube-retention could not {what} ({failures} attempt{s} in a row): {error}; next attempt at {retry_at}",
        s = if failures == 1 { "" } else { "s" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_five_minutes() {
        let seconds: Vec<i64> = (1..=12).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(retry_delay(u8::MAX), MAX_RETRY);
    }

    #[test]
    fn an_unavailable_api_server_is_retried_within_8_seconds() {
        let unavailable = Failure::Unavailable("connection refused".into());
        let seconds: Vec<i64> = (1..=6).map(|n| unavailable.delay(n).as_secs()).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 8, 8]);
    }

    #[test]
    fn reports_each_step_once_and_stops_at_the_ceiling() {
        let reported: Vec<u8> = (1..=20).filter(|&n| is_new_step(n)).collect();
        assert_eq!(reported, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    }
}
