//! The benchmark's client identities: a kubeconfig per deleter that is not kube-retention's
//! (whose ServiceAccount the cluster makes), each a client certificate from the cluster's CA, so
//! the audit log tells every deleter's requests apart.

use anyhow::Result;
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::kubeconfig::{self, Credentials};

/// The peer's client identity (a client certificate's common name).
pub const PEER_USER: &str = "ttl-after-finished-peer";
/// The ceiling's client identity, and its process's name.
pub const CEILING_USER: &str = "ceiling-deleter";

/// Writes the peer's and the ceiling's kubeconfigs: each a client certificate from the cluster
/// CA, in system:masters.
pub fn write_peer_kubeconfig(cluster: &LocalCluster) -> Result<()> {
    write_kubeconfig(cluster, PEER_USER, "peer.kubeconfig", &["system:masters"])?;
    write_kubeconfig(
        cluster,
        CEILING_USER,
        "ceiling.kubeconfig",
        &["system:masters"],
    )
}

/// Writes the state file `file`: a kubeconfig with a client certificate from the cluster CA for
/// `user` in `groups`.
pub fn write_kubeconfig(
    cluster: &LocalCluster,
    user: &str,
    file: &str,
    groups: &[&str],
) -> Result<()> {
    let layout = &cluster.layout;
    let ca = kube_retention_certs::CertificateAuthority::from_pem(
        &std::fs::read_to_string(layout.state("pki/ca.crt"))?,
        &std::fs::read_to_string(layout.state("pki/ca.key"))?,
    )?;
    let client = ca.issue_client(user, groups, time::Duration::days(1))?;
    kubeconfig::write(
        &layout.state(file),
        &cluster.server(),
        &ca.certified().cert_pem,
        Credentials::ClientCertificate {
            cert_pem: &client.cert_pem,
            key_pem: &client.key_pem,
        },
    )
}
