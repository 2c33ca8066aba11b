//! A Cleaner's conditions judged as evaluator [`Work`], through the same evaluator, sandbox,
//! shares and limits as retention policies' expressions: its targets made into the JSON its
//! conditions read in one step, then one condition at one time per step in the sandbox
//! ([`Judge::step_in`]; the targets bound there with the first) — the monotonic search
//! included, which is what let one Cleaner hold the Cleaners' loop for seconds — and the
//! verdict sent back to the Cleaners' loop. Shed, it leaves a token that asks the loop to
//! prepare it again.

use std::sync::Arc;

use kube::api::DynamicObject;
use kube_retention_common::cel::ConversionError;
use kube_retention_common::cleaner::{Judge, Judging, Verdict};
use tokio::sync::mpsc;

use super::book::{Clean, CleanerKey, CompiledSpec};
use super::status::Problem;
use kube_retention_evaluator::sandbox::{Handle, Sandbox};
use kube_retention_evaluator::work::Token;
use kube_retention_evaluator::{Progress, Work, WorkKey};
use kube_retention_runtime::held::object_held_bytes;

/// One evaluation of a Cleaner whose conditions need CEL, prepared by the book.
pub struct Pending {
    pub key: CleanerKey,
    /// Orders a Cleaner's evaluations: only the latest one's verdict is taken.
    pub seq: u64,
    pub judge: Arc<Judge>,
    pub judging: Judging,
    /// The objects each target the conditions see selects, by target name.
    pub targets: Vec<(String, Vec<Arc<DynamicObject>>)>,
    /// `status.resolvedTargets`.
    pub resolved: Vec<String>,
    /// What cleaning does if the verdict is [`Verdict::Clean`].
    pub clean: Clean,
}

/// What the evaluator sends back to the Cleaners' loop.
pub enum CleanerOutcome {
    Judged {
        pending: Box<Pending>,
        verdict: Result<Verdict, Problem>,
    },
    /// Shed to keep the evaluator's backlog within its bound: prepared again, if still the
    /// latest.
    Shed { key: CleanerKey, seq: u64 },
    /// A spec compiled ([`crate::compile`]): its judge, or `None` where the
    /// evaluator let go of the request (asked for again, if still the latest).
    Compiled {
        key: CleanerKey,
        seq: u64,
        judge: Option<CompiledSpec>,
    },
}

/// How much more than their JSON the targets hold once converted (their text here, CEL's
/// values in the sandbox).
const CONVERTED_FACTOR: usize = 3;

enum Stage {
    Fresh,
    Converted(Handle),
    Decided(Result<Verdict, Problem>),
}

/// A [`Pending`] evaluation as evaluator work.
pub struct CleanerWork {
    pending: Pending,
    /// Shed before, and prepared again.
    returning: bool,
    namespace: Arc<str>,
    bytes: usize,
    stage: Stage,
    results: mpsc::UnboundedSender<CleanerOutcome>,
}

impl CleanerWork {
    pub fn new(pending: Pending, results: mpsc::UnboundedSender<CleanerOutcome>) -> Self {
        let bytes = pending
            .targets
            .iter()
            .flat_map(|(_, objects)| objects)
            .map(|object| object_held_bytes(object))
            .fold(0usize, usize::saturating_add);
        Self {
            namespace: Arc::from(pending.key.namespace.as_str()),
            pending,
            returning: false,
            bytes,
            stage: Stage::Fresh,
            results,
        }
    }
}

impl CleanerWork {
    /// This work as shed work coming back ([`Work::returning`]), where `returning`.
    pub fn returning(mut self, returning: bool) -> Self {
        self.returning = returning;
        self
    }
}

/// The targets as their conditions see them, `{items: [...]}` by name: each one's JSON text.
fn texts(targets: &[(String, Vec<Arc<DynamicObject>>)]) -> Result<Vec<(String, Vec<u8>)>, Problem> {
    targets
        .iter()
        .map(|(name, objects)| {
            let mut text = b"{\"items\":[".to_vec();
            for (index, object) in objects.iter().enumerate() {
                if index > 0 {
                    text.push(b',');
                }
                serde_json::to_writer(&mut text, object.as_ref()).map_err(|error| {
                    Problem::Values(ConversionError::Variable {
                        name: name.clone(),
                        reason: error.to_string(),
                    })
                })?;
            }
            text.extend_from_slice(b"]}");
            Ok((name.clone(), text))
        })
        .collect()
}

impl Work for CleanerWork {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Cleaner(Arc::from(self.pending.key.name.as_str()))
    }

    fn step(&mut self, sandbox: &mut Sandbox) -> Progress {
        let Pending {
            judge,
            judging,
            targets,
            ..
        } = &mut self.pending;
        let decided = match &self.stage {
            Stage::Fresh => match texts(targets) {
                Ok(texts) => {
                    self.stage = Stage::Converted(sandbox.variables(texts));
                    None
                }
                Err(problem) => Some(Err(problem)),
            },
            Stage::Converted(targets) => judge.step_in(sandbox, judging, targets).map(Ok),
            Stage::Decided(_) => return Progress::Done,
        };
        match decided {
            Some(verdict) => {
                self.stage = Stage::Decided(verdict);
                Progress::Done
            }
            None => Progress::More,
        }
    }

    fn weight(&self) -> usize {
        match self.stage {
            Stage::Fresh => self.bytes,
            Stage::Converted(_) => self.bytes.saturating_mul(CONVERTED_FACTOR),
            Stage::Decided(_) => 0,
        }
    }

    fn returning(&self) -> bool {
        self.returning
    }

    fn finish(self: Box<Self>) {
        let Self {
            pending,
            stage,
            results,
            ..
        } = *self;
        if let Stage::Decided(verdict) = stage {
            results
                .send(CleanerOutcome::Judged {
                    pending: Box::new(pending),
                    verdict,
                })
                .ok();
        }
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        let token = self.key();
        let Pending { key, seq, .. } = self.pending;
        let results = self.results;
        Token::asking_again(self.namespace, token, move || {
            results.send(CleanerOutcome::Shed { key, seq }).ok();
        })
    }
}
