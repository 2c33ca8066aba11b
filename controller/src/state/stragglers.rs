//! Objects the webhook never saw. Kinds watched through the `retention.dev/managed` label
//! (Jobs, Pods, extra kinds) are also watched metadata-only and unfiltered; an object that
//! carries retention settings but not the label — created while the webhook was down, before
//! kube-retention was installed, or in a namespace the webhook skips — is labelled, and the
//! labelled watch takes it in from there. Only such stragglers are remembered, never the rest.

use compact_str::CompactString;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_retention_common::annotations::{self, MANAGED_LABEL};

use super::failures::{Failure, Step};
use super::{Action, KindId, ObjectKey, State, Warning};

#[derive(Debug)]
pub(super) struct Straggler {
    uid: CompactString,
    /// A label request is on its way.
    requested: bool,
    pub(super) failures: u8,
    retry_at: Option<Timestamp>,
}

impl State {
    /// The metadata of an object of `kind` (a kind watched through the managed label) was seen.
    pub fn metadata_seen(
        &mut self,
        kind: KindId,
        metadata: &ObjectMeta,
        now: Timestamp,
    ) -> Vec<Action> {
        let (Some(namespace), Some(name)) = (&metadata.namespace, &metadata.name) else {
            return Vec::new();
        };
        let key = ObjectKey {
            kind,
            namespace: self.intern(namespace),
            name: name.into(),
        };
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
            self.stragglers.remove(&key);
            return Vec::new();
        }
        let uid: CompactString = metadata.uid.as_deref().unwrap_or_default().into();
        let leader = self.leader;
        let fresh = || Straggler {
            uid: uid.clone(),
            requested: false,
            failures: 0,
            retry_at: None,
        };
        let straggler = self.stragglers.entry(key.clone()).or_insert_with(fresh);
        if straggler.uid != uid {
            // Re-created under the same name: a new object, with no history of failures.
            *straggler = fresh();
        }
        if !leader || straggler.requested || straggler.retry_at.is_some_and(|at| at > now) {
            return Vec::new();
        }
        straggler.requested = true;
        vec![Action::Label { key }]
    }

    /// An object of `kind` is gone from the metadata watch.
    pub fn metadata_gone(&mut self, kind: KindId, namespace: &str, name: &str) {
        let key = ObjectKey {
            kind,
            namespace: self.intern(namespace),
            name: name.into(),
        };
        self.stragglers.remove(&key);
    }

    /// The metadata watch of `kind` lists afresh: what it lists again is all that is left.
    pub fn metadata_relisted(&mut self, kind: KindId) {
        self.stragglers.retain(|key, _| key.kind != kind);
    }

    /// Objects waiting for the managed label.
    pub fn stragglers(&self) -> usize {
        self.stragglers.len()
    }

    /// A label request failed.
    pub fn label_failed(
        &mut self,
        key: &ObjectKey,
        failure: Failure,
        now: Timestamp,
    ) -> Vec<Action> {
        let Some(straggler) = self.stragglers.get_mut(key) else {
            return Vec::new();
        };
        straggler.requested = false;
        let step = Step::take(
            &mut straggler.failures,
            &mut straggler.retry_at,
            failure,
            now,
        );
        let uid = straggler.uid.clone();
        step.warning(&self.kinds, key, &uid, Warning::LabelFailing)
            .into_iter()
            .collect()
    }

    /// Label requests for every straggler not asked for yet and not backing off (the leader only).
    pub fn label_stragglers(&mut self, now: Timestamp) -> Vec<Action> {
        if !self.leader {
            return Vec::new();
        }
        let mut actions = Vec::new();
        for (key, straggler) in &mut self.stragglers {
            if straggler.requested || straggler.retry_at.is_some_and(|at| at > now) {
                continue;
            }
            straggler.requested = true;
            actions.push(Action::Label { key: key.clone() });
        }
        actions
    }

    pub(super) fn forget_label_requests(&mut self) {
        for straggler in self.stragglers.values_mut() {
            straggler.requested = false;
        }
    }
}
