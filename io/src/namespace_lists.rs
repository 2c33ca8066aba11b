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

use kube::runtime::watcher::Event;
use kube_retention_common::kinds::KindId;

use crate::watches::WatchEvent;

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

    /// Whether `event` goes on to the loop, noting what a kind's watch tells: false only for a
    /// namespace list's version of an object its kind's watch told of since the list was
    /// asked for.
    pub(crate) fn passes(&mut self, event: &WatchEvent) -> bool {
        match event {
            WatchEvent::Object(
                kind,
                Ok(Event::Apply(object) | Event::InitApply(object) | Event::Delete(object)),
            ) => {
                if let (Some(namespace), Some(name)) =
                    (&object.metadata.namespace, &object.metadata.name)
                {
                    self.watched(*kind, namespace, name);
                }
                true
            }
            WatchEvent::Relisted(
                kind,
                namespace,
                Ok(Event::Apply(object) | Event::InitApply(object)),
            ) => {
                let name = object.metadata.name.as_deref().unwrap_or_default();
                !self.superseded(*kind, namespace, name)
            }
            _ => true,
        }
    }

    /// `kind`'s watch told of `name` in `namespace` (applied or gone): noted, where a list of
    /// that namespace is under way.
    fn watched(&mut self, kind: KindId, namespace: &str, name: &str) {
        if self.under_way.is_empty() {
            return;
        }
        if let Some(told) = self.under_way.get_mut(&(kind, Arc::from(namespace))) {
            told.insert(name.into());
        }
    }

    /// Whether the kind's watch told of `name` since the list of `namespace` was asked for: the
    /// list's version of it is not to be passed on.
    fn superseded(&self, kind: KindId, namespace: &Arc<str>, name: &str) -> bool {
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

    /// A generated history: commits to four objects of one namespace, delivered in order by
    /// the kind's watch; a list of the namespace asked for after some of them were delivered,
    /// seeing at least those (and perhaps more), its items delivered in between the watch's
    /// later deliveries. What the loop is left with, taking each event passed on as the newest
    /// word on its object, is what the last commit to each object left.
    mod interleavings {
        use std::collections::BTreeMap;

        use kube::api::DynamicObject;
        use proptest::prelude::*;

        use super::*;

        fn object(name: usize, version: usize) -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": format!("job-{name}"), "namespace": "team-a",
                             "resourceVersion": version.to_string()}
            }))
            .unwrap()
        }

        /// What each object is after `commits`, by name: its last version, or gone.
        fn after(commits: &[(usize, bool)]) -> BTreeMap<String, usize> {
            let mut state = BTreeMap::new();
            for (index, &(name, deleted)) in commits.iter().enumerate() {
                match deleted {
                    true => state.remove(&format!("job-{name}")),
                    false => state.insert(format!("job-{name}"), index + 1),
                };
            }
            state
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2_000))]
            #[test]
            fn the_loop_ends_with_what_the_last_commit_left(
                commits in prop::collection::vec((0usize..4, any::<bool>()), 0..24),
                asked in any::<prop::sample::Index>(),
                seen in any::<prop::sample::Index>(),
                arrivals in prop::collection::vec(any::<prop::sample::Index>(), 4),
            ) {
                let (jobs, _) = kinds();
                let namespace: Arc<str> = Arc::from("team-a");
                let total = commits.len();
                // Delivered by the watch before the list is asked for; seen by the list.
                let asked = asked.index(total + 1);
                let seen = asked + seen.index(total - asked + 1);
                let items: Vec<(String, usize)> = after(&commits[..seen]).into_iter().collect();
                // Each item arrives after as many of the watch's deliveries, in order.
                let mut arrive: Vec<usize> = arrivals
                    .iter()
                    .take(items.len())
                    .map(|at| asked + at.index(total - asked + 1))
                    .collect();
                arrive.sort_unstable();
                let mut lists = NamespaceLists::default();
                let mut loop_state: BTreeMap<String, usize> = BTreeMap::new();
                let mut take = |lists: &mut NamespaceLists, event: WatchEvent| {
                    if !lists.passes(&event) {
                        return;
                    }
                    match event {
                        WatchEvent::Object(_, Ok(Event::Apply(object)))
                        | WatchEvent::Relisted(_, _, Ok(Event::InitApply(object))) => {
                            let version = object.metadata.resource_version.unwrap();
                            loop_state.insert(object.metadata.name.unwrap(), version.parse().unwrap());
                        }
                        WatchEvent::Object(_, Ok(Event::Delete(object))) => {
                            loop_state.remove(&object.metadata.name.unwrap());
                        }
                        _ => {}
                    }
                };
                let mut listed = items.iter().zip(&arrive).peekable();
                for delivered in 0..=total {
                    if delivered == asked {
                        lists.started(jobs, namespace.clone());
                    }
                    while let Some(((name, version), _)) = listed.next_if(|(_, at)| **at == delivered) {
                        let name: usize = name.trim_start_matches("job-").parse().unwrap();
                        let event = Event::InitApply(object(name, *version));
                        take(&mut lists, WatchEvent::Relisted(jobs, namespace.clone(), Ok(event)));
                    }
                    if delivered >= asked && listed.peek().is_none() {
                        lists.ended(jobs, &namespace);
                    }
                    if let Some(&(name, deleted)) = commits.get(delivered) {
                        let object = object(name, delivered + 1);
                        let event = if deleted { Event::Delete(object) } else { Event::Apply(object) };
                        take(&mut lists, WatchEvent::Object(jobs, Ok(event)));
                    }
                }
                prop_assert_eq!(loop_state, after(&commits));
            }
        }
    }
}
