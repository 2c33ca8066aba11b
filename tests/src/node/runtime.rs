//! The node's container runtime: Debian's containerd and runc, configured to keep everything —
//! its root and state, its socket, runc's state, the pods' network namespaces — under the
//! cluster's state folder, with the CNI bridge plugin for the pods' network.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{POD_CIDR, network};
use crate::{LocalCluster, run};

/// The containerd namespace the CRI plugin keeps Kubernetes' images and containers in.
const CRI_NAMESPACE: &str = "k8s.io";

/// What the node needs from the machine, and the package each comes in.
const INSTALLED: [(&str, &str); 5] = [
    ("/usr/bin/containerd", "containerd"),
    ("/usr/sbin/runc", "runc"),
    ("/usr/lib/cni/bridge", "containernetworking-plugins"),
    ("/usr/sbin/iptables", "iptables"),
    ("/usr/sbin/conntrack", "conntrack"),
];

/// Fails, naming each missing package, unless the node's runtime is installed.
pub(super) fn check_installed() -> Result<()> {
    let missing: Vec<&str> = INSTALLED
        .iter()
        .filter(|(path, _)| !Path::new(path).exists())
        .map(|(_, package)| *package)
        .collect();
    if !missing.is_empty() {
        bail!(
            "the node needs {}: run tests/cluster/node-packages.sh (as root; `make up-node` does)",
            missing.join(", ")
        );
    }
    Ok(())
}

/// The runtime's folder in the cluster's state folder.
pub(super) fn dir(state: &Path) -> PathBuf {
    state.join("node/containerd")
}

pub(super) fn socket(state: &Path) -> PathBuf {
    dir(state).join("containerd.sock")
}

/// Writes the configuration and the CNI network and starts containerd in the node's namespace.
pub(super) fn start(cluster: &LocalCluster) -> Result<()> {
    let state = &cluster.layout.state_dir;
    let dir = dir(state);
    let cni = state.join("node/cni");
    fs::create_dir_all(&dir)?;
    fs::create_dir_all(&cni)?;
    let pause = pause_reference(cluster)?;
    let hosts = state.join("node/registry/hosts");
    super::registry::write_runtime_hosts(state, &hosts)?;
    let config = format!(
        r#"version = 2
root = "{root}"
state = "{state}"
# Snapshotters this machine has no use for, off so they do not probe.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
[plugins."io.containerd.grpc.v1.cri"]
  # Imported at start, never pulled.
  sandbox_image = "{pause}"
  # Pods' network namespaces under the state folder, where `make down` finds them.
  netns_mounts_under_state_dir = true
  # No CAP_SYS_RESOURCE here: lowering a process's oom_score_adj is refused, and the sandbox's
  # -998 with it. Containers get no lower a score than containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # cgroupfs, as the kubelet: there is no systemd.
        SystemdCgroup = false
        Root = "{runc_root}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  # The node's registry (registry.rs): pulled from over TLS, trusting the cluster's CA.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{hosts}"
"#,
        root = dir.join("root").display(),
        state = dir.join("state").display(),
        socket = socket(state).display(),
        runc_root = dir.join("runc").display(),
        cni = cni.display(),
        hosts = hosts.display(),
    );
    let config_path = state.join("node/containerd.toml");
    fs::write(&config_path, config)?;
    fs::write(
        cni.join("10-kube-retention.conflist"),
        format!(
            r#"{{"cniVersion": "0.4.0", "name": "kube-retention", "plugins": [
  {{"type": "bridge", "bridge": "krt0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
    "ipam": {{"type": "host-local", "ranges": [[{{"subnet": "{POD_CIDR}"}}]],
              "routes": [{{"dst": "0.0.0.0/0"}}], "dataDir": "{ipam}"}}}},
  {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
]}}
"#,
            ipam = state.join("node/cni-ipam").display()
        ),
    )?;
    network::spawn_in_node(
        state,
        "containerd",
        Path::new("/usr/bin/containerd"),
        &[format!("--config={}", config_path.display())],
    )?;
    crate::retry(std::time::Duration::from_secs(30), || {
        ctr(state, &["version"]).map(drop)
    })
    .context("containerd did not answer on its socket")
}

/// `kube-retention.local/pause:<version>`, the version `tests/cluster/build.sh` read from
/// Kubernetes' pause Makefile.
fn pause_reference(cluster: &LocalCluster) -> Result<String> {
    let version =
        fs::read_to_string(cluster.layout.binary("pause.version")).with_context(|| {
            format!(
                "tests/cluster/bin/{0}/pause.version: run tests/cluster/build.sh {0}",
                cluster.layout.kubernetes
            )
        })?;
    Ok(format!("{}:{}", super::PAUSE_IMAGE, version.trim()))
}

/// Builds the pause image from the minor's `tests/cluster/bin/<minor>/pause` (the image builder of `make image`)
/// and imports it.
pub(super) fn import_pause(cluster: &LocalCluster) -> Result<()> {
    let reference = pause_reference(cluster)?;
    let (_, tag) = reference.rsplit_once(':').context("a tagged reference")?;
    let archive = cluster.layout.state("node/pause.oci.tar");
    let image = kube_retention_image::Image {
        title: "pause".into(),
        entrypoint: vec!["/pause".into()],
        // Upstream's pause image runs as nobody too.
        user: "65535:65535".into(),
        ..kube_retention_image::Image::kube_retention(
            vec![kube_retention_image::Binaries::amd64(vec![
                cluster.layout.binary("pause"),
            ])],
            tag.to_owned(),
        )
    };
    kube_retention_image::build(&image, &archive)?;
    import(cluster, &archive, super::PAUSE_IMAGE)
}

/// `ctr images import` of an OCI archive whose index tags its manifest: the image becomes
/// `name:tag`.
pub(super) fn import(cluster: &LocalCluster, archive: &Path, name: &str) -> Result<()> {
    let archive = archive.display().to_string();
    ctr(
        &cluster.layout.state_dir,
        &["images", "import", "--base-name", name, &archive],
    )
    .with_context(|| format!("importing {archive} into the node's runtime"))
    .map(drop)
}

/// Kills every container left (the kubelet stopped first) and waits until the runtime has
/// deleted their tasks (the CRI plugin does on exit), so each shim exits and cleans up after
/// itself. Quietly does nothing when containerd does not answer.
pub(super) fn remove_containers(state: &Path) {
    let Ok(listed) = ctr(state, &["tasks", "list", "--quiet"]) else {
        return;
    };
    for task in listed.lines().filter(|line| !line.is_empty()) {
        ctr(state, &["tasks", "kill", "--signal", "SIGKILL", task]).ok();
    }
    crate::retry(std::time::Duration::from_secs(10), || {
        let left = ctr(state, &["tasks", "list", "--quiet"])?;
        for task in left.lines().filter(|line| !line.is_empty()) {
            // A stopped task the CRI plugin has not deleted yet.
            ctr(state, &["tasks", "delete", task]).ok();
        }
        anyhow::ensure!(left.trim().is_empty(), "tasks left: {left}");
        Ok(())
    })
    .ok();
}

/// `ctr images tag`: `to` names the image `from` names.
pub(super) fn tag(state: &Path, from: &str, to: &str) -> Result<()> {
    ctr(state, &["images", "tag", "--force", from, to])
        .with_context(|| format!("tagging {from} as {to} in the node's runtime"))
        .map(drop)
}

/// The pid of the running task of container `id` (`ctr tasks list`: TASK PID STATUS).
pub(super) fn task_pid(state: &Path, id: &str) -> Result<i32> {
    let listed = ctr(state, &["tasks", "list"])?;
    listed
        .lines()
        .filter_map(|line| {
            let mut columns = line.split_whitespace();
            Some((columns.next()?, columns.next()?, columns.next()?))
        })
        .find(|(task, _, status)| *task == id && *status == "RUNNING")
        .and_then(|(_, pid, _)| pid.parse().ok())
        .with_context(|| format!("no running task {id} on the node: {listed}"))
}

fn ctr(state: &Path, args: &[&str]) -> Result<String> {
    run(Command::new("ctr")
        .arg("--address")
        .arg(socket(state))
        .args(["--namespace", CRI_NAMESPACE])
        .args(args))
}
