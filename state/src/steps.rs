//! What the tracker answers an input with ([`Step`]): the actions it takes itself, and the
//! deletions it found due ([`Due`]), which the state's gate decides (`gate.rs`); one let go
//! becomes its preconditioned DELETE ([`Due::deletion`]).

use jiff::Timestamp;

use kube_retention_common::kinds::Registry;

use super::action::event_target;
use super::groups::LimitGroups;
use super::keys::ObjectKey;
use super::policies::PolicyBook;
use super::record::Record;
use super::{Action, Governance, Reason};

/// A deletion found due: the run, why, and since when it is deletable. The run is pending from
/// here on, unless the gate holds it ([`Tracker::held`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Due {
    pub(super) key: ObjectKey,
    pub(super) reason: Reason,
    pub(super) eligible_at: Timestamp,
}

impl Due {
    /// The preconditioned DELETE of `record`, the run due, with what the ledger is to say where
    /// it goes there (every deletion with `ledger`, else its policy's `spec.sink`).
    pub(super) fn deletion(
        self,
        kinds: &Registry,
        groups: &LimitGroups,
        book: &PolicyBook,
        record: &Record,
        ledger: bool,
    ) -> Action {
        let Self {
            key,
            reason,
            eligible_at,
        } = self;
        let event_target = event_target(kinds, groups, &key, record);
        let rules = super::ledger::governing_rules(book, record);
        let ledger = (ledger || rules.is_some_and(|rules| rules.sink.is_some())).then(|| {
            Box::new(super::ledger::deletion(
                rules,
                record,
                reason,
                &event_target,
            ))
        });
        Action::Delete {
            uid: record.uid.text(),
            resource_version: record.resource_version.clone(),
            reason,
            eligible_at,
            event_target,
            policy: record.policy.clone().map(|policy| Governance {
                policy,
                overruled: book.overruled(&key),
            }),
            ledger,
            key,
        }
    }
}

/// What the tracker answers an input with, in order: the actions it takes itself (stamps,
/// notices, their ledger entries) and the deletions it found due, for the gate.
#[derive(Debug)]
pub(super) enum Step {
    Act(Action),
    Due(Due),
}
