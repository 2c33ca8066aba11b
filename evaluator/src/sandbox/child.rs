//! The evaluator process: what `kube-retention-controller evaluate` runs, started by the
//! controller's [`super::Sandbox`]. It holds itself to its bounds first ([`super::limits`]),
//! says so, then reads requests on stdin and answers on stdout ([`super::protocol`]),
//! one at a time, on a thread whose stack covers the deepest admitted expression; it holds the
//! expressions it was given, compiled again from their source, and the values bound for them.
//! Before each bind or evaluation it sets its CPU limit to the second after the CPU time it has
//! used plus [`STEP_CPU_SECONDS`], so the operating system ends it (`SIGXCPU`) within two
//! seconds of CPU into any one step, whatever the meter inside foretold. It touches nothing but
//! its pipes: it opens no file and no socket.

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use cpu_time::{ProcessTime, ThreadTime};
use kube_retention_common::cel::{Answer, Exceeded, Expression, Variables};

use super::limits::{Limits, STACK_BYTES, STEP_CPU_SECONDS};
use super::protocol::{
    MAX_REQUEST, MeterLimit, Outcome, Reply, Request, cut, read_frame, write_frame,
};
use thread_priority::{ThreadPriority, set_current_thread_priority};

/// The exit status with which the process asks to be replaced: the CPU time its lifetime
/// allows is nearly spent.
pub const SPENT: u8 = 3;

/// The evaluator process's `main`, given its bounds: holds itself to them, says so, and serves
/// stdin and stdout on a thread of [`STACK_BYTES`] at the lowest priority.
pub fn main(limits: Limits) -> ExitCode {
    if let Err(error) = limits.apply() {
        eprintln!("kube-retention evaluator: setting its limits: {error}");
        return ExitCode::FAILURE;
    }
    let serving = std::thread::Builder::new()
        .name("evaluate".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            // Where the priority cannot be lowered (a seccomp profile refusing it), the bounds
            // still hold.
            set_current_thread_priority(ThreadPriority::Min).ok();
            let mut output = BufWriter::new(io::stdout().lock());
            answer(
                &mut output,
                &Reply::Ready {
                    memory: limits.memory,
                },
            )?;
            serve(io::stdin().lock(), output)
        });
    match serving.map(|thread| thread.join()) {
        Ok(Ok(Ok(()))) => ExitCode::SUCCESS,
        Ok(Ok(Err(Ended::Spent))) => ExitCode::from(SPENT),
        Ok(Ok(Err(Ended::Io(error)))) => {
            eprintln!("kube-retention evaluator: {error}");
            ExitCode::FAILURE
        }
        Ok(Err(_)) | Err(_) => ExitCode::FAILURE,
    }
}

/// The evaluator process's `main` from its command line: `--memory-bytes BYTES`, as
/// [`super::process::Process::start`] gives it.
pub fn main_from_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let memory = args
        .iter()
        .position(|arg| arg == super::process::MEMORY_ARG)
        .and_then(|at| args.get(at + 1))
        .and_then(|value| value.to_str())
        .and_then(|value| value.parse().ok());
    let Some(memory) = memory else {
        eprintln!(
            "kube-retention evaluator: give {} BYTES; it is started by the controller, not by hand",
            super::process::MEMORY_ARG
        );
        return ExitCode::from(2);
    };
    main(Limits {
        memory,
        ..Limits::default()
    })
}

/// Why serving ended before its input did.
#[derive(Debug)]
pub enum Ended {
    /// The lifetime's CPU time is nearly spent.
    Spent,
    Io(io::Error),
}

impl From<io::Error> for Ended {
    fn from(error: io::Error) -> Self {
        Ended::Io(error)
    }
}

/// Serves the requests on `input` until it ends, answering on `output`.
pub fn serve(input: impl Read, mut output: impl Write) -> Result<(), Ended> {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut expressions: HashMap<u64, Result<Expression, String>> = HashMap::new();
    let mut bound: HashMap<u64, Result<Variables, String>> = HashMap::new();
    let mut cpu = StepCpu::read()?;
    while let Some(frame) = read_frame::<Request>(&mut input, MAX_REQUEST)? {
        match frame.header {
            Request::Define {
                id,
                source,
                expect,
                declared,
            } => {
                let declared: Vec<&str> = declared.iter().map(String::as_str).collect();
                let compiled = Expression::compile_over(&source, expect, &declared)
                    .map_err(|error| format!("does not compile here: {error}"));
                expressions.insert(id, compiled);
            }
            Request::Forget { id } => {
                expressions.remove(&id);
            }
            Request::Release { handle } => {
                bound.remove(&handle);
            }
            Request::Bind { handle, names } => {
                cpu.arm()?;
                let started = ThreadTime::now();
                let result = bind(&names, &frame.payload);
                let error = result.as_ref().err().cloned().map(cut);
                bound.insert(handle, result);
                let cpu_nanos = nanos(started.elapsed());
                let reply = Reply::Bound {
                    handle,
                    error,
                    cpu_nanos,
                };
                answer(&mut output, &reply)?;
            }
            Request::Evaluate { handle, id, time } => {
                cpu.arm()?;
                let started = ThreadTime::now();
                let (outcome, spent) = evaluate(
                    expressions.get(&id),
                    bound.get(&handle),
                    time.as_ref().map(|(name, at)| (name.as_str(), *at)),
                );
                let reply = Reply::Evaluated {
                    handle,
                    id,
                    outcome,
                    spent,
                    cpu_nanos: nanos(started.elapsed()),
                };
                answer(&mut output, &reply)?;
            }
        }
    }
    Ok(())
}

fn answer(output: &mut impl Write, reply: &Reply) -> io::Result<()> {
    write_frame(output, reply, &[])?;
    output.flush()
}

/// The payload's texts bound by the names `names` gives them, each as long as it says.
fn bind(names: &[(String, usize)], payload: &[u8]) -> Result<Variables, String> {
    let mut rest = payload;
    let mut texts = Vec::with_capacity(names.len());
    for (name, length) in names {
        if *length > rest.len() {
            return Err(format!("`{name}` is cut short"));
        }
        let (text, after) = rest.split_at(*length);
        texts.push((name.as_str(), text));
        rest = after;
    }
    Variables::from_json(texts).map_err(|error| error.to_string())
}

fn evaluate(
    expression: Option<&Result<Expression, String>>,
    bound: Option<&Result<Variables, String>>,
    time: Option<(&str, jiff::Timestamp)>,
) -> (Outcome, u64) {
    let failed = |reason: String| Outcome::Failed {
        reason: cut(reason),
        exceeded: None,
    };
    let expression = match expression {
        Some(Ok(expression)) => expression,
        Some(Err(reason)) => return (failed(reason.clone()), 0),
        None => return (failed("was not given to the evaluator".into()), 0),
    };
    let variables = match bound {
        Some(Ok(variables)) => variables,
        Some(Err(reason)) => return (failed(reason.clone()), 0),
        None => return (failed("nothing is bound to evaluate it on".into()), 0),
    };
    let (result, spent) = expression.answer_within(Default::default(), variables, time);
    let outcome = match result {
        Ok(Answer::Condition(holds)) => Outcome::Condition(holds),
        Ok(Answer::Time(at)) => Outcome::Time(at),
        Err(error) => Outcome::Failed {
            reason: cut(error.reason().to_owned()),
            exceeded: error.exceeded().and_then(|exceeded| match exceeded {
                Exceeded::Cost { limit } => Some(MeterLimit::Cost(limit)),
                Exceeded::Time { limit } => Some(MeterLimit::Time(nanos(limit))),
                Exceeded::Process(_) => None,
            }),
        },
    };
    (outcome, spent)
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The CPU limit as this process set it last.
struct StepCpu {
    soft: u64,
    hard: u64,
}

impl StepCpu {
    fn read() -> Result<Self, Ended> {
        let (soft, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_CPU)
            .map_err(io_error)?;
        Ok(Self { soft, hard })
    }

    /// Sets the limit's soft bound to the whole second after what the process has used, plus
    /// [`STEP_CPU_SECONDS`]: `SIGXCPU` ends it if this step runs that long. Past the hard bound
    /// (the lifetime's), the process ends to be replaced.
    fn arm(&mut self) -> Result<(), Ended> {
        use nix::sys::resource::{Resource, setrlimit};
        let used = ProcessTime::try_now()
            .map(|now| now.as_duration())
            .map_err(Ended::Io)?;
        let soft = used.as_secs() + 1 + STEP_CPU_SECONDS;
        if soft > self.hard {
            return Err(Ended::Spent);
        }
        if soft != self.soft {
            setrlimit(Resource::RLIMIT_CPU, soft, self.hard).map_err(io_error)?;
            self.soft = soft;
        }
        Ok(())
    }
}

fn io_error(errno: nix::errno::Errno) -> Ended {
    Ended::Io(io::Error::from(errno))
}
