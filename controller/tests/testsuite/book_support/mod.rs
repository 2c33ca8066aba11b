//! The Cleaners' book evaluated without the loop: a spec compiled and its conditions judged at
//! once, through the same [`CleanerWork`] the evaluator steps, each step taken here.

use jiff::Timestamp;
use kube_retention_cleaners::book::{Book, CleanerKey, Evaluation, Prepared};
use kube_retention_cleaners::judging::{CleanerOutcome, CleanerWork};
use kube_retention_evaluator::{Progress, Work};
use tokio::sync::mpsc;

/// Evaluates the Cleaner `key` at `now`; `None` when it is gone (or its kinds not known).
pub fn evaluate(book: &mut Book, key: &CleanerKey, now: Timestamp) -> Option<Evaluation> {
    loop {
        match book.prepare(key, now)? {
            Prepared::Decided(evaluation) => return Some(evaluation),
            Prepared::Compile(request) => {
                book.keep_compiled(key, request.seq, request.compile());
            }
            Prepared::Conditions(pending) => {
                let (results, mut judged) = mpsc::unbounded_channel();
                let mut work: Box<dyn Work> = Box::new(CleanerWork::new(pending, results));
                let mut sandbox = crate::support::sandbox();
                while work.step(&mut sandbox) == Progress::More {}
                work.finish();
                let Ok(CleanerOutcome::Judged { pending, verdict }) = judged.try_recv() else {
                    panic!("a judged work sends its verdict");
                };
                return book.conclude(*pending, verdict, now);
            }
        }
    }
}
