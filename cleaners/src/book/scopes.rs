//! Which targets are watched, and how: one watch per [`Scope`] — a kind in the namespace of the
//! Cleaners referring to it — selecting as narrowly as those Cleaners' references allow (one
//! name, or one set of labels, asked of the API server) and holding whole objects only where a
//! condition reads them ([`ScopeWatch`]). A namespace's Cleaners may refer to at most
//! [`KINDS_PER_NAMESPACE`] kinds: each is a watch the controller keeps open for the tenant.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{ApiResource, GroupVersionKind};

use super::{Book, KindState, ScopeState};
use crate::targets::{KindObjects, kind_of};

/// The most kinds the Cleaners of one namespace may refer to; a Cleaner referring to more is
/// `Ready=False` for the kinds beyond it (in the order of their group, version and kind).
pub const KINDS_PER_NAMESPACE: usize = 16;

/// One kind in one namespace: what one watch of Cleaners' targets covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub kind: GroupVersionKind,
    pub namespace: String,
}

impl Scope {
    pub fn new(kind: GroupVersionKind, namespace: &str) -> Self {
        Self {
            kind,
            namespace: namespace.to_owned(),
        }
    }
}

/// How a scope is watched.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopeWatch {
    /// A label selector every reference to the scope shares.
    pub labels: Option<String>,
    /// A field selector for the one object every reference to the scope names.
    pub fields: Option<String>,
    /// Whether a condition reads the objects: otherwise only their metadata is watched, and
    /// only what selecting and deleting them needs is kept.
    pub bodies: bool,
}

impl Book {
    /// The scopes to watch, with how and the kind's resource, where anything that decides them
    /// changed since the last plan: every scope some Cleaner refers to whose kind is served
    /// and which the API server has not refused. Scopes past their namespace's
    /// [`KINDS_PER_NAMESPACE`] are marked unavailable, saying why.
    /// Nothing is planned before the Cleaners are listed: a watch planned for some of them
    /// would be planned again, and listed again, for the rest.
    pub fn plan_watches(&mut self) -> Option<Vec<(Scope, ApiResource, ScopeWatch)>> {
        if !self.cleaners_listed || !std::mem::take(&mut self.replan) {
            return None;
        }
        let mut kinds_by_namespace: BTreeMap<&str, BTreeMap<String, &GroupVersionKind>> =
            BTreeMap::new();
        for scope in self.wanted.keys() {
            let order = format!("{}/{}", scope.kind.api_version(), scope.kind.kind);
            kinds_by_namespace
                .entry(&scope.namespace)
                .or_default()
                .insert(order, &scope.kind);
        }
        let mut beyond = Vec::new();
        for (namespace, kinds) in &kinds_by_namespace {
            for (order, kind) in kinds.iter().skip(KINDS_PER_NAMESPACE) {
                let reason = format!(
                    "the Cleaners of namespace {namespace} refer to {} kinds, and at most \
                     {KINDS_PER_NAMESPACE} are watched for one namespace: {order} is not",
                    kinds.len()
                );
                beyond.push((Scope::new((*kind).clone(), namespace), reason));
            }
        }
        for (scope, reason) in beyond {
            if !matches!(self.scopes.get(&scope), Some(ScopeState::Unavailable(_))) {
                self.scopes
                    .insert(scope.clone(), ScopeState::Unavailable(reason));
                self.wake_scope(&scope);
            }
        }
        let mut plan = Vec::new();
        for scope in self.wanted.keys() {
            let Some(KindState::Served(resource)) = self.kinds.get(&scope.kind) else {
                continue;
            };
            if matches!(self.scopes.get(scope), Some(ScopeState::Unavailable(_))) {
                continue;
            }
            plan.push((scope.clone(), resource.clone(), self.scope_watch(scope)));
        }
        Some(plan)
    }

    /// How `scope` is watched, from the references of the Cleaners that want it.
    fn scope_watch(&self, scope: &Scope) -> ScopeWatch {
        let targets: Vec<_> = self
            .wanted
            .get(scope)
            .into_iter()
            .flatten()
            .filter_map(|key| self.cleaners.get(key))
            .flat_map(|tracked| &tracked.spec.targets)
            .filter(|target| kind_of(&target.reference) == scope.kind)
            .collect();
        let bodies = targets.iter().any(|target| target.include_when_evaluating);
        let names: BTreeSet<Option<&String>> = targets
            .iter()
            .map(|target| target.reference.name.as_ref())
            .collect();
        let labels: BTreeSet<Option<&BTreeMap<String, String>>> = targets
            .iter()
            .map(|target| {
                target
                    .reference
                    .match_labels
                    .as_ref()
                    .filter(|_| target.reference.name.is_none())
            })
            .collect();
        let fields = match names.into_iter().collect::<Vec<_>>().as_slice() {
            [Some(name)] if is_selectable(name, false) => Some(format!("metadata.name={name}")),
            _ => None,
        };
        let labels = match labels.into_iter().collect::<Vec<_>>().as_slice() {
            [Some(labels)] if fields.is_none() && !labels.is_empty() => label_selector(labels),
            _ => None,
        };
        ScopeWatch {
            labels,
            fields,
            bodies,
        }
    }

    /// The watch of `scope` (re)started as `how`: its objects are listed afresh.
    pub fn watch_started(&mut self, scope: &Scope, resource: ApiResource, how: &ScopeWatch) {
        let objects = KindObjects::new(resource, how.bodies);
        self.scopes
            .insert(scope.clone(), ScopeState::Watching(objects));
    }

    /// The watch of `scope` must change, but not yet (it started too recently): what it holds
    /// may lack what a Cleaner now refers to, so its Cleaners wait for the new one's list.
    /// Planned again at [`Book::replan`].
    pub fn scope_waits(&mut self, scope: &Scope) {
        self.scopes.update(scope, KindObjects::unlisted);
    }

    /// The watches are planned again at the next [`Book::plan_watches`].
    pub fn replan(&mut self) {
        self.replan = true;
    }

    /// The API server refused to list or watch `scope`: its Cleaners say so until the next
    /// retry ([`Book::retry_unavailable`]).
    pub fn scope_refused(&mut self, scope: &Scope, reason: String) {
        self.replan = true;
        self.scopes
            .insert(scope.clone(), ScopeState::Unavailable(reason));
        self.wake_scope(scope);
    }

    /// Wakes the Cleaners that refer to `scope`.
    pub(super) fn wake_scope(&mut self, scope: &Scope) {
        if let Some(keys) = self.wanted.get(scope) {
            self.woken.extend(keys.iter().cloned());
        }
    }
}

/// `labels` as a label selector, where every key and value can be written in one.
fn label_selector(labels: &BTreeMap<String, String>) -> Option<String> {
    let pairs: Option<Vec<String>> = labels
        .iter()
        .map(|(key, value)| {
            (is_selectable(key, true) && is_selectable(value, false) && !key.is_empty())
                .then(|| format!("{key}={value}"))
        })
        .collect();
    pairs.map(|pairs| pairs.join(","))
}

/// Whether `text` is made only of what names, label keys (with `/`) and label values are.
fn is_selectable(text: &str, key: bool) -> bool {
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || (key && c == '/'))
}
