//! The local cluster's one real node: containerd, runc and the CNI plugins from Debian's packages
//! (`tests/cluster/node-packages.sh`), kubelet and kube-proxy built from the same pinned
//! `k8s.io/kubernetes` as the control plane, all inside a network namespace of their own.
//!
//! Why a network namespace: everything the node adds to networking — its bridge, the pods' veths,
//! kube-proxy's and the bridge plugin's iptables rules, conntrack entries, sysctls — lives there,
//! so [`Node::down`] deleting the namespace leaves nothing behind on the host. The host and the
//! node are joined by one veth pair: the host's end is [`HOST_IP`] (the API server advertises
//! it; pods reach it through the `kubernetes` Service), the node's end [`NODE_IP`], and a host
//! route sends [`POD_CIDR`] through the node, so the API server calls webhook pods directly
//! (`--enable-aggregator-routing`).
//!
//! The machine's kernel and privileges decide several settings (written where each is set):
//! cgroup v1 (`failCgroupV1: false`), no `CAP_SYS_RESOURCE` (containerd's
//! `restrict_oom_score_adj`), no registry on the internet (the pause image built from Kubernetes'
//! `pause.c` and imported; kube-retention's pulled from the node's own registry, [`registry`]).
//!
//! One node at a time per machine: the namespace, the link and the subnets have fixed names.

mod agents;
mod leftovers;
mod network;
pub mod registry;
mod runtime;

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::LocalCluster;
use crate::process;

/// The node's name, and the user its kubelet is (the Node authorizer's `system:node:<name>`).
pub const NODE_NAME: &str = "kube-retention-node";
pub const NODE_USER: &str = "system:node:kube-retention-node";
/// The network namespace the node's runtime, kubelet and kube-proxy run in.
pub const NETNS: &str = "kube-retention-node";
/// The host's end of the link to the node, where the API server is reached from the node.
pub const HOST_IP: &str = "10.210.0.1";
/// A second address on the host's end, for test servers the node's pods call (CloudEvent
/// sinks): the API server's own address is one a sink may not have.
pub const HOST_SERVICE_IP: &str = "10.210.0.3";
/// The node's end: its InternalIP.
pub const NODE_IP: &str = "10.210.0.2";
/// The node's pods' addresses (the CNI bridge's subnet).
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The API server's `--service-cluster-ip-range` and the `kubernetes` Service's address in it.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// The pause image the runtime gives every pod sandbox, imported, never pulled.
pub const PAUSE_IMAGE: &str = "kube-retention.local/pause";

/// The node's processes, in start order (stopped in reverse, before the control plane).
pub const PROCESSES: [&str; 4] = [registry::PROCESS, "containerd", "kubelet", "kube-proxy"];

/// The node of a local cluster started with one.
pub struct Node;

impl Node {
    /// Starts the node's network, runtime, kubelet and kube-proxy, imports the pause image and
    /// waits until the node is Ready.
    pub fn up(cluster: &LocalCluster) -> Result<()> {
        runtime::check_installed()?;
        network::create()?;
        registry::start(&cluster.layout.state_dir)?;
        leftovers::create_cgroup_root()?;
        runtime::start(cluster)?;
        runtime::import_pause(cluster)?;
        agents::start(cluster)?;
        Self::wait_ready(cluster, Duration::from_secs(120))
    }

    /// Stops the node and removes what it made: its processes, containers, cgroups, mounts under
    /// the state folder, the network namespace and the link. Safe when no node runs.
    pub fn down(cluster_state: &std::path::Path) -> Result<Vec<String>> {
        // kube-proxy and the kubelet, then the containers, then the runtime.
        let [registry, containerd, kubelet, proxy] = PROCESSES;
        let mut stopped = process::stop_all(cluster_state, &[proxy, kubelet])?;
        runtime::remove_containers(cluster_state);
        stopped.extend(process::stop_all(cluster_state, &[containerd, registry])?);
        leftovers::remove(cluster_state)?;
        network::delete()?;
        Ok(stopped)
    }

    /// What a node in `cluster_state` left behind after [`Node::down`]: its namespace, its link,
    /// mounts under the state folder, its cgroups, runtime shims. Empty when nothing is left.
    pub fn leftovers(cluster_state: &std::path::Path) -> Result<Vec<String>> {
        let mut left = Vec::new();
        if network::exists() {
            left.push(format!("the network namespace {NETNS}"));
        }
        if network::link_exists() {
            left.push(format!("the link {}", network::HOST_LINK));
        }
        left.extend(leftovers::remaining(cluster_state)?);
        Ok(left)
    }

    /// Imports an OCI archive (`make image`'s) into the node's runtime as `name`:`tag in the
    /// archive`, where pods with `imagePullPolicy: Never` or `IfNotPresent` find it.
    pub fn import_image(
        cluster: &LocalCluster,
        archive: &std::path::Path,
        name: &str,
    ) -> Result<()> {
        runtime::import(cluster, archive, name)
    }

    /// Tags the imported image `from` as `to` too (both `name:tag`), e.g. to install the same
    /// image under a previous version's tag and upgrade from it.
    pub fn tag_image(cluster: &LocalCluster, from: &str, to: &str) -> Result<()> {
        runtime::tag(&cluster.layout.state_dir, from, to)
    }

    /// The host pid of the container `id` (a pod status's `containerID` without its
    /// `containerd://`), read from the node's runtime.
    pub fn container_pid(cluster: &LocalCluster, id: &str) -> Result<i32> {
        runtime::task_pid(&cluster.layout.state_dir, id)
    }

    fn wait_ready(cluster: &LocalCluster, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = cluster
                .kubectl()
                .args(["get", "node", NODE_NAME, "-o"])
                .arg("jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
                .output()
                .is_ok_and(|output| output.stdout == b"True");
            if ready {
                return Ok(());
            }
            for tracked in process::tracked(&cluster.layout.state_dir, &PROCESSES) {
                if tracked.live_pid().is_none() {
                    bail!(
                        "{} exited while the node started: see {}",
                        tracked.name,
                        process::log_path(&cluster.layout.state_dir, &tracked.name).display()
                    );
                }
            }
            if Instant::now() > deadline {
                bail!("node {NODE_NAME} not Ready after {timeout:?}: see the kubelet's log");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}
