//! Objects the webhook never saw. Kinds watched through the `retention.dev/managed` label
//! (Jobs, Pods, extra kinds) are also watched metadata-only where they lack the label
//! (`UNMANAGED_SELECTOR`); an object that carries retention settings but not the label —
//! created while the webhook was down, before kube-retention was installed, or in a namespace
//! the webhook skips — is labelled: the metadata watch reports it gone, and the labelled watch
//! takes it in from there. Only such stragglers are remembered, never the rest.

use std::collections::HashMap;

use compact_str::CompactString;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_retention_common::annotations::{self, MANAGED_LABEL};
use kube_retention_common::kinds::{KindId, Registry};

use super::failures::{Failure, Step};
use super::keys::{Namespaces, ObjectKey};
use super::{Action, Warning};

#[derive(Debug)]
struct Straggler {
    uid: CompactString,
    /// A label request is on its way.
    requested: bool,
    failures: u8,
    retry_at: Option<Timestamp>,
}

impl Straggler {
    fn waiting(&self, now: Timestamp) -> bool {
        self.requested || self.retry_at.is_some_and(|at| at > now)
    }
}

/// The objects waiting for the managed label.
#[derive(Debug, Default)]
pub struct Stragglers(HashMap<ObjectKey, Straggler>);

impl Stragglers {
    /// How many objects wait for the label.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Those whose last label request failed and that wait to retry.
    pub(super) fn in_backoff(&self) -> usize {
        self.0
            .values()
            .filter(|straggler| straggler.failures > 0)
            .count()
    }

    /// The metadata of `key` was seen; the label request it needs now, if the `leader` asks.
    pub(super) fn seen(
        &mut self,
        key: ObjectKey,
        metadata: &ObjectMeta,
        leader: bool,
        now: Timestamp,
    ) -> Option<Action> {
        let labelled = metadata.labels.as_ref().is_some_and(|labels| {
            labels
                .get(MANAGED_LABEL)
                .is_some_and(|value| value == "true")
        });
        let settings = metadata.annotations.as_ref().is_some_and(|all| {
            let (policy, _) = annotations::parse(all);
            policy.has_settings()
        });
        if labelled || !settings || metadata.deletion_timestamp.is_some() {
            self.0.remove(&key);
            return None;
        }
        let uid: CompactString = metadata.uid.as_deref().unwrap_or_default().into();
        let fresh = || Straggler {
            uid: uid.clone(),
            requested: false,
            failures: 0,
            retry_at: None,
        };
        let straggler = self.0.entry(key.clone()).or_insert_with(fresh);
        if straggler.uid != uid {
            // Re-created under the same name: a new object, with no history of failures.
            *straggler = fresh();
        }
        if !leader || straggler.waiting(now) {
            return None;
        }
        straggler.requested = true;
        Some(Action::Label { key })
    }

    /// `key` is gone from the metadata watch.
    pub(super) fn gone(&mut self, key: &ObjectKey) {
        self.0.remove(key);
    }

    /// The metadata watch of `kind` lists afresh (or stops): what it lists again is all that is
    /// left.
    pub(super) fn forget_kind(&mut self, kind: KindId) {
        self.0.retain(|key, _| key.kind != kind);
    }

    /// A label request failed: the Warning it deserves, if any.
    pub(super) fn failed(
        &mut self,
        kinds: &Registry,
        key: &ObjectKey,
        failure: Failure,
        now: Timestamp,
    ) -> Option<Action> {
        let straggler = self.0.get_mut(key)?;
        straggler.requested = false;
        let step = Step::take(
            &mut straggler.failures,
            &mut straggler.retry_at,
            failure,
            now,
        );
        step.warning(kinds, key, &straggler.uid, Warning::LabelFailing)
    }

    /// Label requests for every straggler not asked for yet and not backing off.
    pub(super) fn label_all(&mut self, now: Timestamp) -> Vec<Action> {
        let mut actions = Vec::new();
        for (key, straggler) in &mut self.0 {
            if straggler.waiting(now) {
                continue;
            }
            straggler.requested = true;
            actions.push(Action::Label { key: key.clone() });
        }
        actions
    }

    /// Requests asked for may be asked for again (a new leader takes over).
    pub(super) fn forget_requests(&mut self) {
        for straggler in self.0.values_mut() {
            straggler.requested = false;
        }
    }
}

/// The metadata watch's way into the state ([`super::State::labelling`]): its events and the
/// outcome of its label requests, with what it needs from the rest (the kinds for Events, the
/// namespaces to name objects with, whether this replica leads).
pub struct Labelling<'a> {
    stragglers: &'a mut Stragglers,
    namespaces: &'a mut Namespaces,
    kinds: &'a Registry,
    leader: bool,
}

impl<'a> Labelling<'a> {
    /// `state`'s stragglers, with what they need of the rest.
    pub(super) fn of(state: &'a mut super::State) -> Self {
        Labelling {
            stragglers: &mut state.stragglers,
            namespaces: &mut state.namespaces,
            kinds: &state.kinds,
            leader: state.tracker.leads(),
        }
    }

    /// The metadata of an object of `kind` (a kind watched through the managed label) was seen.
    pub fn seen(&mut self, kind: KindId, metadata: &ObjectMeta, now: Timestamp) -> Vec<Action> {
        let (Some(namespace), Some(name)) = (&metadata.namespace, &metadata.name) else {
            return Vec::new();
        };
        let key = self.namespaces.key(kind, namespace, name);
        let label = self.stragglers.seen(key, metadata, self.leader, now);
        label.into_iter().collect()
    }

    /// An object of `kind` is gone from the metadata watch.
    pub fn gone(&mut self, kind: KindId, namespace: &str, name: &str) {
        let key = self.namespaces.key(kind, namespace, name);
        self.stragglers.gone(&key);
    }

    /// The metadata watch of `kind` lists afresh: what it lists again is all that is left.
    pub fn relisted(&mut self, kind: KindId) {
        self.stragglers.forget_kind(kind);
    }

    /// A label request failed: the Warning it deserves, if any.
    pub fn failed(&mut self, key: &ObjectKey, failure: Failure, now: Timestamp) -> Vec<Action> {
        let warning = self.stragglers.failed(self.kinds, key, failure, now);
        warning.into_iter().collect()
    }

    /// Label requests for every straggler not asked for yet and not backing off (the leader
    /// only).
    pub fn retry(&mut self, now: Timestamp) -> Vec<Action> {
        match self.leader {
            true => self.stragglers.label_all(now),
            false => Vec::new(),
        }
    }
}
