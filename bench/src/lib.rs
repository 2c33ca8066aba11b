//! Shared by the benchmark binaries: open-loop HTTPS load at a fixed rate with latency measured
//! from each request's scheduled start (so a slow server cannot hide queueing), the two deleters
//! and the Jobs of the controller benchmark, process memory readings, and the markdown report in
//! docs/benchmarks/.

pub mod cel_copies;
pub mod cel_sandbox;
pub mod deleters;
pub mod deletion;
pub mod differential;
pub mod discovery;
pub mod envelope;
pub mod idle;
pub mod jobs;
pub mod kubeconfigs;
pub mod kyverno;
pub mod ledger_sink;
pub mod load;
pub mod memcpy;
pub mod memory;
pub mod policies;
pub mod report;
pub mod restart;
pub mod safety;
pub mod side_by_side;
pub mod webhook;
pub mod writers;

/// Fields of a process's /proc status, in KiB, in the order of `names` (e.g. `"VmHWM:"`).
fn status_kib<const N: usize>(pid: u32, names: [&str; N]) -> Option<[u64; N]> {
    kib_fields(&format!("/proc/{pid}/status"), names)
}

/// Fields of a /proc file of `Name:   value kB` lines (a process's status, meminfo), in KiB.
fn kib_fields<const N: usize>(path: &str, names: [&str; N]) -> Option<[u64; N]> {
    let text = std::fs::read_to_string(path).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let mut values = [0; N];
    for (value, name) in values.iter_mut().zip(names) {
        *value = field(name)?;
    }
    Some(values)
}

/// Whether the kernel's log (`dmesg`; false if it cannot be read) says its OOM killer killed
/// `pid`.
pub fn killed_for_memory(pid: u32) -> bool {
    std::process::Command::new("dmesg")
        .output()
        .is_ok_and(|log| names_an_oom_kill(&String::from_utf8_lossy(&log.stdout), pid))
}

/// How the child `pid` of this process ended, while it is a zombie not yet waited for (this
/// benchmark never waits for its deleters): the exit code field of `/proc/PID/stat`.
pub fn exit_status(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    exit_of_stat(&stat)
}

/// The exit status in a zombie's `/proc/PID/stat` (its 52nd field, as `waitpid` reports it).
fn exit_of_stat(stat: &str) -> Option<String> {
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Fields counted from 1, the first two (pid, comm) before the ')'.
    if fields.first() != Some(&"Z") {
        return None;
    }
    let status: i32 = fields.get(52 - 3)?.parse().ok()?;
    Some(match status & 0x7f {
        0 => format!("exit status {}", (status >> 8) & 0xff),
        signal => format!("killed by signal {signal}"),
    })
}

/// Whether the kernel log `log` reports `pid` killed for want of memory (the OOM killer's line
/// is "Out of memory: Killed process PID (name) …", or "Memory cgroup out of memory: …").
fn names_an_oom_kill(log: &str, pid: u32) -> bool {
    let killed = format!("Killed process {pid} (");
    log.lines()
        .any(|line| line.to_ascii_lowercase().contains("out of memory") && line.contains(&killed))
}

/// The machine's available memory in KiB (MemAvailable: free, and reclaimable without swap).
pub fn available_memory_kib() -> Option<u64> {
    let [available] = kib_fields("/proc/meminfo", ["MemAvailable:"])?;
    Some(available)
}

/// Peak and current resident set size of a process, in KiB, from /proc.
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let [peak, current] = status_kib(pid, ["VmHWM:", "VmRSS:"])?;
    Some((peak, current))
}

/// The peak resident memory of a process and of its children now running, added up, in KiB:
/// what a container holding them would have needed at most (their peaks may not have been at
/// the same moment, so the sum bounds theirs together from above).
pub fn peak_rss_with_children_kib(pid: u32) -> Option<u64> {
    let (own, _) = rss_kib(pid)?;
    let children: u64 = kube_retention_e2e::process::children(pid)
        .into_iter()
        .filter_map(|child| rss_kib(child).map(|(peak, _)| peak))
        .sum();
    Some(own + children)
}

/// A process's current resident memory in KiB, split into anonymous pages (heap, stacks) and
/// pages of mapped files (mostly its own executable's).
pub fn rss_split_kib(pid: u32) -> Option<(u64, u64)> {
    let [anonymous, file] = status_kib(pid, ["RssAnon:", "RssFile:"])?;
    Some((anonymous, file))
}

/// The CPU time a process has used so far, user and system, in seconds (from /proc, whose
/// clock ticks are 1/100 s on Linux whatever the kernel's own tick).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's closing parenthesis: state is the first, utime the 12th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |index: usize| fields.get(index)?.parse::<u64>().ok();
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// The pid of the local cluster's process `name` (`kube-apiserver`, `etcd`), while it runs.
pub fn pid_of(cluster: &kube_retention_e2e::LocalCluster, name: &str) -> Option<u32> {
    live_pid(kube_retention_e2e::process::tracked(&cluster.layout.state_dir, &[name]).first()?)
}

/// The pid of `process`, while it runs, as /proc names it.
pub fn live_pid(process: &kube_retention_e2e::process::Tracked) -> Option<u32> {
    process.live_pid().map(|pid| pid.as_raw().unsigned_abs())
}

/// KiB (as /proc reports memory) in MiB.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Creates the namespace `name`.
pub async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(name.to_owned());
    namespaces
        .create(&kube::api::PostParams::default(), &namespace)
        .await?;
    Ok(())
}

/// A free port on 127.0.0.1 for a deleter's metrics.
pub fn metrics_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Deletes the namespace `name` and waits until it is gone, so a part's objects do not weigh on
/// the parts after it.
pub fn remove_namespace(
    cluster: &kube_retention_e2e::LocalCluster,
    name: &str,
) -> anyhow::Result<()> {
    kube_retention_e2e::run(cluster.kubectl().args([
        "delete",
        "namespace",
        name,
        "--timeout=900s",
    ]))?;
    Ok(())
}

/// Now, to the whole second (Jobs are finished at whole seconds, as their status holds them).
pub fn now_second() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// Sleeps until `at` (not at all once it has passed).
pub async fn sleep_until(at: jiff::Timestamp) {
    if let Ok(wait) = std::time::Duration::try_from(at.duration_since(jiff::Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
}

/// Which build of kube-retention's webhook and controller a section measured: the one the local
/// cluster runs ([`kube_retention_e2e::Layout::cargo_profile`]; `make bench-…` sets the image's static musl build).
pub fn measured_build() -> String {
    let profile = kube_retention_e2e::Layout::cargo_profile();
    if profile.contains("musl") {
        format!("the image's static build, `target/{profile}`")
    } else {
        format!("the `target/{profile}` build (not the image's)")
    }
}

/// Runs `work` on a private local cluster (its state in a temporary folder named `prefix`…),
/// with the cluster's own controller stopped, the deleters' kubeconfigs written and the admin's
/// client; the cluster is taken down after, whether `work` ended, failed or was interrupted.
pub async fn on_private_cluster<Work>(
    prefix: &str,
    work: impl FnOnce(kube_retention_e2e::LocalCluster, kube::Client) -> Work,
) -> anyhow::Result<()>
where
    Work: std::future::Future<Output = anyhow::Result<()>>,
{
    use kube_retention_e2e::{LocalCluster, components, process};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let state = tempfile::Builder::new().prefix(prefix).tempdir()?;
    let layout = kube_retention_e2e::Layout::new(state.path())?;
    println!("starting a private cluster in {}", state.path().display());
    let (cluster, _) = LocalCluster::up(layout)?;
    let outcome = until_interrupted(async {
        process::tracked(&cluster.layout.state_dir, &[components::CONTROLLER])
            .remove(0)
            .stop(std::time::Duration::from_secs(10))?;
        kubeconfigs::write_peer_kubeconfig(&cluster)?;
        let kubeconfig = kube::config::Kubeconfig::read_from(cluster.layout.kubeconfig())?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        work(cluster.clone(), kube::Client::try_from(config)?).await
    })
    .await;
    // A failure whose cause is in a log outlives the temporary folder.
    if outcome.is_err() {
        match cluster.layout.keep_logs("bench") {
            Ok(kept) => eprintln!("the logs of this run's processes: {}", kept.display()),
            Err(error) => eprintln!("keeping the logs of this run's processes: {error:#}"),
        }
    }
    LocalCluster::down(&cluster.layout)?;
    outcome
}

/// Runs `work` until it ends or the benchmark is interrupted (Ctrl-C or SIGTERM), so the caller
/// always reaches its `LocalCluster::down`: the cluster's processes run in their own process
/// groups, and nothing else would stop them.
pub async fn until_interrupted(
    work: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        outcome = work => outcome,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted (Ctrl-C); the cluster is taken down"),
        _ = terminate.recv() => anyhow::bail!("terminated (SIGTERM); the cluster is taken down"),
    }
}

#[cfg(test)]
mod tests {
    use super::{exit_of_stat, names_an_oom_kill};

    /// A `/proc/PID/stat` line with `state` and, in its 52nd field, `exit_code` (the fields
    /// between them zero; a process name with a space and a parenthesis, as a name may have).
    fn stat(state: &str, exit_code: i32) -> String {
        format!(
            "77 (kube (ctl) x) {state} {} {exit_code}\n",
            ["0"; 48].join(" ")
        )
    }

    #[test]
    fn a_zombies_exit_is_read_from_its_stat() {
        assert_eq!(
            exit_of_stat(&stat("Z", 15)).as_deref(),
            Some("killed by signal 15")
        );
        assert_eq!(
            exit_of_stat(&stat("Z", 9)).as_deref(),
            Some("killed by signal 9")
        );
        assert_eq!(
            exit_of_stat(&stat("Z", 256)).as_deref(),
            Some("exit status 1")
        );
        assert_eq!(
            exit_of_stat(&stat("Z", 0)).as_deref(),
            Some("exit status 0")
        );
        assert_eq!(
            exit_of_stat(&stat("S", 0)),
            None,
            "a running process has no exit"
        );
        assert_eq!(exit_of_stat("77 (x) Z 1 2"), None, "too short");
    }

    #[test]
    fn an_oom_kill_is_read_from_the_kernel_log_for_that_pid_only() {
        let log = "[  10.1] eth0: link up\n\
                   [4711.2] Out of memory: Killed process 4242 (kube-controller) total-vm:9000kB\n\
                   [4800.0] Memory cgroup out of memory: Killed process 77 (etcd) total-vm:1kB\n";
        assert!(names_an_oom_kill(log, 4242));
        assert!(names_an_oom_kill(log, 77));
        assert!(!names_an_oom_kill(log, 424));
        assert!(!names_an_oom_kill("[1.0] Killed process 5 (x) by hand", 5));
    }
}
