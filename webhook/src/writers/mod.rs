//! No confused deputy. kube-retention's controller deletes with its own power, so whoever writes
//! a retention setting borrows that power; a setting is admitted only from a writer who may
//! `delete` what it governs:
//! - a TTL added or shortened, an earlier `expires-at`, `keep` taken away (see
//!   [`kube_retention_common::tightening`]): delete on that object;
//! - stricter settings for a parent's runs (Build, BuildConfig): delete on those runs in the
//!   namespace;
//! - a RetentionPolicy created or its spec changed: delete and list on every resource it names,
//!   in its namespace; a ClusterRetentionPolicy: cluster-wide;
//! - a Cleaner created or its spec changed: delete on what it deletes, list on what it reads,
//!   and for a Helm release it uninstalls, delete on every kind a Cleaner uninstalls
//!   ([`kube_retention_common::cleaner::helm`]: the release's records are forgeable Secrets).
//!
//! Lengthening or removing a setting needs nothing more than the write itself, and neither do
//! kube-retention's own writes (its controller's stamps and labels). Answers come from
//! SubjectAccessReviews for the request's `userInfo`, cached per question for a few seconds. A
//! request asks each distinct question once, however many fields need it, and up to
//! [`CONCURRENT_QUESTIONS`] at once; a field refused on several resources is refused once,
//! naming them all. If the API server cannot answer, the write is refused with the reason: a
//! check that fails open is no check.
//!
//! For annotated objects the API server makes the same check itself, before this webhook is
//! called and whether or not it answers: the ValidatingAdmissionPolicy of
//! [`kube_retention_common::writer_policy`], which restates the same rule and words its refusal
//! alike. This check stays: it answers where that policy is turned off (the chart's
//! `admissionPolicy.enabled`), and where the policy is on it asks only about writes the policy
//! admitted that tighten, i.e. writes by someone who may delete the object, at one cached
//! review each.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;

use futures::StreamExt;

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::api::DynamicObject;
use kube::core::admission::AdmissionRequest;
use kube_retention_common::kinds::qualified;
use kube_retention_common::{FieldError, Ttls};
use serde_json::Value;

use crate::Context;
use crate::access::{Request, Reviews, Subject};
use crate::review::lean::{Account, Exceeded};

/// The questions one admission has in flight at once: a Cleaner's sixteen targets are asked
/// about in two rounds, not sixteen.
pub const CONCURRENT_QUESTIONS: usize = 8;

pub type Allowed<'a> = Pin<Box<dyn Future<Output = Result<bool, kube::Error>> + Send + 'a>>;

/// Whether a writer may do what a setting needs. Behind a trait so unit tests need no cluster.
pub trait WriterAccess: Send + Sync {
    /// Whether `writer` may do `request`; with a name, being allowed on every object of the
    /// namespace is enough, and otherwise that object is asked about.
    fn allowed<'a>(&'a self, writer: &'a Subject, request: &'a Request) -> Allowed<'a>;
}

impl WriterAccess for Reviews {
    fn allowed<'a>(&'a self, writer: &'a Subject, request: &'a Request) -> Allowed<'a> {
        Box::pin(async move {
            let every = Request {
                name: None,
                ..request.clone()
            };
            let everywhere = self.review(writer, &every).await?;
            if everywhere || request.name.is_none() {
                return Ok(everywhere);
            }
            self.review(writer, request).await
        })
    }
}

/// The review could not be made: the write is refused with this.
#[derive(Debug, thiserror::Error)]
pub enum Unchecked {
    #[error("kube-retention could not check that you may {verb} {resource}: {source}")]
    Unanswered {
        verb: &'static str,
        resource: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "kube-retention could not check your permissions: asking about a userInfo of {bytes} \
         bytes holds up to {needs} bytes of the webhook's memory, and {exceeded}"
    )]
    NoRoom {
        bytes: usize,
        needs: usize,
        #[source]
        exceeded: Exceeded,
    },
}

/// Copies of the writer's `userInfo` one question in flight may hold: the review sent (1), its
/// JSON (each byte escaped to at most 6), the API server's answer, which repeats the review's
/// spec, as JSON (6) and decoded (1).
const COPIES_PER_QUESTION: usize = 14;
/// Bytes each string of it may take beyond its text in those copies (its header, its quotes and
/// separators, the allocator's rounding).
const BYTES_PER_STRING: usize = 128;

/// What asking about `info` may hold at once, charged to the memory admissions share before the
/// writer is copied out of the review: its copy, and [`CONCURRENT_QUESTIONS`] questions in
/// flight. A review's `userInfo` is what its sender says it is (a pod may post one of a
/// megabyte); charged, it is bounded by `--max-admission-memory` like every other part.
fn asking_bytes(info: &UserInfo) -> (usize, usize) {
    let texts = [info.username.as_ref(), info.uid.as_ref()]
        .into_iter()
        .flatten()
        .chain(info.groups.iter().flatten())
        .chain(
            info.extra
                .iter()
                .flatten()
                .flat_map(|(key, values)| std::iter::once(key).chain(values)),
        );
    let (text, strings) = texts.fold((0usize, 0usize), |(text, strings), string| {
        (text.saturating_add(string.len()), strings + 1)
    });
    let one = text.saturating_add(strings.saturating_mul(BYTES_PER_STRING));
    let held = one.saturating_mul(1 + CONCURRENT_QUESTIONS * COPIES_PER_QUESTION);
    (text, held)
}

/// A permission a setting at `path` needs, with what to tell the writer who lacks it.
struct Need {
    path: String,
    value: String,
    request: Request,
    /// What the writer may not do, e.g. "set their retention".
    consequence: &'static str,
}

mod objects;
mod resources;

/// The settings of `object` its writer may not make, each naming what they lack; none for a
/// writer allowed everything needed, or for kube-retention's own writes.
pub async fn refusals(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
) -> Result<Vec<FieldError>, Unchecked> {
    let Some(writers) = &context.writers else {
        return Ok(Vec::new());
    };
    if request.user_info.username.as_deref().unwrap_or_default() == context.controller_user {
        return Ok(Vec::new());
    }
    let (bytes, needs) = asking_bytes(&request.user_info);
    let mut held = context.memory.hold();
    held.take(needs).map_err(|exceeded| Unchecked::NoRoom {
        bytes,
        needs,
        exceeded,
    })?;
    let writer = subject(request);
    let (needs, is_object) = if crate::validate::is_policy(object) {
        (resources::policy_needs(context, object, old).await, false)
    } else if crate::validate::is_cleaner(object) {
        (resources::cleaner_needs(context, object, old).await, false)
    } else {
        let needs = objects::object_needs(context, request, object, old, Ttls::default());
        (needs, true)
    };
    let mut refusals = ask(writers.as_ref(), &writer, needs).await?;
    // A new run's TTLs may be copies of its parent's: read the parent only when they would be
    // refused (a writer who may delete the run costs no read).
    if is_object
        && !refusals.is_empty()
        && let Some(from_parent) = objects::parent_ttls(context, request, object, old).await
    {
        let still: BTreeSet<String> =
            objects::object_needs(context, request, object, old, from_parent)
                .into_iter()
                .map(|need| need.path)
                .collect();
        refusals.retain(|refusal| still.contains(&refusal.path));
    }
    Ok(refusals)
}

/// The needs `writer` is refused, one field error per field and verb. Each distinct question is
/// asked once, [`CONCURRENT_QUESTIONS`] at a time; where one could not be answered, the first
/// such in the needs' order refuses the write.
async fn ask(
    writers: &dyn WriterAccess,
    writer: &Subject,
    needs: Vec<Need>,
) -> Result<Vec<FieldError>, Unchecked> {
    let mut questions: Vec<&Request> = Vec::new();
    for need in &needs {
        if !questions.contains(&&need.request) {
            questions.push(&need.request);
        }
    }
    // Made before the stream, not in its `map`: a closure there makes the future unprovably Send.
    let asking: Vec<Allowed<'_>> = questions
        .iter()
        .map(|question| writers.allowed(writer, question))
        .collect();
    let answers: Vec<Result<bool, kube::Error>> = futures::stream::iter(asking)
        .buffered(CONCURRENT_QUESTIONS)
        .collect()
        .await;
    let mut answered: HashMap<&Request, bool> = HashMap::new();
    for (question, answer) in questions.iter().zip(answers) {
        let allowed = answer.map_err(|source| Unchecked::Unanswered {
            verb: question.verb,
            resource: qualified(&question.resource, &question.group),
            source,
        })?;
        answered.insert(question, allowed);
    }
    // One refusal per field and verb, naming every resource refused there (a Helm release's
    // kinds, a parent's runs) in the needs' order.
    let mut refused: Vec<(&Need, Vec<String>)> = Vec::new();
    for need in &needs {
        if answered.get(&need.request).copied().unwrap_or(false) {
            continue;
        }
        let resource = qualified(&need.request.resource, &need.request.group);
        let same = |(first, _): &&mut (&Need, Vec<String>)| {
            first.path == need.path && first.request.verb == need.request.verb
        };
        match refused.iter_mut().find(same) {
            Some((_, resources)) if resources.contains(&resource) => {}
            Some((_, resources)) => resources.push(resource),
            None => refused.push((need, vec![resource])),
        }
    }
    Ok(refused
        .into_iter()
        .map(|(need, resources)| FieldError {
            path: need.path.clone(),
            value: need.value.clone(),
            rule: format!(
                "{}, so you may not {}",
                lacking(&need.request, &resources),
                need.consequence
            ),
        })
        .collect())
}

fn subject(request: &AdmissionRequest<DynamicObject>) -> Subject {
    let info = &request.user_info;
    Subject {
        user: info.username.clone().unwrap_or_default(),
        groups: info.groups.clone().unwrap_or_default(),
        uid: info.uid.clone(),
        extra: info.extra.clone().unwrap_or_default(),
    }
}

/// "you may not delete configmaps in namespace team-a", "you may not delete secrets and
/// configmaps in namespace team-a": `request`'s verb and namespace, on `resources`.
fn lacking(request: &Request, resources: &[String]) -> String {
    let resources = match resources {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    };
    match &request.namespace {
        Some(namespace) => format!(
            "you may not {} {resources} in namespace {namespace}",
            request.verb
        ),
        None => format!("you may not {} {resources} cluster-wide", request.verb),
    }
}
