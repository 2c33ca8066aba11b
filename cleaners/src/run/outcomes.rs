//! An evaluation and what follows it: prepared by the book, its conditions judged on the
//! evaluator's thread; then the status written (and a Warning Event when it newly says
//! Ready=False), and for a group whose conditions hold, the clean in its own task; then the
//! clean's outcome (a Warning Event naming what of a Helm release it left, and why, before the
//! Cleaner deletes itself).

use jiff::Timestamp;
use kube::runtime::events::EventType;
use kube_retention_common::cleaner::{Verdict, helm};

use super::Cleaners;
use crate::act::{self, Cleaned};
use crate::book::{Clean, CleanerKey, CompileRequest, CompiledSpec, Evaluation, Prepared};
use crate::compile::cleaner_compile;
use crate::judging::{CleanerOutcome, CleanerWork};
use crate::metrics::OutcomeLabels;
use crate::status::{self, Problem, Resolved};

/// The reason of the Warning Event naming what of a Helm release a clean left, and why.
pub const HELM_SKIPPED: &str = "HelmObjectsSkipped";

/// "kept 1 object(s) the records of Helm release web list, which Helm does not give to it: …"
fn skipped_note(clean: &Clean, skipped: &[String]) -> String {
    let release = clean.release.as_deref().unwrap_or_default();
    format!(
        "kept {} object(s) the records of Helm release {release} list, which Helm's annotations \
         do not give to it (a Cleaner deletes only objects annotated {}={release} and {}={}): {}",
        skipped.len(),
        helm::RELEASE_NAME,
        helm::RELEASE_NAMESPACE,
        clean.cleaner.namespace,
        skipped.join("; ")
    )
}

impl Cleaners {
    pub(super) async fn evaluate(&mut self, key: &CleanerKey, now: Timestamp) {
        self.evaluate_as(key, now, false).await;
    }

    /// Evaluates `key`; `returning`: it was shed, and is asked for again at its turn.
    async fn evaluate_as(&mut self, key: &CleanerKey, now: Timestamp, returning: bool) {
        let prepared = self.book.prepare(key, now);
        if returning && !matches!(prepared, Some(Prepared::Conditions(_))) {
            self.evaluator.nothing_returned();
        }
        match prepared {
            None => {}
            Some(Prepared::Compile(request)) => self.compile(request, false),
            Some(Prepared::Decided(evaluation)) => self.evaluated(key, evaluation, now).await,
            Some(Prepared::Conditions(pending)) => {
                let work = CleanerWork::new(pending, self.judged.0.clone()).returning(returning);
                if !self.evaluator.submit(Box::new(work)) {
                    tracing::error!(cleaner = %key, "the CEL evaluator's thread has ended; Cleaners' conditions are no longer judged");
                }
            }
        }
    }

    /// Asks the evaluator for `request`'s judge; `returning`: it was shed, and is asked for
    /// again at its turn.
    fn compile(&mut self, request: CompileRequest, returning: bool) {
        let key = request.key.clone();
        let work = cleaner_compile(request, self.judged.0.clone(), returning);
        if !self.evaluator.submit(Box::new(work)) {
            tracing::error!(cleaner = %key, "the CEL evaluator's thread has ended; Cleaners' conditions are no longer compiled");
        }
    }

    /// A spec's judge, kept where still the latest (the Cleaner is evaluated next), or word
    /// that the evaluator let go of the request (asked for again while leading).
    fn on_compiled(&mut self, key: CleanerKey, seq: u64, judge: Option<CompiledSpec>) {
        match judge {
            Some(judge) => self.book.compiled(&key, seq, judge),
            None => match self.book.compile_again(&key, seq).filter(|_| self.leading) {
                Some(request) => self.compile(request, true),
                None => {
                    self.book.compile_abandoned(&key, seq);
                    self.evaluator.nothing_returned();
                }
            },
        }
    }

    /// The evaluator's verdict on a Cleaner's conditions or its judge, or word that it shed
    /// the evaluation (prepared again at once, if still the latest).
    pub(super) async fn on_judged(&mut self, outcome: CleanerOutcome) {
        match outcome {
            CleanerOutcome::Compiled { key, seq, judge } => self.on_compiled(key, seq, judge),
            CleanerOutcome::Judged { pending, verdict } if self.leading => {
                let now = self.cleaning.clock.now();
                let key = pending.key.clone();
                if let Some(evaluation) = self.book.conclude(*pending, verdict, now) {
                    self.evaluated(&key, evaluation, now).await;
                }
            }
            // Judged for a leader this replica no longer is: evaluated again if it leads again.
            CleanerOutcome::Judged { pending, .. } => self.book.abandon(&pending.key, pending.seq),
            CleanerOutcome::Shed { key, seq }
                if self.leading && self.book.evaluating(&key, seq) =>
            {
                self.evaluate_as(&key, self.cleaning.clock.now(), true)
                    .await;
            }
            CleanerOutcome::Shed { key, seq } => {
                self.book.abandon(&key, seq);
                self.evaluator.nothing_returned();
            }
        }
    }

    async fn evaluated(&mut self, key: &CleanerKey, evaluation: Evaluation, now: Timestamp) {
        let outcome = match &evaluation.verdict {
            Ok(Verdict::TooEarly { .. }) => "too_early",
            Ok(Verdict::Wait { .. }) => "waiting",
            Ok(Verdict::Clean) => "clean",
            Ok(Verdict::Failed { .. }) => "cel_error",
            Err(_) => "problem",
        };
        let metrics = &self.cleaning.metrics;
        metrics
            .evaluations
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
        if outcome == "cel_error" {
            metrics.cel_errors.inc();
        }
        tracing::debug!(cleaner = %key, outcome, "evaluated");
        self.report(
            key,
            &evaluation.verdict,
            Resolved::all(evaluation.resolved),
            now,
        )
        .await;
        if let Some(clean) = evaluation.clean {
            self.cleans.submit(clean);
            self.start_cleans();
        }
    }

    /// Starts the cleans waiting that have a place, each in a task of its own.
    pub(super) fn start_cleans(&mut self) {
        while let Some(clean) = self.cleans.start_next() {
            let (cleaning, finished) = (self.cleaning.clone(), self.finished.0.clone());
            tokio::spawn(async move {
                let outcome = act::clean(cleaning, clean.clone()).await;
                finished.send((clean, outcome)).ok();
            });
        }
    }

    /// This replica stopped leading: the cleans waiting start on the new leader instead, and are
    /// tried here again only if this one leads again.
    pub(super) fn give_up_waiting_cleans(&mut self) {
        let now = self.cleaning.clock.now();
        for clean in self.cleans.drain_waiting() {
            self.book.clean_done(&clean.cleaner, false, now);
        }
    }

    /// A clean ended: announced and the Cleaner gone, or Ready=False and evaluated again soon.
    pub(super) async fn finish(&mut self, clean: Clean, outcome: Result<Cleaned, Problem>) {
        self.cleans.ended(&clean.cleaner.namespace);
        if self.leading {
            self.start_cleans();
        }
        let now = self.cleaning.clock.now();
        let reference = act::reference(&clean);
        match outcome {
            Ok(cleaned) => {
                let release = cleaned
                    .release
                    .as_ref()
                    .map(|name| format!(" and Helm release {name}"));
                let note = format!(
                    "deleted {} object(s){}: {}",
                    cleaned.deleted.len(),
                    release.unwrap_or_default(),
                    cleaned.deleted.join(", ")
                );
                tracing::info!(cleaner = %clean.cleaner, %note, "cleaned");
                act::record(
                    &self.cleaning,
                    &reference,
                    EventType::Normal,
                    "Cleaned",
                    note,
                )
                .await;
                if !cleaned.skipped.is_empty() {
                    let note = skipped_note(&clean, &cleaned.skipped);
                    tracing::warn!(cleaner = %clean.cleaner, %note, "Helm release objects kept");
                    let warning = EventType::Warning;
                    act::record(&self.cleaning, &reference, warning, HELM_SKIPPED, note).await;
                }
                act::announce(self.cleaning.clone(), &clean, &cleaned);
                self.book.clean_done(&clean.cleaner, true, now);
                if let Err(error) = act::retire(&self.cleaning, &clean).await {
                    tracing::warn!(cleaner = %clean.cleaner, %error, "could not delete the Cleaner");
                    let note = format!(
                        "the group is cleaned, but the Cleaner could not delete itself: {error}"
                    );
                    let warning = EventType::Warning;
                    act::record(&self.cleaning, &reference, warning, "RetireFailed", note).await;
                }
            }
            Err(problem @ Problem::AwaitingApproval { .. }) => {
                tracing::warn!(cleaner = %clean.cleaner, %problem, "clean held by the blast-radius guard");
                self.book.clean_awaits_approval(&clean.cleaner);
                let resolved = self.written.get(&clean.cleaner).map(Resolved::written);
                let held = Err(problem);
                self.report(&clean.cleaner, &held, resolved.unwrap_or_default(), now)
                    .await;
            }
            Err(problem) => {
                tracing::warn!(cleaner = %clean.cleaner, %problem, "clean failed");
                self.book.clean_done(&clean.cleaner, false, now);
                let resolved = self.written.get(&clean.cleaner).map(Resolved::written);
                self.report(
                    &clean.cleaner,
                    &Err(problem),
                    resolved.unwrap_or_default(),
                    now,
                )
                .await;
            }
        }
    }

    /// Hands the status to the status writer when it changed, with a Warning Event when it newly
    /// says Ready=False.
    async fn report(
        &mut self,
        key: &CleanerKey,
        verdict: &Result<Verdict, Problem>,
        resolved: Resolved,
        now: Timestamp,
    ) {
        let Some((uid, spec)) = self.book.identity(key) else {
            return;
        };
        let previous = self.written.get(key);
        let next = self.book.next_of(key);
        let generation = self.book.generation_of(key);
        let status = status::status(spec, generation, verdict, resolved, next, previous, now);
        if previous == Some(&status) {
            return;
        }
        match serde_json::to_value(&status) {
            Ok(value) => self.statuses.write(super::status_of(key), value),
            Err(error) => {
                tracing::warn!(cleaner = %key, %error, "could not write the Cleaner's status");
                return;
            }
        }
        let not_ready = status
            .conditions
            .iter()
            .find(|condition| condition.type_ == "Ready" && condition.status == "False");
        let was_same = previous
            .and_then(|old| {
                old.conditions
                    .iter()
                    .find(|condition| condition.type_ == "Ready")
            })
            .map(|old| (&old.status, &old.message))
            == not_ready.map(|new| (&new.status, &new.message));
        if let Some(condition) = not_ready.filter(|_| !was_same) {
            let clean = Clean {
                cleaner: key.clone(),
                uid,
                generation: None,
                approved: false,
                objects: Vec::new(),
                release: None,
                sink: None,
            };
            let note = condition.message.clone();
            act::record(
                &self.cleaning,
                &act::reference(&clean),
                EventType::Warning,
                &condition.reason,
                note,
            )
            .await;
        }
        self.written.insert(key.clone(), status);
    }
}
