//! kube-retention's processes while the attacks run: whether the controller and the webhook
//! kept their pids, and the most memory each held — the controller's together with its CEL
//! evaluator processes', which are its children (one ended for an overrun takes its own peak
//! with it, so the children are sampled while they run).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_retention_e2e::components::{CONTROLLER, WEBHOOK};
use kube_retention_e2e::process::{Tracked, children, status_kib, tracked};
use nix::unistd::Pid;

use crate::support::TestNamespace;

/// The chart's memory limits: the controller's pod (itself and its evaluator process) and the
/// webhook's.
pub const CONTROLLER_LIMIT_KIB: u64 = 384 * 1024;
pub const WEBHOOK_LIMIT_KIB: u64 = 128 * 1024;

/// The most memory seen, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peaks {
    /// The most any evaluator process held (its `VmHWM`, read while it ran).
    pub evaluator_kib: u64,
    /// The most the controller and its evaluator processes held at one reading, together.
    pub together_kib: u64,
    /// Evaluator processes seen.
    pub evaluators: usize,
}

pub struct Watched {
    controller: (Tracked, Option<Pid>),
    webhook: (Tracked, Option<Pid>),
    peaks: Arc<Mutex<Peaks>>,
    sampler: tokio::task::JoinHandle<()>,
}

/// What the processes did meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    pub restarts: usize,
    /// The controller's own peak (`VmHWM`), and its peak with the evaluator's added.
    pub controller_kib: u64,
    pub controller_with_evaluator_kib: u64,
    pub webhook_kib: u64,
    pub peaks: Peaks,
}

impl Watched {
    pub fn start(ns: &TestNamespace) -> Self {
        let state_dir = &ns.env.cluster.layout.state_dir;
        let mut processes = tracked(state_dir, &[CONTROLLER, WEBHOOK]).into_iter();
        let mut now = || {
            let process = processes.next().expect("both are tracked");
            let pid = process.live_pid();
            (process, pid)
        };
        let controller = now();
        let webhook = now();
        let peaks = Arc::new(Mutex::new(Peaks::default()));
        let sampled = peaks.clone();
        let pid = controller.1.map(|pid| pid.as_raw().unsigned_abs());
        let sampler = tokio::spawn(async move {
            let Some(pid) = pid else { return };
            let mut seen = std::collections::HashSet::new();
            loop {
                let children = children(pid);
                let own = status_kib(pid, "VmRSS:").unwrap_or(0);
                let theirs: u64 = children
                    .iter()
                    .filter_map(|child| status_kib(*child, "VmRSS:"))
                    .sum();
                let most = children
                    .iter()
                    .filter_map(|child| status_kib(*child, "VmHWM:"))
                    .max()
                    .unwrap_or(0);
                seen.extend(children);
                if let Ok(mut peaks) = sampled.lock() {
                    peaks.evaluator_kib = peaks.evaluator_kib.max(most);
                    peaks.together_kib = peaks.together_kib.max(own + theirs);
                    peaks.evaluators = seen.len();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self {
            controller,
            webhook,
            peaks,
            sampler,
        }
    }

    /// Restarts since [`Watched::start`], and each one's peaks.
    pub fn held(&self) -> Held {
        let restarted = |(process, pid): &(Tracked, Option<Pid>)| {
            usize::from(pid.is_none() || process.live_pid() != *pid)
        };
        let peak = |(process, _): &(Tracked, Option<Pid>)| process.peak_rss_kib().unwrap_or(0);
        let peaks = self.peaks.lock().map(|peaks| *peaks).unwrap_or_default();
        let controller_kib = peak(&self.controller);
        Held {
            restarts: restarted(&self.controller) + restarted(&self.webhook),
            controller_kib,
            controller_with_evaluator_kib: controller_kib + peaks.evaluator_kib,
            webhook_kib: peak(&self.webhook),
            peaks,
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.sampler.abort();
    }
}
