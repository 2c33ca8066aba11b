//! What the node leaves outside its processes, and its removal: the pods' cgroup tree, the
//! runtime's shims, and the mounts under the state folder (container root file systems, the
//! pods' network namespaces, projected volumes, the kubelet's tmpfs).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::runtime;

/// The cgroup the kubelet puts every pod under (`cgroupRoot`), in every hierarchy.
pub(super) const CGROUP_ROOT: &str = "kube-retention-node";
const CGROUPS: &str = "/sys/fs/cgroup";

/// Creates the kubelet's cgroup root in every cgroup v1 hierarchy (the kubelet requires it to
/// exist); a new cpuset starts without CPUs or memory nodes, so it gets its parent's.
pub(super) fn create_cgroup_root() -> Result<()> {
    for hierarchy in hierarchies()? {
        let root = hierarchy.join(CGROUP_ROOT);
        fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        if hierarchy.ends_with("cpuset") {
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let parent = fs::read_to_string(hierarchy.join(file))?;
                fs::write(root.join(file), parent.trim())?;
            }
        }
    }
    Ok(())
}

/// Kills what is left of the node's containers and shims, removes its cgroups and unmounts
/// everything mounted under the state folder's `node/`.
pub(super) fn remove(state: &Path) -> Result<()> {
    kill_shims(state)?;
    for hierarchy in hierarchies()? {
        let root = hierarchy.join(CGROUP_ROOT);
        if root.exists() {
            empty_and_remove(&root)?;
        }
    }
    unmount_under(&state.join("node"))
}

/// What is left of the node's cgroups, shims and mounts, described.
pub(super) fn remaining(state: &Path) -> Result<Vec<String>> {
    let mut left = Vec::new();
    for hierarchy in hierarchies()? {
        let root = hierarchy.join(CGROUP_ROOT);
        if root.exists() {
            left.push(format!("the cgroup {}", root.display()));
        }
    }
    left.extend(shims(state)?.iter().map(|pid| format!("the shim {pid}")));
    if let Ok(dir) = state.join("node").canonicalize() {
        left.extend(
            mount_points()?
                .into_iter()
                .filter(|point| point.starts_with(&dir))
                .map(|point| format!("the mount {}", point.display())),
        );
    }
    Ok(left)
}

/// The mounted cgroup v1 hierarchies (the unified v2 tree has no controllers here).
fn hierarchies() -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(CGROUPS).context("reading /sys/fs/cgroup")? {
        let path = entry?.path();
        if path.join("cgroup.procs").exists() && !path.ends_with("unified") {
            found.push(path);
        }
    }
    Ok(found)
}

/// Kills every process in `cgroup` and below (SIGKILL: they are containers whose shims are
/// gone), then removes the cgroups, deepest first. One gone meanwhile (its kubelet removed it)
/// is as good as removed.
fn empty_and_remove(cgroup: &Path) -> Result<()> {
    let entries = match fs::read_dir(cgroup) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        entries => entries.with_context(|| format!("reading {}", cgroup.display()))?,
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            empty_and_remove(&path)?;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let procs = fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            break;
        }
        for pid in procs.lines().filter_map(|line| line.trim().parse().ok()) {
            kill(Pid::from_raw(pid), Signal::SIGKILL).ok();
        }
        if Instant::now() > deadline {
            bail!("processes in {} survived SIGKILL", cgroup.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    match fs::remove_dir(cgroup) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        removed => removed.with_context(|| format!("removing {}", cgroup.display())),
    }
}

/// Kills the runtime's shims that outlived containerd.
fn kill_shims(state: &Path) -> Result<()> {
    for pid in shims(state)? {
        kill(Pid::from_raw(pid), Signal::SIGKILL).ok();
    }
    Ok(())
}

/// The runtime's shims running: each names containerd's socket on its command line.
fn shims(state: &Path) -> Result<Vec<i32>> {
    let socket = runtime::socket(state).display().to_string();
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(pid) = entry?.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|byte| *byte == 0).collect();
        let shim = args
            .first()
            .is_some_and(|program| String::from_utf8_lossy(program).contains("containerd-shim"));
        if shim && args.contains(&socket.as_bytes()) {
            found.push(pid);
        }
    }
    Ok(found)
}

/// Every mount point, from /proc/self/mountinfo.
fn mount_points() -> Result<Vec<PathBuf>> {
    Ok(fs::read_to_string("/proc/self/mountinfo")?
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape)
        .collect())
}

/// Unmounts every mount point under `dir`, deepest first (a lazy detach where a busy one
/// refuses).
fn unmount_under(dir: &Path) -> Result<()> {
    let Ok(dir) = dir.canonicalize() else {
        return Ok(());
    };
    for _ in 0..5 {
        let mut points: Vec<PathBuf> = mount_points()?
            .into_iter()
            .filter(|point| point.starts_with(&dir))
            .collect();
        if points.is_empty() {
            return Ok(());
        }
        points.sort_by_key(|point| std::cmp::Reverse(point.components().count()));
        for point in points {
            if nix::mount::umount(&point).is_err() {
                nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH).ok();
            }
        }
    }
    bail!("mounts under {} would not go", dir.display())
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> PathBuf {
    let mut out = Vec::new();
    let bytes = field.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'\\'
            && index + 3 < bytes.len()
            && let Ok(value) = u8::from_str_radix(&field[index + 1..index + 4], 8)
        {
            out.push(value);
            index += 4;
            continue;
        }
        out.push(bytes[index]);
        index += 1;
    }
    PathBuf::from(std::ffi::OsString::from(
        String::from_utf8_lossy(&out).into_owned(),
    ))
}
