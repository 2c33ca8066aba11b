//! When the controller is ready (/readyz): once every served kind — the configured kinds the
//! cluster serves — has been listed. Kinds watched beside them (found by a scan, named by a
//! policy) do not count: a kind of nothing lists in milliseconds, and counting those in place
//! of a kind of 400,000 Jobs said "ready" before the Jobs were known (docs/benchmarks/envelope.md).

use std::collections::HashSet;

use kube_retention_common::kinds::KindId;

/// The served kinds not listed yet.
pub struct Unlisted(HashSet<KindId>);

impl Unlisted {
    pub fn new(served: &[KindId]) -> Self {
        Self(served.iter().copied().collect())
    }

    /// Whether nothing is left to list.
    pub fn ready(&self) -> bool {
        self.0.is_empty()
    }

    /// `kind` was listed: whether that was the last one left.
    pub fn listed(&mut self, kind: KindId) -> bool {
        self.0.remove(&kind) && self.ready()
    }
}

#[cfg(test)]
mod tests {
    use kube_retention_common::Registry;

    use super::Unlisted;

    #[test]
    fn ready_once_every_served_kind_is_listed_whatever_else_is() {
        let kinds = Registry::builtin();
        let [jobs, pods, build_runs] =
            ["Job.batch", "Pod", "BuildRun.shipwright.io"].map(|name| kinds.named(name).unwrap());
        let mut unlisted = Unlisted::new(&[jobs, pods]);
        assert!(!unlisted.ready());
        assert!(
            !unlisted.listed(build_runs),
            "a kind not served does not count"
        );
        assert!(!unlisted.listed(pods));
        assert!(
            !unlisted.listed(pods),
            "listed again: still waiting for Jobs"
        );
        assert!(unlisted.listed(jobs));
        assert!(unlisted.ready());
        assert!(!unlisted.listed(jobs), "ready once, not again");
    }

    #[test]
    fn ready_at_once_with_nothing_served() {
        assert!(Unlisted::new(&[]).ready());
    }
}
