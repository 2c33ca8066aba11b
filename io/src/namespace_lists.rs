//! Lists of a kind in one namespace beside the kind's watch ([`crate::watches::Watches::relist_in`]).
//! A RetentionPolicy's change lists its kinds afresh in its own namespace: a request of its
//! own, answered beside the kind's cluster-wide watch, not in its stream. What it sends can
//! therefore be older than what the watch already told: a Job finished while its namespace was
//! being listed came by the watch finished, then by the list as it was before, running; judged
//! last, the list's version stood, and the Job was never deleted. The e2e trial
//! `chaos_the_archive_sink_down_while_jobs_expire_nothing_deleted_unannounced` lost 1 to 7 of
//! its 100 Jobs so whenever other trials' load made the list of its namespace, started by its
//! policy, outlast the first of its Jobs' finishing. Likewise a Job the watch said was deleted
//! would come back from such a list as the record of an object gone.
//!
//! So from the moment such a list is asked for, the names the kind's watch tells of in that
//! namespace are noted, and the list's word on them is not passed on. The watch alone brings
//! every version of each object, in order: whatever it tells of after the list was asked for is
//! either at least as new as what the list saw, or followed by what is. The list's version is
//! passed on only for names the watch has not told of since; whatever the watch tells of them
//! later comes after it, and is judged last.
//!
//! What is noted is one name per object the watch told of in the namespace while its list was
//! under way, dropped when the list ends, is asked for again, or is stopped with its kind.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube_retention_common::kinds::KindId;

/// The namespaces being listed alone, by kind, and the names their kind's watch told of since.
#[derive(Debug, Default)]
pub(crate) struct NamespaceLists {
    under_way: HashMap<(KindId, Arc<str>), HashSet<Box<str>>>,
}

impl NamespaceLists {
    /// A list of `kind` in `namespace` was asked for (again): nothing is noted yet.
    pub(crate) fn started(&mut self, kind: KindId, namespace: Arc<str>) {
        self.under_way.insert((kind, namespace), HashSet::new());
    }

    /// The list of `kind` in `namespace` ended or was stopped.
    pub(crate) fn ended(&mut self, kind: KindId, namespace: &Arc<str>) {
        self.under_way.remove(&(kind, namespace.clone()));
    }

    /// `kind`'s watch told of `name` in `namespace` (applied or gone): noted, where a list of
    /// that namespace is under way.
    pub(crate) fn watched(&mut self, kind: KindId, namespace: &str, name: &str) {
        if self.under_way.is_empty() {
            return;
        }
        if let Some(told) = self.under_way.get_mut(&(kind, Arc::from(namespace))) {
            told.insert(name.into());
        }
    }

    /// Whether the kind's watch told of `name` since the list of `namespace` was asked for: the
    /// list's version of it is not to be passed on.
    pub(crate) fn superseded(&self, kind: KindId, namespace: &Arc<str>, name: &str) -> bool {
        self.under_way
            .get(&(kind, namespace.clone()))
            .is_some_and(|told| told.contains(name))
    }

    /// How many names are noted, in every list under way.
    #[cfg(test)]
    fn noted(&self) -> usize {
        self.under_way.values().map(HashSet::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds() -> (KindId, KindId) {
        let kinds = kube_retention_common::Registry::builtin();
        (
            kinds.named("Job.batch").unwrap(),
            kinds.named("Pod").unwrap(),
        )
    }

    #[test]
    fn the_watch_supersedes_the_list_only_where_a_list_of_that_namespace_is_under_way() {
        let (jobs, pods) = kinds();
        let team_a: Arc<str> = Arc::from("team-a");
        let team_b: Arc<str> = Arc::from("team-b");
        let mut lists = NamespaceLists::default();
        // Before any list: nothing is noted.
        lists.watched(jobs, "team-a", "early");
        lists.started(jobs, team_a.clone());
        lists.watched(jobs, "team-a", "finished");
        lists.watched(jobs, "team-b", "elsewhere");
        lists.watched(pods, "team-a", "a-pod");
        assert!(lists.superseded(jobs, &team_a, "finished"));
        assert!(!lists.superseded(jobs, &team_a, "early"));
        assert!(!lists.superseded(jobs, &team_a, "unchanged"));
        assert!(!lists.superseded(jobs, &team_b, "elsewhere"));
        assert!(!lists.superseded(pods, &team_a, "a-pod"));
        assert_eq!(lists.noted(), 1);
        // Asked for again: the new list saw what the watch told before it.
        lists.started(jobs, team_a.clone());
        assert!(!lists.superseded(jobs, &team_a, "finished"));
        lists.watched(jobs, "team-a", "finished");
        lists.ended(jobs, &team_a);
        assert!(!lists.superseded(jobs, &team_a, "finished"));
        assert_eq!(lists.noted(), 0);
    }
}
