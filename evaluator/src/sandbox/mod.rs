//! Tenants' expressions evaluated in a child process that the operating system bounds in
//! memory, CPU time and stack ([`limits`]), so that no expression — whatever the interpreter
//! does inside, whatever the cost model foretold — can take the controller with it. The meter
//! ([`kube_retention_common::cel::meter`]) still stops an evaluation at its cost and time
//! limits and says why, early and precisely; the process's bounds are the guarantee behind it.
//!
//! The [`Sandbox`] is the controller's side: an [`Interpreter`] whose values are bound in the
//! child ([`Handle`]: an object's JSON text, or a Cleaner's targets', sent once and bound there
//! until the handle is dropped) and whose expressions the child compiles again from their
//! source, once each. It runs on the evaluator's thread, one request at a time: an evaluation
//! is written with whatever the child still needs for it (the expression, the binding) in one
//! write, and its reply read by a wall-clock deadline. The child's CPU time for each step is
//! charged to the namespace whose work it was, like the thread's own ([`Sandbox::take_cpu`]).
//!
//! When the process ends in the middle of a step — past its memory, its CPU time for a step or
//! its stack, or killed for using no CPU for a whole deadline — only that step is lost: the sandbox starts another
//! process and runs the step again in it, alone. Ended again, the expression is to blame (its
//! own evaluation went past the bound in a process holding nothing else of note): it is
//! answered as an error naming the bound ([`Overrun`]), and not evaluated again by this
//! sandbox — a policy's or Cleaner's next generation compiles a new expression, which is. Past
//! the first time, a process that ended while others' values were bound in it blames nobody:
//! their bindings are sent again when next needed. A process stuck (no CPU used for a whole
//! deadline, [`Limits::wall`]) is ended and blames nobody either; one merely slow — it runs at
//! the lowest priority, and waits for a core on a busy node — is waited for. An object whose
//! conversion alone does not fit is answered as too large to evaluate.
//!
//! What the child holds is bounded by the sandbox: at most [`MAX_DEFINED`] expressions and
//! [`BOUND_BUDGET`] bytes of bound JSON text, the least recently used let go of first (and sent
//! again when needed).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube_retention_common::cel::{Answer, EvalError, Exceeded, Expression, Interpreter, Overrun};

pub mod child;
pub mod limits;
pub mod metrics;
pub mod process;
pub mod protocol;

pub use limits::Limits;
pub use metrics::SandboxMetrics;
pub use process::{Ending, Program};

use process::{Process, Silence};
use protocol::{MeterLimit, Outcome, Reply, Request};

/// The most expressions the child holds compiled at once.
pub const MAX_DEFINED: usize = 64;

/// The most JSON text bound in the child at once, in bytes (its CEL values take several times
/// that). A larger object is bound alone.
pub const BOUND_BUDGET: usize = 8 * 1024 * 1024;

/// The most expressions remembered as stopped.
pub const MAX_STOPPED: usize = 4096;

/// Values to bind in the child: named JSON texts.
#[derive(Debug)]
struct Payload {
    names: Vec<(String, usize)>,
    text: Vec<u8>,
}

/// Handles dropped and not yet released in the child.
type Releases = Arc<Mutex<Vec<u64>>>;

/// Values bound for evaluation in the child, once, and let go of there when dropped.
#[derive(Debug)]
pub struct Handle {
    id: u64,
    payload: Arc<Payload>,
    releases: Releases,
}

impl Handle {
    /// The JSON text it binds, in bytes.
    pub fn len(&self) -> usize {
        self.payload.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.payload.text.is_empty()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.releases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.id);
    }
}

/// The controller's side of the evaluator process.
pub struct Sandbox {
    program: Program,
    limits: Limits,
    process: Option<Process>,
    /// Expressions the process holds, least recently used first.
    defined: VecDeque<u64>,
    /// Handles bound in the process, least recently used first, with their text's length.
    bound: VecDeque<(u64, usize)>,
    bound_bytes: usize,
    /// Handles whose values do not fit in the process: answered at once.
    unbindable: HashMap<u64, Overrun>,
    /// Expressions that went past a bound, and which.
    stopped: HashMap<u64, Overrun>,
    stopped_order: VecDeque<u64>,
    releases: Releases,
    next_handle: u64,
    /// The process's CPU time not yet taken ([`Sandbox::take_cpu`]).
    cpu: Duration,
    /// The CPU time the current process's replies accounted for.
    reported: Duration,
    metrics: SandboxMetrics,
}

/// One attempt at a step, and how it went.
enum Attempt {
    Answered(Result<Answer, EvalError>),
    /// The process ended (or was ended) during the step.
    Ended(Fault),
}

/// A process that ended during a step: in which part of it, and how.
struct Fault {
    binding: bool,
    overrun: Option<Overrun>,
}

impl Sandbox {
    /// A sandbox that starts `program` held to `limits` when it first needs it.
    pub fn new(program: Program, limits: Limits, metrics: SandboxMetrics) -> Self {
        Self {
            program,
            limits,
            process: None,
            defined: VecDeque::new(),
            bound: VecDeque::new(),
            bound_bytes: 0,
            unbindable: HashMap::new(),
            stopped: HashMap::new(),
            stopped_order: VecDeque::new(),
            releases: Releases::default(),
            next_handle: 0,
            cpu: Duration::ZERO,
            reported: Duration::ZERO,
            metrics,
        }
    }

    /// `object`'s JSON text, to be bound as `object`.
    pub fn object(&mut self, text: Vec<u8>) -> Handle {
        let names = vec![(kube_retention_common::cel::VARIABLE.to_owned(), text.len())];
        self.handle(Payload { names, text })
    }

    /// Named JSON texts, to be bound as one set of variables.
    pub fn variables(&mut self, texts: Vec<(String, Vec<u8>)>) -> Handle {
        let mut names = Vec::with_capacity(texts.len());
        let mut joined = Vec::with_capacity(texts.iter().map(|(_, text)| text.len()).sum());
        for (name, text) in texts {
            names.push((name, text.len()));
            joined.extend_from_slice(&text);
        }
        self.handle(Payload {
            names,
            text: joined,
        })
    }

    fn handle(&mut self, payload: Payload) -> Handle {
        self.next_handle += 1;
        Handle {
            id: self.next_handle,
            payload: Arc::new(payload),
            releases: self.releases.clone(),
        }
    }

    /// The process's CPU time since this was last asked: what the steps since cost in it.
    pub fn take_cpu(&mut self) -> Duration {
        std::mem::take(&mut self.cpu)
    }

    /// The running process's id, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    /// The most address space the running process has had, in bytes.
    pub fn peak_address_space(&self) -> Option<u64> {
        self.process.as_ref().and_then(Process::peak_address_space)
    }

    /// Whether `expression` was stopped, and by which bound.
    pub fn stopped(&self, expression: &Expression) -> Option<Overrun> {
        self.stopped.get(&expression.id()).copied()
    }

    /// One attempt at evaluating `expression` on `on`.
    fn attempt(
        &mut self,
        expression: &Expression,
        on: &Handle,
        time: Option<(&str, Timestamp)>,
    ) -> Attempt {
        if let Err(error) = self.running() {
            let reason = format!("the evaluator process could not start: {error}");
            return Attempt::Answered(Err(EvalError::new(expression.source(), reason, None)));
        }
        let binding = !self.bound.iter().any(|(id, _)| *id == on.id);
        let sent = self.send(expression, on, time, binding);
        let wall = self.limits.wall;
        let mut bound = None;
        let replied = sent.and_then(|()| {
            let process = self.process.as_mut().ok_or(Silence::TimedOut)?;
            if binding {
                bound = Some(reply_while_working(process, wall)?);
            }
            reply_while_working(process, wall)
        });
        match replied {
            Ok(evaluated) => Attempt::Answered(self.answered(expression, on, bound, evaluated)),
            // Ended before the binding was answered: the binding's doing, else the evaluation's.
            Err(silence) => Attempt::Ended(self.ended(silence, binding && bound.is_none())),
        }
    }

    fn running(&mut self) -> std::io::Result<()> {
        if self.process.is_none() {
            self.process = Some(Process::start(&self.program, &self.limits)?);
            self.metrics.started.inc();
        }
        Ok(())
    }

    /// Writes what the step needs: releases of dropped handles, the expression and the binding
    /// where the process lacks them, and the evaluation.
    fn send(
        &mut self,
        expression: &Expression,
        on: &Handle,
        time: Option<(&str, Timestamp)>,
        binding: bool,
    ) -> Result<(), Silence> {
        let mut requests: Vec<(Request, Option<Arc<Payload>>)> = Vec::new();
        let dropped =
            std::mem::take(&mut *self.releases.lock().unwrap_or_else(PoisonError::into_inner));
        for handle in dropped {
            self.unbindable.remove(&handle);
            if let Some(place) = self.bound.iter().position(|(id, _)| *id == handle) {
                let (_, length) = self.bound.remove(place).unwrap_or_default();
                self.bound_bytes -= length;
                requests.push((Request::Release { handle }, None));
            }
        }
        match self.defined.iter().position(|id| *id == expression.id()) {
            Some(place) => {
                self.defined.remove(place);
            }
            None => {
                while self.defined.len() >= MAX_DEFINED {
                    if let Some(id) = self.defined.pop_front() {
                        requests.push((Request::Forget { id }, None));
                    }
                }
                requests.push((
                    Request::Define {
                        id: expression.id(),
                        source: expression.source().to_owned(),
                        expect: expression.expect(),
                        declared: expression.declared().to_vec(),
                    },
                    None,
                ));
            }
        }
        self.defined.push_back(expression.id());
        match self.bound.iter().position(|(id, _)| *id == on.id) {
            Some(place) => {
                let used = self.bound.remove(place).unwrap_or_default();
                self.bound.push_back(used);
            }
            None => {
                while !self.bound.is_empty() && self.bound_bytes + on.len() > BOUND_BUDGET {
                    if let Some((handle, length)) = self.bound.pop_front() {
                        self.bound_bytes -= length;
                        requests.push((Request::Release { handle }, None));
                    }
                }
                debug_assert!(binding);
                requests.push((
                    Request::Bind {
                        handle: on.id,
                        names: on.payload.names.clone(),
                    },
                    Some(on.payload.clone()),
                ));
                self.bound.push_back((on.id, on.len()));
                self.bound_bytes += on.len();
            }
        }
        requests.push((
            Request::Evaluate {
                handle: on.id,
                id: expression.id(),
                time: time.map(|(name, at)| (name.to_owned(), at)),
            },
            None,
        ));
        let process = self.process.as_mut().ok_or(Silence::TimedOut)?;
        for (request, payload) in &requests {
            let text = payload
                .as_ref()
                .map_or(&[][..], |payload| &payload.text[..]);
            process.send(request, text).map_err(Silence::Gone)?;
        }
        process.flush().map_err(Silence::Gone)
    }

    /// The step's replies, as its answer.
    fn answered(
        &mut self,
        expression: &Expression,
        on: &Handle,
        bound: Option<Reply>,
        evaluated: Reply,
    ) -> Result<Answer, EvalError> {
        let unexpected = |reply: &Reply| {
            EvalError::new(
                expression.source(),
                format!("the evaluator answered out of turn ({reply:?})"),
                None,
            )
        };
        if let Some(reply) = bound {
            match reply {
                Reply::Bound {
                    handle, cpu_nanos, ..
                } if handle == on.id => self.charge(cpu_nanos),
                other => {
                    self.restart();
                    return Err(unexpected(&other));
                }
            }
        }
        match evaluated {
            Reply::Evaluated {
                handle,
                id,
                outcome,
                cpu_nanos,
                ..
            } if handle == on.id && id == expression.id() => {
                self.charge(cpu_nanos);
                match outcome {
                    Outcome::Condition(holds) => Ok(Answer::Condition(holds)),
                    Outcome::Time(at) => Ok(Answer::Time(at)),
                    Outcome::Failed { reason, exceeded } => {
                        let exceeded = exceeded.map(|limit| match limit {
                            MeterLimit::Cost(limit) => Exceeded::Cost { limit },
                            MeterLimit::Time(nanos) => Exceeded::Time {
                                limit: Duration::from_nanos(nanos),
                            },
                        });
                        Err(EvalError::new(expression.source(), reason, exceeded))
                    }
                }
            }
            other => {
                self.restart();
                Err(unexpected(&other))
            }
        }
    }

    fn charge(&mut self, cpu_nanos: u64) {
        let cpu = Duration::from_nanos(cpu_nanos);
        self.cpu += cpu;
        self.reported += cpu;
    }

    /// The process ended during a step (or is ended now, `silence` saying why): what is known
    /// of how, for the step to be tried again or blamed.
    fn ended(&mut self, silence: Silence, binding: bool) -> Fault {
        let timed_out = matches!(silence, Silence::TimedOut);
        let Some(ending) = self.restart() else {
            return Fault {
                binding,
                overrun: None,
            };
        };
        let overrun = classify(&ending, timed_out, &self.limits);
        self.metrics.ended(overrun.as_ref(), timed_out, &ending);
        Fault { binding, overrun }
    }

    /// Ends the process, if one runs, charging the CPU time its replies did not account for,
    /// and forgets what it held.
    fn restart(&mut self) -> Option<Ending> {
        let process = self.process.take()?;
        let ending = process.end();
        self.cpu += ending.cpu.saturating_sub(self.reported);
        self.reported = Duration::ZERO;
        self.defined.clear();
        self.bound.clear();
        self.bound_bytes = 0;
        Some(ending)
    }

    /// After two ends in a row on the same step: what the step answers, and whom it stops.
    fn blame(&mut self, expression: &Expression, on: &Handle, fault: Fault) -> EvalError {
        let Some(overrun) = fault.overrun else {
            let reason = format!(
                "the evaluator process stopped answering (not within {:?}, or it ended on its \
                 own twice); tried again later",
                self.limits.wall
            );
            return EvalError::new(expression.source(), reason, None);
        };
        if fault.binding {
            self.unbindable.insert(on.id, overrun);
            return too_large(expression, overrun);
        }
        self.metrics.stopped.inc();
        if self.stopped_order.len() >= MAX_STOPPED
            && let Some(oldest) = self.stopped_order.pop_front()
        {
            self.stopped.remove(&oldest);
        }
        self.stopped.insert(expression.id(), overrun);
        self.stopped_order.push_back(expression.id());
        EvalError::overrun(expression.source(), overrun)
    }
}

/// The process's next reply, waited for as long as it works on it: a deadline of `wall` at a
/// time, extended while the process used CPU time since the last. It runs at the lowest
/// priority, so on a busy node it may wait long for a core; how long it may compute is its
/// CPU limit's to bound. One that used none for a whole `wall` is stuck, and is ended.
fn reply_while_working(process: &mut Process, wall: Duration) -> Result<Reply, Silence> {
    let mut used = process.cpu();
    loop {
        match process.reply(Instant::now() + wall) {
            Err(Silence::TimedOut) => {
                let now = process.cpu();
                if now.is_none() || now == used {
                    return Err(Silence::TimedOut);
                }
                used = now;
            }
            answered => return answered,
        }
    }
}

fn too_large(expression: &Expression, overrun: Overrun) -> EvalError {
    let reason = format!(
        "the values it judges could not be converted within the evaluator's bounds (converting \
         them {overrun}): too large to evaluate"
    );
    EvalError::new(expression.source(), reason, None)
}

/// Which bound a process that ended went past: `None` where it was not the step's doing (ended
/// for using no CPU for a whole deadline, or on its own to be replaced).
fn classify(ending: &Ending, timed_out: bool, limits: &Limits) -> Option<Overrun> {
    use nix::sys::signal::Signal;
    // Ended for using no CPU for a whole deadline: stuck, not past a bound of the step's.
    if timed_out {
        return None;
    }
    if ending.code == Some(i32::from(child::SPENT)) {
        return None;
    }
    let said = |words: &str| ending.last_words.iter().any(|line| line.contains(words));
    if said("memory allocation of") || said("out of memory") {
        return Some(Overrun::Memory {
            limit: limits.memory,
        });
    }
    if said("overflowed its stack") {
        return Some(Overrun::Stack {
            limit: limits::STACK_BYTES as u64,
        });
    }
    match ending.signal {
        Some(signal) if signal == Signal::SIGXCPU as i32 => Some(Overrun::Cpu {
            limit: Limits::step_cpu(),
        }),
        Some(signal) if signal == Signal::SIGSEGV as i32 || signal == Signal::SIGBUS as i32 => {
            Some(Overrun::Stack {
                limit: limits::STACK_BYTES as u64,
            })
        }
        Some(signal) => Some(Overrun::Ended { code: signal }),
        None => Some(Overrun::Ended {
            code: ending.code.unwrap_or(-1),
        }),
    }
}

impl Interpreter for Sandbox {
    type Bound = Handle;

    fn answer(
        &mut self,
        expression: &Expression,
        on: &Handle,
        time: Option<(&str, Timestamp)>,
    ) -> Result<Answer, EvalError> {
        if let Some(overrun) = self.stopped(expression) {
            return Err(EvalError::overrun(expression.source(), overrun));
        }
        if let Some(overrun) = self.unbindable.get(&on.id) {
            return Err(too_large(expression, *overrun));
        }
        // Ended once, the step runs again in a fresh process; ended again, it is to blame.
        let mut tried = false;
        loop {
            match self.attempt(expression, on, time) {
                Attempt::Answered(result) => return result,
                Attempt::Ended(_) if !tried => tried = true,
                Attempt::Ended(fault) => return Err(self.blame(expression, on, fault)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending(signal: Option<i32>, code: Option<i32>, words: &[&str]) -> Ending {
        Ending {
            signal,
            code,
            last_words: words.iter().map(|word| (*word).to_owned()).collect(),
            cpu: Duration::from_secs(1),
        }
    }

    #[test]
    fn how_a_process_ended_names_the_bound_it_went_past() {
        let limits = Limits::default();
        let memory = Overrun::Memory {
            limit: limits.memory,
        };
        let stack = Overrun::Stack {
            limit: limits::STACK_BYTES as u64,
        };
        let abort = Some(nix::sys::signal::Signal::SIGABRT as i32);
        for (ended, expected) in [
            (
                ending(abort, None, &["memory allocation of 1048576 bytes failed"]),
                Some(memory),
            ),
            (
                ending(abort, None, &["thread 'evaluate' has overflowed its stack"]),
                Some(stack),
            ),
            (
                ending(Some(nix::sys::signal::Signal::SIGXCPU as i32), None, &[]),
                Some(Overrun::Cpu {
                    limit: Limits::step_cpu(),
                }),
            ),
            (
                ending(Some(nix::sys::signal::Signal::SIGSEGV as i32), None, &[]),
                Some(stack),
            ),
            (ending(abort, None, &[]), Some(Overrun::Ended { code: 6 })),
            (ending(None, Some(1), &[]), Some(Overrun::Ended { code: 1 })),
            // Replaced because its life's CPU time was spent: no bound of the step's.
            (ending(None, Some(i32::from(child::SPENT)), &[]), None),
        ] {
            assert_eq!(classify(&ended, false, &limits), expected, "{ended:?}");
        }
        // Ended for using no CPU for a whole deadline: stuck, nobody's bound.
        let killed = ending(Some(9), None, &[]);
        assert_eq!(classify(&killed, true, &limits), None);
    }
}
