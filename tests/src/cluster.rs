//! A local Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver (RBAC, default admission
//! plugins, service-account signing) and kube-controller-manager running only the garbage
//! collector, namespace and service-account controllers, so tests decide every status.
//!
//! Each cluster lives in its own state folder with ports chosen at start, so several can run at
//! once. [`LocalCluster::up`] leaves the processes running (for `make up`); the end-to-end suite
//! calls [`LocalCluster::down`] when it is done.

use std::fs;
use std::net::TcpListener;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::kubeconfig::{self, Credentials};
use crate::layout::Layout;
use crate::{components, process};

mod install;
mod with_node;

pub use with_node::{CHART_RELEASE, SHIPPED_NAMESPACE, ShippedImage};

/// The control-plane processes, in start order (stopped in reverse).
pub const CONTROL_PLANE: [&str; 3] = ["etcd", "kube-apiserver", "kube-controller-manager"];

/// The controllers kube-controller-manager runs: nothing that would set a status or delete a
/// finished object behind a test's back. ClusterRole aggregation builds the controller's role;
/// the ValidatingAdmissionPolicy status controller reports what the API server's type checking
/// says of kube-retention's writer policy.
pub const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller,\
serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,\
clusterrole-aggregation-controller,validatingadmissionpolicy-status-controller";

/// Where kube-retention's own components run and the ServiceAccounts they act as.
pub const NAMESPACE: &str = "kube-retention";
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "kube-retention-controller";
pub const WEBHOOK_SERVICE_ACCOUNT: &str = "kube-retention-webhook";

/// What a cluster with a node runs besides: the scheduler, and in kube-controller-manager the
/// controllers that make Deployments' pods, Services' endpoints, disruption budgets and Jobs
/// work.
pub const NODE_CONTROL_PLANE: &str = "kube-scheduler";
const NODE_CONTROLLERS: &str = ",deployment-controller,replicaset-controller,\
endpoints-controller,endpointslice-controller,disruption-controller,node-lifecycle-controller,\
job-controller";

/// The API server's and the webhook's ports, and whether the cluster has a node, written once
/// the cluster is fully up.
const PORTS_FILE: &str = "ports";
/// The last word in [`PORTS_FILE`] of a cluster with a node.
const WITH_NODE: &str = "node";

/// A running local cluster.
#[derive(Debug, Clone)]
pub struct LocalCluster {
    pub layout: Layout,
    pub etcd_port: u16,
    pub api_port: u16,
    /// Where the local webhook serves; the webhook configurations point here.
    pub webhook_port: u16,
    /// The local controller's /metrics and /readyz.
    pub controller_port: u16,
    /// Whether the cluster has a node (`make up-node`): then the API server also listens on the
    /// host's end of the node's link, and kube-retention runs as the chart's pods, not as host
    /// processes.
    pub node: bool,
}

/// What [`LocalCluster::up`] found or did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    AlreadyRunning,
    Started,
}

impl LocalCluster {
    /// Starts the control plane in `layout.state_dir` unless it already runs there. Leftovers of a
    /// crashed cluster (stale pid files, half the processes) are stopped and replaced.
    pub fn up(layout: Layout) -> Result<(Self, Outcome)> {
        if let Some(cluster) = Self::running_same_minor(&layout)? {
            return Ok((cluster, Outcome::AlreadyRunning));
        }
        Self::down(&layout)?;
        fs::remove_file(layout.state(PORTS_FILE)).ok();
        let etcd_data = layout.state("etcd");
        if etcd_data.exists() {
            fs::remove_dir_all(&etcd_data)?;
        }
        let cluster = Self::down_if_failed(&layout.clone(), || {
            let cluster = Self::start(layout, false)?;
            cluster.install()?;
            components::start_webhook(&cluster)?;
            components::wait_for_admission(&cluster, Duration::from_secs(60))?;
            components::start_controller(
                &cluster,
                components::CONTROLLER,
                cluster.controller_port,
                &[],
            )?;
            components::wait_for_controller(
                &cluster,
                cluster.controller_port,
                Duration::from_secs(60),
            )?;
            cluster.write_ports()?;
            Ok(cluster)
        })?;
        Ok((cluster, Outcome::Started))
    }

    /// What `starting` starts in `layout`, or, where it fails, everything it had started taken
    /// down: a cluster half started would hold the node's cgroups, which every cluster on the
    /// machine shares (a failed `make test-shipped` once failed the `make e2e` after it so).
    pub(crate) fn down_if_failed(
        layout: &Layout,
        starting: impl FnOnce() -> Result<Self>,
    ) -> Result<Self> {
        starting().inspect_err(|_| {
            if let Err(down) = Self::down(layout) {
                eprintln!("taking down the cluster that failed to start: {down:#}");
            }
        })
    }

    /// Written last: a cluster counts as up only once everything before has succeeded.
    fn write_ports(&self) -> Result<()> {
        let mode = if self.node { WITH_NODE } else { "host" };
        fs::write(
            self.layout.state(PORTS_FILE),
            format!(
                "{} {} {} {} {mode} {}",
                self.api_port,
                self.webhook_port,
                self.controller_port,
                self.etcd_port,
                self.layout.kubernetes
            ),
        )?;
        Ok(())
    }

    /// [`Self::running`], refused when it runs another Kubernetes minor than `layout`'s: its
    /// binaries are not this run's, and its etcd data would be read by another API server.
    pub(crate) fn running_same_minor(layout: &Layout) -> Result<Option<Self>> {
        let Some(cluster) = Self::running(layout) else {
            return Ok(None);
        };
        let minor = Self::recorded_minor(layout).unwrap_or_else(|| "(unknown)".into());
        if minor != layout.kubernetes {
            bail!(
                "Kubernetes {minor} runs in {}, not {}: `make down` first, or give this one \
                 another STATE folder",
                layout.state_dir.display(),
                layout.kubernetes
            );
        }
        Ok(Some(cluster))
    }

    /// The Kubernetes minor the cluster in `layout.state_dir` was started with, from its ports
    /// file, whether it still runs or not.
    pub fn recorded_minor(layout: &Layout) -> Option<String> {
        let ports = fs::read_to_string(layout.state(PORTS_FILE)).ok()?;
        ports.split_whitespace().nth(5).map(str::to_owned)
    }

    /// The cluster in `layout.state_dir`, if every control-plane process is alive and the API
    /// server answers ready.
    pub fn running(layout: &Layout) -> Option<Self> {
        let ports = fs::read_to_string(layout.state(PORTS_FILE)).ok()?;
        let node = ports.split_whitespace().nth(4) == Some(WITH_NODE);
        let mut ports = ports.split_whitespace().map(str::parse::<u16>);
        let cluster = Self {
            layout: layout.clone(),
            api_port: ports.next()?.ok()?,
            webhook_port: ports.next()?.ok()?,
            controller_port: ports.next()?.ok()?,
            etcd_port: ports.next()?.ok()?,
            node,
        };
        let mut names = CONTROL_PLANE.to_vec();
        if node {
            names.push(NODE_CONTROL_PLANE);
            names.extend(crate::node::PROCESSES);
        } else {
            names.extend([components::WEBHOOK, components::CONTROLLER]);
        }
        let all_live = process::tracked(&layout.state_dir, &names)
            .iter()
            .all(|tracked| tracked.live_pid().is_some());
        (all_live && cluster.ready()).then_some(cluster)
    }

    /// Stops every process `up` started in this state folder, by pid, newest first, and removes
    /// what the node made (containers, cgroups, mounts, its network namespace). Logs stay.
    pub fn down(layout: &Layout) -> Result<Vec<String>> {
        let mut stopped = crate::node::Node::down(&layout.state_dir)?;
        let mut names: Vec<&str> = crate::COMPONENTS.to_vec();
        names.push(NODE_CONTROL_PLANE);
        names.extend(CONTROL_PLANE.iter().rev());
        stopped.extend(process::stop_all(&layout.state_dir, &names)?);
        Ok(stopped)
    }

    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// `kubectl` with the admin kubeconfig.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(self.layout.binary("kubectl"));
        command.arg("--kubeconfig").arg(self.layout.kubeconfig());
        command
    }

    fn ready(&self) -> bool {
        self.kubectl()
            .args(["get", "--raw", "/readyz", "--request-timeout=2s"])
            .output()
            .is_ok_and(|output| output.status.success())
    }

    fn start(layout: Layout, node: bool) -> Result<Self> {
        fs::create_dir_all(&layout.state_dir)?;
        let [
            etcd_port,
            etcd_peer_port,
            api_port,
            webhook_port,
            controller_port,
        ] = free_ports()?;
        let pki = crate::pki::Pki::write(&layout)?;
        let cluster = Self {
            layout,
            etcd_port,
            api_port,
            webhook_port,
            controller_port,
            node,
        };
        let layout = &cluster.layout;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        process::spawn(
            &layout.state_dir,
            "etcd",
            Command::new(layout.binary("etcd"))
                .arg("--name=local")
                .arg(format!("--data-dir={}", layout.state("etcd").display()))
                .arg(format!("--listen-client-urls={etcd_url}"))
                .arg(format!("--advertise-client-urls={etcd_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=local={peer_url}"))
                .arg("--listen-metrics-urls=")
                // A throwaway test cluster: durability is not worth the fsync latency.
                .arg("--unsafe-no-fsync")
                // etcd's largest recommended quota, for the benchmark's million Jobs (its 2 GiB
                // default holds fewer); a quota only, nothing is allocated for it.
                .arg("--quota-backend-bytes=8589934592")
                .arg("--log-level=warn"),
        )?;

        kubeconfig::write(
            &layout.kubeconfig(),
            &cluster.server(),
            &pki.ca_pem,
            Credentials::ClientCertificate {
                cert_pem: &pki.admin.cert_pem,
                key_pem: &pki.admin.key_pem,
            },
        )?;
        crate::admission_config::write(layout, &pki.webhook_client)?;
        process::spawn(
            &layout.state_dir,
            "kube-apiserver",
            &mut cluster.apiserver_command(),
        )?;
        cluster.wait_until_ready(Duration::from_secs(90))?;

        kubeconfig::write(
            &layout.state("kube-controller-manager.kubeconfig"),
            &cluster.server(),
            &pki.ca_pem,
            Credentials::ClientCertificate {
                cert_pem: &pki.controller_manager.cert_pem,
                key_pem: &pki.controller_manager.key_pem,
            },
        )?;
        cluster.start_controller_manager()?;
        Ok(cluster)
    }

    /// Starts the control plane's kube-controller-manager (running [`CONTROLLERS`]).
    pub fn start_controller_manager(&self) -> Result<()> {
        let kubeconfig = self.layout.state("kube-controller-manager.kubeconfig");
        process::spawn(
            &self.layout.state_dir,
            CONTROL_PLANE[2],
            Command::new(self.layout.binary(CONTROL_PLANE[2]))
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .arg(format!(
                    "--controllers={CONTROLLERS}{}",
                    if self.node { NODE_CONTROLLERS } else { "" }
                ))
                .arg(format!(
                    "--service-account-private-key-file={}",
                    self.pki_file("sa.key")
                ))
                .arg(format!("--root-ca-file={}", self.pki_file("ca.crt")))
                .arg("--use-service-account-credentials=false")
                .arg("--leader-elect=false")
                .arg("--secure-port=0"),
        )?;
        Ok(())
    }

    /// Stops the control plane's kube-controller-manager, its garbage collector among its
    /// controllers, until [`Self::start_controller_manager`]: for a benchmark whose peer runs
    /// its own, as one kube-controller-manager does in a real cluster.
    pub fn stop_controller_manager(&self) -> Result<()> {
        process::stop_all(&self.layout.state_dir, &CONTROL_PLANE[2..]).map(drop)
    }

    /// Whether the control plane's kube-controller-manager runs: a benchmark may have stopped it.
    pub fn controller_manager_running(&self) -> bool {
        process::tracked(&self.layout.state_dir, &CONTROL_PLANE[2..])
            .iter()
            .any(|tracked| tracked.live_pid().is_some())
    }

    pub(crate) fn wait_until_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !self.ready() {
            for tracked in process::tracked(&self.layout.state_dir, &CONTROL_PLANE[..2]) {
                if tracked.pid_file.exists() && tracked.live_pid().is_none() {
                    bail!(
                        "{} exited during start-up: see {}",
                        tracked.name,
                        process::log_path(&self.layout.state_dir, &tracked.name).display()
                    );
                }
            }
            if Instant::now() > deadline {
                bail!("kube-apiserver not ready after {timeout:?}");
            }
            sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// The identity a ServiceAccount of [`NAMESPACE`] carries, for `kubectl --as`.
    pub fn service_account_user(service_account: &str) -> String {
        Self::service_account_user_in(NAMESPACE, service_account)
    }

    /// The identity a ServiceAccount of `namespace` carries.
    pub fn service_account_user_in(namespace: &str, service_account: &str) -> String {
        format!("system:serviceaccount:{namespace}:{service_account}")
    }
}

/// Ports free on 127.0.0.1 right now, all held until every one is chosen so none repeats.
pub fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    let ports: Vec<u16> = listeners
        .iter()
        .map(|listener| listener.local_addr().map(|address| address.port()))
        .collect::<std::io::Result<_>>()?;
    ports
        .try_into()
        .map_err(|_| anyhow::anyhow!("port count mismatch"))
}
