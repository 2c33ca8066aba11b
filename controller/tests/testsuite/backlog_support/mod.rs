//! Probe work for the evaluator's backlog tests (no CEL): works of a given number of steps and
//! weights, and the log of what became of each.

#![allow(clippy::unwrap_used, dead_code)] // test support; not every test uses every part

use std::sync::{Arc, Mutex};

use kube_retention_evaluator::{Backlog, Bounds, Progress, Work, WorkKey};

/// What happened to the probes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Step(String),
    Done(String),
    /// A shed probe's token asked for it again.
    Again(String),
    /// A probe or token dropped unfinished: superseded.
    Dropped(String),
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

/// A work of `steps` steps, holding `waiting` bytes before it starts and `working` after.
pub struct Probe {
    pub namespace: Arc<str>,
    pub name: String,
    pub steps: usize,
    pub taken: usize,
    pub waiting: usize,
    pub working: usize,
    pub log: Log,
    /// Finished, or shed into a token.
    pub ended: bool,
    /// Shed before and asked for again.
    pub returning: bool,
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.ended {
            self.log
                .lock()
                .unwrap()
                .push(Seen::Dropped(self.name.clone()));
        }
    }
}

pub fn probe(
    log: &Log,
    namespace: &str,
    name: &str,
    steps: usize,
    bytes: (usize, usize),
) -> Box<dyn Work> {
    Box::new(Probe {
        namespace: namespace.into(),
        name: name.into(),
        steps,
        taken: 0,
        waiting: bytes.0,
        working: bytes.1,
        log: log.clone(),
        ended: false,
        returning: false,
    })
}

impl Work for Probe {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Cleaner(self.name.as_str().into())
    }

    fn step(&mut self, _: &mut kube_retention_evaluator::Sandbox) -> Progress {
        self.taken += 1;
        self.log.lock().unwrap().push(Seen::Step(self.name.clone()));
        if self.taken >= self.steps {
            Progress::Done
        } else {
            Progress::More
        }
    }

    fn weight(&self) -> usize {
        if self.taken == 0 {
            self.waiting
        } else {
            self.working
        }
    }

    fn returning(&self) -> bool {
        self.returning
    }

    fn finish(mut self: Box<Self>) {
        self.ended = true;
        self.log.lock().unwrap().push(Seen::Done(self.name.clone()));
    }

    fn shed(mut self: Box<Self>) -> Box<dyn Work> {
        self.ended = true;
        Box::new(Token {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            log: self.log.clone(),
            ended: false,
        })
    }
}

/// A shed probe.
struct Token {
    namespace: Arc<str>,
    name: String,
    log: Log,
    ended: bool,
}

impl Drop for Token {
    fn drop(&mut self) {
        if !self.ended {
            self.log
                .lock()
                .unwrap()
                .push(Seen::Dropped(self.name.clone()));
        }
    }
}

impl Work for Token {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Cleaner(self.name.as_str().into())
    }

    fn step(&mut self, _: &mut kube_retention_evaluator::Sandbox) -> Progress {
        Progress::Done
    }

    fn weight(&self) -> usize {
        0
    }

    fn finish(mut self: Box<Self>) {
        self.ended = true;
        self.log
            .lock()
            .unwrap()
            .push(Seen::Again(self.name.clone()));
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        self
    }
}

/// Steps the backlog, every namespace ready, until it is empty; finishes what is done.
pub fn drain(backlog: &mut Backlog) {
    while let Some(turn) = backlog.step(|_| true, &mut crate::support::sandbox()) {
        if let Some(done) = turn.done {
            done.finish();
        }
    }
    assert!(backlog.is_empty());
}

pub fn roomy() -> Bounds {
    Bounds {
        namespace_bytes: usize::MAX,
        queued_bytes: usize::MAX,
        started_bytes: usize::MAX,
        returns: usize::MAX,
    }
}

pub fn steps_of(log: &Log) -> Vec<String> {
    let log = log.lock().unwrap();
    log.iter()
        .filter_map(|seen| match seen {
            Seen::Step(name) => Some(name.clone()),
            _ => None,
        })
        .collect()
}
