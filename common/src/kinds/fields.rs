//! Where a kind keeps its retention settings, as data: the reader in [`crate::policy`] walks these
//! paths, so adding a kind with fields is a table entry, not new code.

use crate::progress::Outcome;

/// How a TTL field is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlUnit {
    /// A Go duration string (`"36h"`).
    Duration,
    /// A whole number of seconds (OpenShift's `*TTLSeconds`).
    Seconds,
}

/// A pair of TTL fields, one per outcome, named within the object at the dotted path `within`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlFields {
    pub within: &'static str,
    pub succeeded: &'static str,
    pub failed: &'static str,
    pub unit: TtlUnit,
}

impl TtlFields {
    pub fn succeeded_path(&self) -> String {
        format!("{}.{}", self.within, self.succeeded)
    }

    pub fn failed_path(&self) -> String {
        format!("{}.{}", self.within, self.failed)
    }

    /// The path of the field for `outcome`.
    pub fn path(&self, outcome: Outcome) -> String {
        match outcome {
            Outcome::Succeeded => self.succeeded_path(),
            Outcome::Failed => self.failed_path(),
        }
    }
}

/// A pair of limit fields (within the same object as the TTLs) and the range kube-retention
/// accepts for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitFields {
    pub succeeded: &'static str,
    pub failed: &'static str,
    pub range: (u32, u32),
}

/// What a parent sets for the runs it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFields {
    pub ttls: TtlFields,
    pub limits: LimitFields,
    /// `true` there makes each new run owned by the parent (Shipwright's `atBuildDeletion`).
    pub owned_by_parent: Option<&'static str>,
}

/// Every retention field of a kind; a kind without any has the default (none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fields {
    /// The object's own TTLs; a new run copies its parent's run TTLs into them.
    pub own: Option<TtlFields>,
    /// Its parent's settings embedded in the run, validated like the parent's own.
    pub embedded: Option<RunFields>,
    /// A copy of the parent's TTLs kept by another system: read, never a reason to deny.
    pub snapshot: Option<TtlFields>,
    /// What it sets for its runs.
    pub runs: Option<RunFields>,
}

impl Fields {
    /// Where a run's inherited TTLs are read, in precedence order: its parent's settings embedded
    /// in it, then the snapshot.
    pub fn inherited(&self) -> impl Iterator<Item = TtlFields> + use<> {
        let embedded = self.embedded.map(|embedded| embedded.ttls);
        embedded.into_iter().chain(self.snapshot)
    }
}
