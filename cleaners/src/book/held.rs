//! The scopes' states, and the bytes their objects hold, by namespace and in all, within hard
//! bounds. A Cleaner's targets are its own namespace's objects, kept as their watch delivers
//! them — whole where a condition reads them (`includeWhenEvaluating`) — so without a bound a
//! namespace editor holds the controller's memory: three hundred ConfigMaps of a megabyte and a
//! Cleaner reading them. Every change to a scope's objects goes through [`Scopes::update`],
//! which weighs what it holds before and after ([`KindObjects::bytes`]); past a bound the
//! heaviest scope of the heaviest namespace is let go of — its objects dropped at once, its watch
//! stopped at the next plan, its Cleaners `Ready=False` saying why, nothing of theirs deleted —
//! until what is held is within the bounds again. It is tried again at the next retry of
//! unavailable scopes, as a scope the API server refused is.

use std::collections::HashMap;

use kube_retention_runtime::object_memory::Charge;

use super::{Scope, ScopeState};
use crate::targets::KindObjects;

/// The most bytes the targets' objects of one namespace's Cleaners may hold.
pub const PER_NAMESPACE: usize = 16 * 1024 * 1024;
/// The most bytes every namespace's targets may hold together.
pub const IN_ALL: usize = 48 * 1024 * 1024;

const MIB: usize = 1024 * 1024;

/// The scopes, what each holds, and the sums per namespace and in all.
#[derive(Debug, Default)]
pub struct Scopes {
    states: HashMap<Scope, ScopeState>,
    by_namespace: HashMap<String, usize>,
    total: usize,
    /// What the objects held are charged of the controller's budget of decoded objects: taken
    /// over from their watches' events ([`Scopes::absorb`]) and kept to what is held.
    charge: Charge,
}

impl Scopes {
    pub fn get(&self, scope: &Scope) -> Option<&ScopeState> {
        self.states.get(scope)
    }

    /// Sets `scope`'s state; what its objects held before is given back.
    pub fn insert(&mut self, scope: Scope, state: ScopeState) {
        let added = bytes_of(&state);
        let old = self.states.insert(scope.clone(), state);
        self.account(&scope.namespace, old.as_ref().map_or(0, bytes_of), added);
    }

    /// Keeps only the scopes `keep` says; what the others held is given back.
    pub fn retain(&mut self, mut keep: impl FnMut(&Scope, &ScopeState) -> bool) {
        let gone: Vec<Scope> = self
            .states
            .iter()
            .filter(|(scope, state)| !keep(scope, state))
            .map(|(scope, _)| scope.clone())
            .collect();
        for scope in gone {
            if let Some(state) = self.states.remove(&scope) {
                self.account(&scope.namespace, bytes_of(&state), 0);
            }
        }
    }

    /// Takes over what an object coming in was charged; [`Scopes::update`] then keeps the
    /// charge to what the scopes hold, giving back what was let go of or never kept.
    pub fn absorb(&mut self, charge: Charge) {
        self.charge.absorb(charge);
    }

    /// Changes the objects of `scope`, where it is watched, and accounts for what they hold.
    pub fn update<R>(
        &mut self,
        scope: &Scope,
        change: impl FnOnce(&mut KindObjects) -> R,
    ) -> Option<R> {
        let Some(ScopeState::Watching(objects)) = self.states.get_mut(scope) else {
            return None;
        };
        let before = objects.bytes();
        let changed = change(objects);
        let after = objects.bytes();
        self.account(&scope.namespace, before, after);
        Some(changed)
    }

    /// Whether `scope`'s objects are listed, where it is watched.
    pub fn listed(&self, scope: &Scope) -> Option<bool> {
        match self.states.get(scope) {
            Some(ScopeState::Watching(objects)) => Some(objects.listed()),
            _ => None,
        }
    }

    /// Lets go of the heaviest scopes until what is held is within both bounds, `namespace`'s
    /// first (the one that just grew), then the heaviest namespace's; each is unavailable,
    /// saying which bound. The scopes let go of.
    pub fn hold_within_bounds(&mut self, namespace: &str) -> Vec<Scope> {
        let mut let_go = Vec::new();
        loop {
            let over = if self.held_by(namespace) > PER_NAMESPACE {
                Some((namespace.to_owned(), false))
            } else if self.total > IN_ALL {
                self.by_namespace
                    .iter()
                    .max_by_key(|(namespace, bytes)| (**bytes, (*namespace).clone()))
                    .map(|(namespace, _)| (namespace.clone(), true))
            } else {
                None
            };
            let Some((heaviest, in_all)) = over else {
                break;
            };
            let Some(scope) = self.heaviest_in(&heaviest) else {
                break;
            };
            let reason = let_go_because(&heaviest, &scope, in_all);
            self.insert(scope.clone(), ScopeState::Unavailable(reason));
            let_go.push(scope);
        }
        let_go
    }

    /// The bytes `namespace`'s scopes hold.
    pub fn held_by(&self, namespace: &str) -> usize {
        self.by_namespace.get(namespace).copied().unwrap_or(0)
    }

    /// The bytes every scope holds.
    pub fn held(&self) -> usize {
        self.total
    }

    /// The scope of `namespace` whose objects hold the most (the first by name of equals).
    fn heaviest_in(&self, namespace: &str) -> Option<Scope> {
        self.states
            .iter()
            .filter(|(scope, _)| scope.namespace == namespace)
            .filter_map(|(scope, state)| match state {
                ScopeState::Watching(objects) if objects.bytes() > 0 => {
                    Some((objects.bytes(), scope))
                }
                _ => None,
            })
            .max_by(|(bytes, scope), (other_bytes, other)| {
                bytes
                    .cmp(other_bytes)
                    .then_with(|| described(other).cmp(&described(scope)))
            })
            .map(|(_, scope)| scope.clone())
    }

    fn account(&mut self, namespace: &str, before: usize, after: usize) {
        if before == after {
            return;
        }
        let held = self.by_namespace.entry(namespace.to_owned()).or_default();
        *held = held.saturating_sub(before).saturating_add(after);
        if *held == 0 {
            self.by_namespace.remove(namespace);
        }
        self.total = self.total.saturating_sub(before).saturating_add(after);
        self.charge.keep(self.total);
    }
}

fn bytes_of(state: &ScopeState) -> usize {
    match state {
        ScopeState::Watching(objects) => objects.bytes(),
        ScopeState::Unavailable(_) => 0,
    }
}

/// Why `scope` of `namespace` is not watched: past its namespace's bound, or (`in_all`) past
/// every namespace's with `namespace` holding the most.
fn let_go_because(namespace: &str, scope: &Scope, in_all: bool) -> String {
    let bound = if in_all {
        format!(
            "the objects every namespace's Cleaners refer to would hold more than {} MiB of the \
             controller's memory, and namespace {namespace}'s hold the most",
            IN_ALL / MIB
        )
    } else {
        format!(
            "the objects the Cleaners of namespace {namespace} refer to would hold more than {} \
             MiB of the controller's memory, the most one namespace's may",
            PER_NAMESPACE / MIB
        )
    };
    format!(
        "{bound}: {} is not watched, so these Cleaners are not judged and delete nothing. Select \
         fewer objects (by name or labels) or read fewer (includeWhenEvaluating: false)",
        described(scope)
    )
}

fn described(scope: &Scope) -> String {
    format!("{}/{}", scope.kind.api_version(), scope.kind.kind)
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    use kube_retention_common::cleaner::Cleaner;
    use kube_retention_runtime::held::object_held_bytes;
    use kube_retention_runtime::object_memory::ObjectMemory;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::book::Book;

    const NAMESPACES: usize = 4;
    /// The most objects the book holds: 24 names a namespace, listed and relisting.
    const MOST_OBJECTS: usize = NAMESPACES * 24 * 2;

    fn config_maps() -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "ConfigMap")
    }

    fn scope(namespace: usize) -> Scope {
        Scope::new(config_maps(), &format!("ns{namespace}"))
    }

    /// A book whose every namespace has a Cleaner reading every ConfigMap, each watched.
    fn book() -> Book {
        let mut book = Book::default();
        book.relist_started();
        for namespace in 0..NAMESPACES {
            let cleaner: Cleaner = serde_json::from_value(json!({
                "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
                "metadata": {"name": "reads", "namespace": format!("ns{namespace}"),
                             "uid": format!("uid-{namespace}"),
                             "creationTimestamp": "2026-11-22T10:00:00Z"},
                "spec": {"targets": [{"name": "maps", "includeWhenEvaluating": true,
                                      "reference": {"version": "v1", "kind": "ConfigMap"}}],
                         "conditions": []}
            }))
            .unwrap();
            book.applied(&cleaner);
        }
        book.relist_done();
        let kind = config_maps();
        book.resolved(
            &kind,
            Ok(ApiResource::from_gvk_with_plural(&kind, "configmaps")),
        );
        start_planned(&mut book);
        book
    }

    /// Starts the planned watches not under way, each listed, as the loop does.
    fn start_planned(book: &mut Book) {
        for (scope, resource, how) in book.plan_watches().unwrap_or_default() {
            if book.scopes.listed(&scope).is_none() {
                book.watch_started(&scope, resource, &how);
                book.objects_listed(&scope);
            }
        }
    }

    fn config_map(namespace: usize, name: usize, bytes: usize, labels: usize) -> DynamicObject {
        let labels: serde_json::Map<String, serde_json::Value> = (0..labels)
            .map(|label| (format!("l{label}"), json!("v")))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("m{name}"), "namespace": format!("ns{namespace}"),
                         "labels": labels},
            "data": {"payload": "x".repeat(bytes)}
        }))
        .unwrap()
    }

    #[derive(Debug, Clone)]
    enum Step {
        Apply {
            namespace: usize,
            name: usize,
            bytes: usize,
            labels: usize,
        },
        Delete {
            namespace: usize,
            name: usize,
        },
        Relist {
            namespace: usize,
        },
        Listed {
            namespace: usize,
        },
        Retry,
    }

    fn steps() -> impl Strategy<Value = Step> {
        // One namespace busier than the others, so that it passes its bound and they theirs
        // less often.
        let namespace = || prop_oneof![3 => Just(0usize), 1 => 1..NAMESPACES];
        let bytes = 0..3 * 1024 * 1024usize;
        prop_oneof![
            6 => (namespace(), 0..24usize, bytes, 0..500usize).prop_map(
                |(namespace, name, bytes, labels)| Step::Apply { namespace, name, bytes, labels }
            ),
            2 => (namespace(), 0..24usize)
                .prop_map(|(namespace, name)| Step::Delete { namespace, name }),
            1 => namespace().prop_map(|namespace| Step::Relist { namespace }),
            1 => namespace().prop_map(|namespace| Step::Listed { namespace }),
            1 => Just(Step::Retry),
        ]
    }

    /// Runs `steps`, holding the book to both bounds and to exact sums after each, and its
    /// charge to what it holds; whether any scope was let go of.
    fn run(steps: Vec<Step>) -> Result<bool, TestCaseError> {
        let memory = ObjectMemory::new(1 << 30);
        let mut book = book();
        let mut let_go = false;
        for step in steps {
            match step {
                Step::Apply {
                    namespace,
                    name,
                    bytes,
                    labels,
                } => {
                    let object = config_map(namespace, name, bytes, labels);
                    // As a watch charges it: what the object holds decoded.
                    let charge = memory.take(object_held_bytes(&object)).now_or_never();
                    let charge = charge.expect("a budget far above the bounds");
                    book.object_applied(&scope(namespace), object, charge);
                }
                Step::Delete { namespace, name } => {
                    book.object_deleted(&scope(namespace), &format!("m{name}"));
                }
                Step::Relist { namespace } => book.objects_relisting(&scope(namespace)),
                Step::Listed { namespace } => book.objects_listed(&scope(namespace)),
                Step::Retry => {
                    book.retry_unavailable();
                    start_planned(&mut book);
                }
            }
            let mut in_all = 0;
            for namespace in 0..NAMESPACES {
                let held = book.scopes.held_by(&format!("ns{namespace}"));
                prop_assert!(held <= PER_NAMESPACE, "ns{namespace}: {held}");
                let weighed = match book.scopes.get(&scope(namespace)) {
                    Some(ScopeState::Watching(objects)) => objects.weighed_afresh(),
                    Some(ScopeState::Unavailable(_)) => {
                        let_go = true;
                        0
                    }
                    None => 0,
                };
                prop_assert_eq!(held, weighed, "ns{}", namespace);
                in_all += held;
            }
            prop_assert!(book.scopes.held() <= IN_ALL);
            prop_assert_eq!(book.scopes.held(), in_all);
            // What it is charged is what it holds, less each object's slot and name in its
            // map (its watch charged what the object holds): what it let go of is given back.
            let charged = memory.held();
            prop_assert!(charged <= in_all, "charged {charged} holding {in_all}");
            prop_assert!(in_all - charged <= MOST_OBJECTS * (64 + "m23".len()));
        }
        Ok(let_go)
    }

    /// Whatever the namespaces' objects and their order — megabytes, hundreds of labels, lists
    /// under way, retries — what the targets hold stays within both bounds after every change,
    /// the sums are exactly what the objects held weigh, and the charges the book took over
    /// from their watches are given back as it lets objects go; and the bounds were reached.
    #[test]
    fn what_targets_hold_stays_within_the_bounds_and_is_accounted_exactly() {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(24));
        let reached = std::sync::atomic::AtomicUsize::new(0);
        runner
            .run(&prop::collection::vec(steps(), 20..160), |steps| {
                if run(steps)? {
                    reached.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
        let reached = reached.into_inner();
        assert!(reached >= 4, "the bounds reached in {reached} of 24 cases");
    }
}
