//! Which settings govern an object, with retention policies in play — deterministic, in this
//! order: `retention.dev/keep`; the object's annotations; its own fields (BuildRun
//! `spec.retention`, OpenShift TTL seconds, what it inherited); a namespaced RetentionPolicy;
//! a ClusterRetentionPolicy. Where two policies of the same scope apply, the one giving the
//! earlier deadline wins (then the first by name). A policy applies to an object of a kind it
//! names, in a namespace it covers, whose labels its `selector` matches and for which its `match`
//! is true; a `match` that cannot be evaluated on the object (a field it reads is absent) is
//! false.
//!
//! "Finished": a policy's `finished.succeeded` / `failed` true decide the outcome, else the
//! kind's built-in rule; a kind with no built-in notion of finishing is running until the
//! policy's rule says otherwise. `finished.at` gives the time, else the built-in time.
//!
//! A policy's expressions are evaluated once per object into [`Answers`]: by the caller ahead
//! of judging where evaluation must not hold up its thread (the controller), else here.
//!
//! The governing policy's `holdWhile`, while true (or not answerable), puts the object on hold:
//! its deadline stands, but it is not deleted, nor counted against the policy's limits.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::annotations::AnnotationPolicy;
use crate::cel::EvalError;
use crate::expiry::{Decider, Expiry};
use crate::kinds::Entry;
use crate::own_settings::OwnSettings;
use crate::policies::Rules;
use crate::progress::{Finished, Outcome, Progress};

mod answers;

pub use answers::{Answers, Part};

/// A policy that may apply to an object.
#[derive(Debug, Clone, Copy)]
pub struct CandidatePolicy<'a> {
    /// A RetentionPolicy in the object's namespace (else a ClusterRetentionPolicy).
    pub namespaced: bool,
    pub rules: &'a Rules,
    /// Its expressions' answers for the object, where evaluated ahead.
    pub answers: Option<&'a Answers>,
}

/// An object as far as governing it goes.
pub struct Subject<'a> {
    pub entry: &'a Entry,
    pub object: &'a Value,
    pub labels: &'a BTreeMap<String, String>,
    /// The labels of its namespace, for `namespaceSelector`.
    pub namespace_labels: &'a BTreeMap<String, String>,
    pub created: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// The object's own settings (annotations and fields), which own kube-retention's stamp.
    pub own: OwnSettings,
    pub progress: Progress,
    /// The expiry that governs: the object's own, or the winning policy's.
    pub expiry: Expiry,
    /// The setting that decided [`Judgement::expiry`]: of the object's own settings, or of the
    /// governing policy's (its `ttl` read as `retention.dev/ttl`, its TTLs after an outcome as
    /// the object's own fields). [`crate::setting::deciding`] names it.
    pub decider: Option<Decider>,
    /// The index of the policy that governs, if one does.
    pub policy: Option<usize>,
    /// The other policies of its scope that applied and lost to it (a later deadline).
    pub overruled: Vec<usize>,
    /// The governing policy's `holdWhile` holds it: not deleted, even when due, nor counted
    /// against the policy's limits.
    pub on_hold: bool,
    /// How long before the deadline to warn: the object's `retention.dev/notify-before`, else
    /// the governing policy's `notifyBefore`.
    pub notify_before: Option<Duration>,
}

impl Judgement {
    /// When to warn that the object goes: its deadline less [`Judgement::notify_before`]
    /// (`None` without either).
    pub fn notice_at(&self) -> Option<Timestamp> {
        let before = jiff::SignedDuration::try_from(self.notify_before?).ok()?;
        let deadline = self.expiry.deadline()?;
        Some(deadline.checked_sub(before).unwrap_or(Timestamp::MIN))
    }
}

/// Judges `subject` under `candidates` (namespaced and cluster policies in name order), the
/// expressions of a candidate that comes without answers evaluated here, now.
pub fn judge(
    subject: &Subject<'_>,
    candidates: &[CandidatePolicy<'_>],
    now: Timestamp,
) -> Judgement {
    judge_with(subject, candidates, now, Answers::compute)
}

/// Like [`judge`], a candidate without answers answered by `unanswered`: the controller,
/// which evaluates tenants' expressions only in its sandbox, answers them as not evaluated
/// ([`Answers::not_evaluated`]) rather than evaluate them on its loop.
pub fn judge_with(
    subject: &Subject<'_>,
    candidates: &[CandidatePolicy<'_>],
    now: Timestamp,
    unanswered: impl Fn(&Rules, &Value) -> Answers,
) -> Judgement {
    let (own, _) = OwnSettings::read_as(subject.entry, subject.object);
    let computed: Vec<OnceCell<Answers>> = candidates.iter().map(|_| OnceCell::new()).collect();
    let answers = |index: usize| -> &Answers {
        let candidate = &candidates[index];
        candidate.answers.unwrap_or_else(|| {
            computed[index].get_or_init(|| unanswered(candidate.rules, subject.object))
        })
    };
    let applicable: Vec<usize> = (0..candidates.len())
        .filter(|&index| applies(&candidates[index], subject, || answers(index)))
        .collect();
    let namespaced: Vec<usize> = applicable
        .iter()
        .copied()
        .filter(|&index| candidates[index].namespaced)
        .collect();
    let scope = if namespaced.is_empty() {
        applicable
    } else {
        namespaced
    };
    let progress = match scope.first() {
        Some(&index) => progress_under(subject, answers(index)),
        None => subject.entry.finish.progress(subject.object),
    };
    let annotations = &own.annotations;
    let own_governs = annotations.keep || own.has_ttl() || annotations.own_deadline().is_some();
    if own_governs || scope.is_empty() {
        let (expiry, decider) = Expiry::decide(&own, subject.created, progress, now);
        return Judgement {
            notify_before: own.annotations.notify_before,
            own,
            progress,
            expiry,
            decider,
            policy: None,
            overruled: Vec::new(),
            on_hold: false,
        };
    }
    let mut best: Option<(usize, Expiry, Option<Decider>)> = None;
    for &index in &scope {
        let (expiry, decider) = Expiry::decide(
            &as_policy(candidates[index].rules, &own.annotations),
            subject.created,
            progress,
            now,
        );
        let earlier = match (&best, expiry.deadline()) {
            (None, _) => true,
            (Some((_, current, _)), Some(deadline)) => {
                current.deadline().is_none_or(|at| deadline < at)
            }
            (Some(_), None) => false,
        };
        if earlier {
            best = Some((index, expiry, decider));
        }
    }
    let (policy, expiry, decider) = best
        .map_or((None, Expiry::Never, None), |(index, expiry, decider)| {
            (Some(index), expiry, decider)
        });
    let overruled = scope
        .into_iter()
        .filter(|&index| Some(index) != policy)
        .collect();
    let on_hold = policy.is_some_and(|index| {
        candidates[index].rules.hold_while.is_some() && answers(index).holds()
    });
    let notify_before = own
        .annotations
        .notify_before
        .or_else(|| policy.and_then(|index| candidates[index].rules.notify_before));
    Judgement {
        own,
        progress,
        expiry,
        decider,
        policy,
        overruled,
        on_hold,
        notify_before,
    }
}

fn applies<'a>(
    candidate: &CandidatePolicy<'_>,
    subject: &Subject<'_>,
    answers: impl FnOnce() -> &'a Answers,
) -> bool {
    let rules = candidate.rules;
    let text = |key: &str| {
        subject
            .object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let object = Selected {
        api_version: text("apiVersion"),
        kind: text("kind"),
        labels: subject.labels,
        namespace_labels: subject.namespace_labels,
    };
    selects(rules, candidate.namespaced, &object)
        && (rules.matches.is_none() || answers().matches == Some(Ok(true)))
}

/// What a policy's selection reads of an object: its kind, its labels and its namespace's.
pub struct Selected<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub namespace_labels: &'a BTreeMap<String, String>,
}

/// Whether a policy (`namespaced`: a RetentionPolicy of the object's namespace) selects an
/// object: all it asks but its `match`, which only evaluating it can tell.
pub fn selects(rules: &Rules, namespaced: bool, object: &Selected<'_>) -> bool {
    rules.governs(object.api_version, object.kind)
        && (namespaced || rules.namespace_selector.matches(object.namespace_labels))
        && rules.selector.matches(object.labels)
}

/// The TTLs of a policy as the settings [`Expiry::compute`] reads, with the object's snooze.
fn as_policy(rules: &Rules, own: &AnnotationPolicy) -> OwnSettings {
    OwnSettings {
        annotations: AnnotationPolicy {
            ttl: rules.ttl,
            snoozed_until: own.snoozed_until,
            ..AnnotationPolicy::default()
        },
        own: rules.ttls,
        ..OwnSettings::default()
    }
}

fn progress_under(subject: &Subject<'_>, answers: &Answers) -> Progress {
    let builtin = subject.entry.finish.progress(subject.object);
    let holds = |answer: &Option<Result<bool, EvalError>>| answer == &Some(Ok(true));
    let outcome = if holds(&answers.succeeded) {
        Some(Outcome::Succeeded)
    } else if holds(&answers.failed) {
        Some(Outcome::Failed)
    } else {
        None
    };
    let rules_finish = answers.succeeded.is_some() || answers.failed.is_some();
    let at = |fallback: Option<Timestamp>| {
        answers
            .at
            .as_ref()
            .and_then(|at| at.as_ref().ok().copied())
            .or(fallback)
    };
    match (outcome, builtin) {
        (Some(outcome), builtin) => Progress::Finished(Finished {
            outcome,
            at: at(builtin.finished().and_then(|finished| finished.at)),
        }),
        (None, Progress::Finished(done)) => Progress::Finished(Finished {
            at: at(done.at),
            ..done
        }),
        (None, Progress::NotARun) if rules_finish => Progress::Running,
        (None, other) => other,
    }
}
