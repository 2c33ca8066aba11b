//! Which settings govern a seen object: its own, or the policy that wins among those that may
//! apply (the rule is `common::governing`'s; this gathers the candidates and keeps the answer in
//! the form the state records: the policy's key, its dry run, the limits group it puts the object
//! in, and the policies it overruled).

use std::collections::BTreeMap;
use std::sync::Arc;

use compact_str::CompactString;
use jiff::Timestamp;
use kube_retention_common::governing::{Answers, Judgement, Subject, judge_with};
use kube_retention_common::kinds::Entry;

use super::groups::Limits;
use super::policies::{PolicyBook, PolicyKey, policy_group_prefix};
use super::seen::Seen;

/// How an object is governed, as the state keeps it.
pub(super) struct Governed {
    pub(super) judgement: Judgement,
    pub(super) policy: Option<Arc<PolicyKey>>,
    pub(super) dry_run: bool,
    /// The limits group of the governing policy and its limits, if it sets any.
    pub(super) group: Option<(CompactString, Limits)>,
    /// The other policies of its scope that applied, and lost.
    pub(super) overruled: Vec<Arc<PolicyKey>>,
    /// The governing policy announces its deletions (`spec.sink`).
    pub(super) announced: bool,
}

/// Judges `seen` (of the kind `entry`) under its own settings and the policies that may apply.
pub(super) fn govern(
    book: &PolicyBook,
    entry: &Entry,
    seen: &Seen<'_>,
    created: Option<Timestamp>,
    now: Timestamp,
) -> Governed {
    let empty = BTreeMap::new();
    let labels = seen.object.metadata.labels.as_ref().unwrap_or(&empty);
    let (keys, candidates) = book.candidates(&seen.namespace, seen.answers);
    let subject = Subject {
        entry,
        object: seen.value,
        labels,
        namespace_labels: book.namespace_labels(&seen.namespace),
        created,
    };
    let judgement = judge_with(&subject, &candidates, now, Answers::not_evaluated);
    let Some(index) = judgement.policy else {
        return Governed {
            judgement,
            policy: None,
            dry_run: false,
            group: None,
            overruled: Vec::new(),
            announced: false,
        };
    };
    let rules = candidates[index].rules;
    let key = keys[index].clone();
    let limits = Limits {
        succeeded: rules.succeeded_limit,
        failed: rules.failed_limit,
    };
    let group = (limits != Limits::default()).then(|| {
        let value = rules
            .group_by
            .as_ref()
            .and_then(|label| labels.get(label))
            .map_or("", String::as_str);
        let name = CompactString::from(format!("{}{value}", policy_group_prefix(&key)));
        (name, limits)
    });
    let overruled = judgement
        .overruled
        .iter()
        .map(|&index| (*keys[index]).clone())
        .collect();
    Governed {
        judgement,
        policy: Some(key),
        dry_run: rules.dry_run,
        group,
        overruled,
        announced: rules.sink.is_some(),
    }
}
