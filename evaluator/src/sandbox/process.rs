//! One evaluator process as the parent sees it: started from a [`Program`], its bounds passed
//! on its command line and confirmed by its first frame; requests written to its stdin, replies
//! read from its stdout by a deadline (`poll`), what it writes to stderr logged line by line;
//! and, once it ends or is ended, how: the signal or status, its last words, the CPU time it
//! used.

use std::ffi::OsString;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::resource::{UsageWho, getrusage};
use serde::Serialize;

use super::limits::Limits;
use super::protocol::{self, MAX_REPLY, Reply};

/// How to start an evaluator process: a binary that serves [`super::child`], and its arguments
/// before the bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub path: PathBuf,
    pub args: Vec<OsString>,
}

impl Program {
    /// This very binary with `args`: the controller runs its own hidden subcommand.
    pub fn this_binary(args: &[&str]) -> io::Result<Self> {
        Ok(Self {
            path: std::env::current_exe()?,
            args: args.iter().map(OsString::from).collect(),
        })
    }
}

/// The argument that carries the address-space bound to the process.
pub const MEMORY_ARG: &str = "--memory-bytes";

/// Why no reply came.
#[derive(Debug)]
pub enum Silence {
    /// None by the deadline.
    TimedOut,
    /// The process closed its stdout (it ended), or wrote something that is not a frame.
    Gone(io::Error),
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Its exit status, where it exited.
    pub code: Option<i32>,
    /// The last lines it wrote to stderr.
    pub last_words: Vec<String>,
    /// The CPU time it used in its life.
    pub cpu: Duration,
}

/// A running evaluator process.
pub struct Process {
    child: Child,
    input: BufWriter<ChildStdin>,
    output: ChildStdout,
    /// Bytes read from stdout and not yet taken as frames.
    buffer: Vec<u8>,
    /// The last lines on its stderr, once it closed it.
    last_words: mpsc::Receiver<Vec<String>>,
    /// The children's CPU time (`RUSAGE_CHILDREN`) before this one was reaped.
    children_cpu: Duration,
}

/// The kernel's ticks a second in what it reports to user space (`USER_HZ`: 100 on every Linux
/// architecture this is built for).
const USER_HZ: u64 = 100;

/// How many of its last lines on stderr are kept to tell how it ended.
const LAST_WORDS: usize = 4;

impl Process {
    /// Starts `program` held to `limits`, and waits up to `limits.wall` for its first frame.
    pub fn start(program: &Program, limits: &Limits) -> io::Result<Self> {
        let mut child = Command::new(&program.path)
            .args(&program.args)
            .arg(MEMORY_ARG)
            .arg(limits.memory.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_clear()
            // glibc's allocator reserves 64 MiB of address space for each thread's arena (a
            // build on musl, as the image's, has none): one arena keeps the bound about what is
            // used, not what is reserved.
            .env("MALLOC_ARENA_MAX", "1")
            .spawn()?;
        let taken = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(input), Some(output), Some(stderr)) = taken else {
            child.kill().ok();
            child.wait().ok();
            return Err(io::Error::other("the evaluator's pipes were not made"));
        };
        let (lines, said) = mpsc::channel();
        let pid = child.id();
        std::thread::Builder::new()
            .name("evaluator-stderr".into())
            .spawn(move || relay(stderr, pid, &lines))?;
        let mut process = Self {
            child,
            input: BufWriter::with_capacity(64 * 1024, input),
            output,
            buffer: Vec::new(),
            last_words: said,
            children_cpu: children_cpu(),
        };
        match process.reply(Instant::now() + limits.wall) {
            Ok(Reply::Ready { memory }) if memory == limits.memory => Ok(process),
            answered => {
                let ending = process.end();
                Err(io::Error::other(format!(
                    "the evaluator did not start as asked ({answered:?}; it ended with {ending:?})"
                )))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The most address space it has had (`VmPeak`), in bytes: what its memory bound is held
    /// against.
    pub fn peak_address_space(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmPeak:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(kib.saturating_mul(1024))
    }

    /// The CPU time it has used so far, as the kernel counts it (`/proc/PID/stat`, in the
    /// kernel's ticks of 10 ms); `None` where that cannot be read.
    pub fn cpu(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // The fields after the command's name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat
            .get(stat.rfind(')')? + 2..)?
            .split_whitespace()
            .collect();
        let ticks = |field: usize| fields.get(field)?.parse::<u64>().ok();
        // utime and stime, the 14th and 15th fields of the line.
        let total = ticks(11)?.saturating_add(ticks(12)?);
        Some(Duration::from_millis(total.saturating_mul(1000 / USER_HZ)))
    }

    /// Writes a request (buffered until [`Process::flush`]).
    pub fn send(&mut self, request: &impl Serialize, payload: &[u8]) -> io::Result<()> {
        protocol::write_frame(&mut self.input, request, payload)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.input.flush()
    }

    /// The next reply, waiting until `deadline` at most.
    pub fn reply(&mut self, deadline: Instant) -> Result<Reply, Silence> {
        loop {
            if let Some(reply) = self.take_frame().map_err(Silence::Gone)? {
                return Ok(reply);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Silence::TimedOut);
            }
            let timeout = PollTimeout::try_from(left.max(Duration::from_millis(1)))
                .unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.output.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(errno) => return Err(Silence::Gone(errno.into())),
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.output.read(&mut chunk) {
                Ok(0) => {
                    return Err(Silence::Gone(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the evaluator closed its output",
                    )));
                }
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(Silence::Gone(error)),
            }
        }
    }

    /// A whole frame from the buffer, if one is there.
    fn take_frame(&mut self) -> io::Result<Option<Reply>> {
        let Some(lengths) = self.buffer.first_chunk::<8>() else {
            return Ok(None);
        };
        let (total, header) = protocol::frame_lengths(*lengths, MAX_REPLY)?;
        if self.buffer.len() < 8 + total {
            return Ok(None);
        }
        let bytes: Vec<u8> = self.buffer.drain(..8 + total).skip(8).collect();
        protocol::decode(bytes, header).map(|frame| Some(frame.header))
    }

    /// Ends the process (if it has not ended) and tells how it ended.
    pub fn end(mut self) -> Ending {
        // Already ended, most often: then the kill finds nothing to do.
        self.child.kill().ok();
        let status = self.child.wait();
        let cpu = children_cpu().saturating_sub(self.children_cpu);
        // The relay ends with the process's stderr; wait a moment for it.
        let last_words = self
            .last_words
            .recv_timeout(Duration::from_secs(1))
            .unwrap_or_default();
        let (signal, code) = match status {
            Ok(status) => (status.signal(), status.code()),
            Err(_) => (None, None),
        };
        Ending {
            signal,
            code,
            last_words,
            cpu,
        }
    }
}

/// The CPU time of the children this process has reaped.
fn children_cpu() -> Duration {
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or(Duration::ZERO, |usage| {
        let time = |value: nix::sys::time::TimeVal| {
            Duration::new(
                u64::try_from(value.tv_sec()).unwrap_or(0),
                u32::try_from(value.tv_usec()).unwrap_or(0) * 1_000,
            )
        };
        time(usage.user_time()) + time(usage.system_time())
    })
}

/// Logs each line the process writes to stderr, keeping the last [`LAST_WORDS`], which it
/// hands to `last_words` once the process closes its stderr.
fn relay(mut stderr: impl Read, pid: u32, last_words: &mpsc::Sender<Vec<String>>) {
    let mut kept = std::collections::VecDeque::with_capacity(LAST_WORDS + 1);
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut keep = |line: &mut Vec<u8>| {
        let text = protocol::cut(String::from_utf8_lossy(line).into_owned());
        line.clear();
        tracing::warn!(pid, "{text}");
        kept.push_back(text);
        if kept.len() > LAST_WORDS {
            kept.pop_front();
        }
    };
    loop {
        let read = match stderr.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        for byte in &chunk[..read] {
            match byte {
                b'\n' => keep(&mut line),
                // A line is cut, not held whole, however long.
                _ if line.len() < protocol::MAX_REASON => line.push(*byte),
                _ => {}
            }
        }
    }
    if !line.is_empty() {
        keep(&mut line);
    }
    last_words.send(kept.into()).ok();
}
