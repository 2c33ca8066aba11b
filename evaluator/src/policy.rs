//! Retention policies' expressions on one object, as evaluator [`Work`]: the object made into
//! the JSON the model reads in one step, then each policy's expressions one per step in the
//! sandbox (`match` first, the others only where it held: [`Answers::next_part`]; the object
//! bound there with the first, cut down to what the expressions read of it: [`Reads`]), and
//! the answers sent back to the loop. Shed, it leaves a token
//! that asks the loop to fetch the object again ([`PolicyOutcome::Shed`]). The object comes
//! charged to the controller's budget of decoded objects, for itself and the JSON made of it
//! ([`value_bytes`]); once the JSON is made the charge is kept to what both are measured to
//! hold, and it goes back to the loop with the answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube_retention_common::cel::Reads;
use kube_retention_common::governing::Answers;
use kube_retention_common::kinds::Resource;
use kube_retention_common::model::object_value;
use serde_json::Value;
use tokio::sync::mpsc;

use super::sandbox::{Handle, Sandbox};
use super::work::{Progress, Token, Work, WorkKey};
use kube_retention_runtime::held::{held_bytes, object_held_bytes};
use kube_retention_runtime::object_memory::Charge;
use kube_retention_state::{ObjectKey, PolicyAnswers, Unevaluated};

/// An object whose policies' expressions are to be evaluated.
pub struct Job {
    /// Orders the versions of one object: only the latest is evaluated and applied.
    pub seq: u64,
    /// The object's kind, namespace and name.
    pub key: ObjectKey,
    /// Its kind's resource, for the apiVersion and kind the model reads.
    pub resource: Resource,
    pub object: DynamicObject,
    pub policies: Unevaluated,
    /// What the object is charged of the controller's budget of decoded objects, since its
    /// watch decoded it: given back as the job is dropped (shed, stale, or judged).
    pub charge: Charge,
}

/// A job done: the object as the model reads it (made here, off the loop), what each policy's
/// expressions said, and how long they took.
pub struct Evaluated {
    pub job: Job,
    pub value: Option<Value>,
    pub answers: PolicyAnswers,
    pub took: Duration,
}

/// What the evaluator sends back to the loop for a job.
pub enum PolicyOutcome {
    Evaluated(Box<Evaluated>),
    /// The job was shed to keep the backlog within its bound: the loop fetches the object
    /// again, if `seq` is still its latest version.
    Shed {
        key: ObjectKey,
        seq: u64,
    },
}

/// How much more than its JSON an object holds once converted: the model's JSON value and its
/// text here, CEL's values in the sandbox, beside the object itself.
const CONVERTED_FACTOR: usize = 4;

/// What the model's JSON of an object holding `object_bytes` holds, at most (charged before the
/// work is sent, [`Charge::try_grow`]): the same tree, each map entry's value a `Value` where
/// the object's metadata has a `String`, its type's two strings beside. Held to it by a
/// proptest over generated objects (`value_bytes_bound_what_the_models_json_holds`); the work
/// keeps its charge to what the JSON is measured to hold once made.
pub fn value_bytes(object_bytes: usize) -> usize {
    object_bytes
        .saturating_add(object_bytes / 2)
        .saturating_add(4096)
}

enum Stage {
    Fresh,
    Converted {
        value: Option<Value>,
        /// The object for the sandbox: `None` where nothing is to be evaluated.
        bound: Option<Handle>,
        answers: Vec<Answers>,
    },
}

/// A [`Job`] as evaluator work.
pub struct PolicyWork {
    job: Job,
    /// Shed before, and fetched again.
    returning: bool,
    bytes: usize,
    stage: Stage,
    took: Duration,
    results: mpsc::UnboundedSender<PolicyOutcome>,
}

impl PolicyWork {
    pub fn new(job: Job, results: mpsc::UnboundedSender<PolicyOutcome>) -> Self {
        let bytes = object_held_bytes(&job.object);
        Self {
            job,
            returning: false,
            bytes,
            stage: Stage::Fresh,
            took: Duration::ZERO,
            results,
        }
    }

    /// This work as shed work coming back ([`Work::returning`]), where `returning`.
    pub fn returning(mut self, returning: bool) -> Self {
        self.returning = returning;
        self
    }

    /// One step: the conversion, or one expression of the first policy with any left.
    fn advance(&mut self, sandbox: &mut Sandbox) -> Progress {
        let Stage::Converted { bound, answers, .. } = &mut self.stage else {
            let value = object_value(&self.job.resource, &self.job.object);
            let evaluated = self
                .job
                .policies
                .iter()
                .any(|(_, rules)| rules.has_expressions());
            // The process is sent only what the policies' expressions read of the object.
            let mut reads = Reads::default();
            for (_, rules) in &self.job.policies {
                reads.union(&rules.reads());
            }
            let bound = value
                .as_ref()
                .filter(|_| evaluated)
                .and_then(|value| serde_json::to_vec(&reads.project(value)).ok())
                .map(|text| sandbox.object(text));
            let answers = vec![Answers::default(); self.job.policies.len()];
            let done = bound.is_none();
            // The charge held to the object and its JSON, as measured (more only where the
            // budget has room: the proptest holds `value_bytes` above what the JSON holds).
            let held = self
                .bytes
                .saturating_add(value.as_ref().map_or(0, held_bytes));
            let charged = self.job.charge.bytes();
            if held > charged {
                self.job.charge.try_grow(held - charged);
            } else {
                self.job.charge.keep(held);
            }
            self.stage = Stage::Converted {
                value,
                bound,
                answers,
            };
            return if done { Progress::Done } else { Progress::More };
        };
        let Some(bound) = bound else {
            return Progress::Done;
        };
        let next = self
            .job
            .policies
            .iter()
            .zip(answers.iter_mut())
            .find_map(|((_, rules), answers)| Some((rules, answers.next_part(rules)?, answers)));
        if let Some((rules, part, answers)) = next {
            answers.answer_in(sandbox, rules, part, bound);
        }
        let more = self
            .job
            .policies
            .iter()
            .zip(answers.iter())
            .any(|((_, rules), answers)| answers.next_part(rules).is_some());
        if more { Progress::More } else { Progress::Done }
    }
}

impl Work for PolicyWork {
    fn namespace(&self) -> &Arc<str> {
        &self.job.key.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Object(self.job.key.clone())
    }

    fn step(&mut self, sandbox: &mut Sandbox) -> Progress {
        let started = Instant::now();
        let progress = self.advance(sandbox);
        self.took += started.elapsed();
        progress
    }

    fn weight(&self) -> usize {
        match self.stage {
            Stage::Fresh => self.bytes,
            Stage::Converted { .. } => self.bytes.saturating_mul(CONVERTED_FACTOR),
        }
    }

    fn returning(&self) -> bool {
        self.returning
    }

    fn finish(self: Box<Self>) {
        let Self {
            job,
            stage,
            took,
            results,
            ..
        } = *self;
        let (value, answers) = match stage {
            Stage::Fresh => (None, Vec::new()),
            Stage::Converted { value, answers, .. } => (value, answers),
        };
        let answers = job
            .policies
            .iter()
            .map(|(key, _)| key.clone())
            .zip(answers)
            .collect();
        let evaluated = Evaluated {
            job,
            value,
            answers,
            took,
        };
        // The loop gone, the controller is stopping: nobody needs the answers.
        results
            .send(PolicyOutcome::Evaluated(Box::new(evaluated)))
            .ok();
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        let Job { key, seq, .. } = self.job;
        let (namespace, results) = (key.namespace.clone(), self.results);
        let token = WorkKey::Object(key.clone());
        Token::asking_again(namespace, token, move || {
            results.send(PolicyOutcome::Shed { key, seq }).ok();
        })
    }
}
