//! The node's kubelet and kube-proxy: their configuration files, kubeconfigs and start, in the
//! node's network namespace. Each setting that departs from the defaults says why.

use std::fs;

use anyhow::Result;

use super::{HOST_IP, NODE_IP, NODE_NAME, leftovers, network, runtime};
use crate::LocalCluster;

pub(super) fn start(cluster: &LocalCluster) -> Result<()> {
    let layout = &cluster.layout;
    let state = &layout.state_dir;
    let node = state.join("node");
    // The node reaches the API server at the host's end of its link.
    let server = format!("https://{HOST_IP}:{}", cluster.api_port);
    for identity in ["kubelet", "kube-proxy"] {
        let path = node.join(format!("{identity}.kubeconfig"));
        cluster.write_identity_kubeconfig(identity, &server, &path)?;
    }

    let kubelet_config = node.join("kubelet.yaml");
    fs::write(
        &kubelet_config,
        format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts cgroup v1 only (a hybrid layout without controllers in the v2 tree);
# Kubernetes 1.35 refuses v1 unless told.
failCgroupV1: false
# No systemd: cgroupfs, as containerd's runc.
cgroupDriver: cgroupfs
# The node's pods under a cgroup of their own, which `make down` empties and removes.
cgroupRoot: /{cgroup_root}
containerRuntimeEndpoint: unix://{socket}
# The API server's calls (logs, exec) are authenticated by the cluster's CA and authorized by
# SubjectAccessReview, as in a real cluster; nobody anonymous.
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: "{ca}"}}
authorization: {{mode: Webhook}}
address: {NODE_IP}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
clusterDomain: cluster.local
# Containers' logs in the state folder, not /var/log/pods.
podLogsDir: "{pod_logs}"
# A shared development machine: swap may be on, and the disk shared with everything else. Images
# are imported, never pulled, so none may be collected, and eviction stays out of the way.
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}}
# cAdvisor cannot size this machine's root device (no /dev/vda in its view): no ephemeral-
# storage accounting rather than a node that never reports it.
localStorageCapacityIsolation: false
"#,
            cgroup_root = leftovers::CGROUP_ROOT,
            socket = runtime::socket(state).display(),
            ca = cluster.pki_file("ca.crt"),
            pod_logs = node.join("pod-logs").display(),
        ),
    )?;
    network::spawn_in_node(
        state,
        "kubelet",
        &layout.binary("kubelet"),
        &[
            format!("--config={}", kubelet_config.display()),
            format!("--kubeconfig={}", node.join("kubelet.kubeconfig").display()),
            format!("--root-dir={}", node.join("kubelet").display()),
            format!("--cert-dir={}", node.join("kubelet/pki").display()),
            format!("--hostname-override={NODE_NAME}"),
            format!("--node-ip={NODE_IP}"),
        ],
    )?;

    let proxy_config = node.join("kube-proxy.yaml");
    fs::write(
        &proxy_config,
        format!(
            r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {{kubeconfig: "{kubeconfig}"}}
hostnameOverride: {NODE_NAME}
clusterCIDR: {pods}
# conntrack's table size is the host's to set (a module parameter, not per namespace).
conntrack: {{maxPerCore: 0}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
"#,
            kubeconfig = node.join("kube-proxy.kubeconfig").display(),
            pods = super::POD_CIDR,
        ),
    )?;
    network::spawn_in_node(
        state,
        "kube-proxy",
        &layout.binary("kube-proxy"),
        &[format!("--config={}", proxy_config.display())],
    )
    .map(drop)
}
