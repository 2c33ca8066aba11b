//! Background processes that outlive the command that started them: each one is tracked by a pid
//! file and writes to its own log, so `make down` can stop exactly what `make up` started.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A process started by [`spawn`], identified by the pid file it wrote.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub name: String,
    pub pid_file: PathBuf,
}

/// Starts `command` in its own process group (so a terminal's Ctrl-C or the starter exiting
/// doesn't reach it), with output appended to `logs/<name>.log` and its pid in `pids/<name>.pid`.
pub fn spawn(state_dir: &Path, name: &str, command: &mut Command) -> Result<Tracked> {
    let program = command.get_program().to_string_lossy().into_owned();
    spawn_exec(state_dir, name, command, &program)
}

/// Where the process tracked as `name` in `state_dir` writes its output: `logs/NAME.log`.
pub fn log_path(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join("logs").join(format!("{name}.log"))
}

/// Like [`spawn`], for a `command` that execs `program` (`nsenter`): the process is tracked as
/// `program`, the command line it has once the exec is done.
pub fn spawn_exec(
    state_dir: &Path,
    name: &str,
    command: &mut Command,
    program: &str,
) -> Result<Tracked> {
    use std::os::unix::process::CommandExt;

    let log_path = log_path(state_dir, name);
    let pid_dir = state_dir.join("pids");
    fs::create_dir_all(log_path.parent().context("log path has a parent")?)?;
    fs::create_dir_all(&pid_dir)?;
    let log = File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {name} ({:?})", command.get_program()))?;
    let pid_file = pid_dir.join(format!("{name}.pid"));
    // The program path goes in too, so a recycled pid is never mistaken for ours.
    fs::write(&pid_file, format!("{}\n{program}\n", child.id()))?;
    Ok(Tracked {
        name: name.to_owned(),
        pid_file,
    })
}

impl Tracked {
    /// Where the process's output goes: [`log_path`] of the state folder its pid file is in.
    pub fn log_path(&self) -> Option<PathBuf> {
        let state_dir = self.pid_file.parent()?.parent()?;
        Some(log_path(state_dir, &self.name))
    }

    /// The tracked process's pid, if its pid file names a live process that is still the program
    /// it started (a recycled pid after a crash or reboot is not ours).
    pub fn live_pid(&self) -> Option<Pid> {
        let recorded = fs::read_to_string(&self.pid_file).ok()?;
        let mut lines = recorded.lines();
        let pid: i32 = lines.next()?.trim().parse().ok()?;
        let program = lines.next()?;
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let ours = cmdline.split(|byte| *byte == 0).next()? == program.as_bytes();
        // Zombies keep their cmdline readable; treat them as gone.
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'));
        (ours && !zombie).then_some(Pid::from_raw(pid))
    }

    /// The most memory the running process has held, in KiB (`VmHWM`: its resident set's
    /// high-water mark since it started), if it runs.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let pid = u32::try_from(self.live_pid()?.as_raw()).ok()?;
        status_kib(pid, "VmHWM:")
    }

    /// SIGKILLs the running process and waits until it is gone (at most 5 s); an error if it
    /// was not running or survives.
    pub fn kill(&self) -> Result<()> {
        let pid = self
            .live_pid()
            .with_context(|| format!("{} is not running", self.name))?;
        kill(pid, Signal::SIGKILL)?;
        let deadline = Instant::now() + Duration::from_secs(5);
        // Gone once a zombie whose every thread has exited: a zombie leader's other threads may
        // still be tearing down, holding its sockets (a port rebound at once was found taken),
        // and the leader's own fd list is empty by then, so its threads are what to wait for.
        let leader = pid.to_string();
        let threads_left = || {
            fs::read_dir(format!("/proc/{pid}/task"))
                .map(|tasks| {
                    tasks
                        .filter_map(Result::ok)
                        .any(|task| task.file_name().to_str() != Some(leader.as_str()))
                })
                .unwrap_or(false)
        };
        let holds_files = || {
            fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|mut files| files.next().is_some())
                .unwrap_or(false)
        };
        while self.live_pid().is_some() || threads_left() || holds_files() {
            if Instant::now() > deadline {
                bail!("{} (pid {pid}) survived SIGKILL", self.name);
            }
            sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Stops the process: SIGTERM, then SIGKILL after `grace`. Removes the pid file either way.
    pub fn stop(&self, grace: Duration) -> Result<bool> {
        let stopped = match self.live_pid() {
            Some(pid) => {
                kill(pid, Signal::SIGTERM).ok();
                let deadline = Instant::now() + grace;
                while self.live_pid().is_some() && Instant::now() < deadline {
                    sleep(Duration::from_millis(50));
                }
                if self.live_pid().is_some() {
                    self.kill()?;
                }
                true
            }
            None => false,
        };
        fs::remove_file(&self.pid_file).ok();
        Ok(stopped)
    }
}

/// Stops the processes `names` under `state_dir` in that order ([`Tracked::stop`] with 10 s of
/// grace); answers the names of those that were running.
pub fn stop_all(state_dir: &Path, names: &[&str]) -> Result<Vec<String>> {
    let mut stopped = Vec::new();
    for tracked in tracked(state_dir, names) {
        if tracked.stop(Duration::from_secs(10))? {
            stopped.push(tracked.name);
        }
    }
    Ok(stopped)
}

/// Every process with a pid file under `state_dir`, in the order given by `names`.
pub fn tracked(state_dir: &Path, names: &[&str]) -> Vec<Tracked> {
    names
        .iter()
        .map(|name| Tracked {
            name: (*name).to_owned(),
            pid_file: state_dir.join("pids").join(format!("{name}.pid")),
        })
        .collect()
}

/// One `Name:   value kB` field of a process's `/proc/PID/status` (`VmRSS:`, `VmHWM:`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A process's children (the controller's: its CEL evaluator process).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}
