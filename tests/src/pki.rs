//! The local cluster's certificate authorities, certificates and keys.

use std::fs;

use anyhow::Result;
use kube_retention_certs::CertificateAuthority;

use crate::layout::Layout;

const CERT_VALIDITY: time::Duration = time::Duration::days(30);

/// The local cluster's certificates and keys, written under `pki/`.
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) admin: kube_retention_certs::CertifiedKey,
    pub(crate) controller_manager: kube_retention_certs::CertifiedKey,
    /// What the API server presents to webhooks that ask for a client certificate.
    pub(crate) webhook_client: kube_retention_certs::CertifiedKey,
}

/// The CA of the API server's client certificate towards webhooks: what a webhook verifying
/// its clients is given (`--client-ca-file`).
pub const WEBHOOK_CLIENT_CA: &str = "webhook-client-ca.crt";
/// The API server's client certificate towards webhooks, and its key.
pub const WEBHOOK_CLIENT: [&str; 2] = [
    "apiserver-webhook-client.crt",
    "apiserver-webhook-client.key",
];

impl Pki {
    pub(crate) fn write(layout: &Layout) -> Result<Self> {
        let dir = layout.state("pki");
        fs::create_dir_all(&dir)?;
        let ca = CertificateAuthority::generate("kube-retention-local-ca", CERT_VALIDITY)?;
        // Host processes call 127.0.0.1; the node and its pods call the host's end of the node's
        // link and the `kubernetes` Service.
        let serving = ca.issue_serving(
            &[
                "127.0.0.1",
                "localhost",
                crate::node::HOST_IP,
                crate::node::KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            CERT_VALIDITY,
        )?;
        // The node's registry, on the host's end of the node's link.
        let registry = ca.issue_serving(&[crate::node::HOST_IP], CERT_VALIDITY)?;
        let admin = ca.issue_client("kube-retention-admin", &["system:masters"], CERT_VALIDITY)?;
        let controller_manager = ca.issue_client(
            "system:kube-controller-manager",
            &["system:masters"],
            CERT_VALIDITY,
        )?;
        let (sa_key, sa_pub) = kube_retention_certs::generate_signing_key()?;
        // The webhook's serving certificate comes from a CA of its own, as in a real cluster.
        let webhook_ca =
            CertificateAuthority::generate("kube-retention-webhook-ca", CERT_VALIDITY)?;
        let webhook = webhook_ca.issue_serving(&["127.0.0.1", "localhost"], CERT_VALIDITY)?;
        // The API server's identity towards webhooks, from a CA of its own: a webhook trusts
        // exactly what the admin gave the API server.
        let webhook_client_ca =
            CertificateAuthority::generate("kube-retention-webhook-client-ca", CERT_VALIDITY)?;
        let webhook_client =
            webhook_client_ca.issue_client("kube-apiserver", &[], CERT_VALIDITY)?;
        // The node's identities: what the Node authorizer and the default RBAC bindings know.
        for (file, user, group) in [
            ("kubelet", crate::node::NODE_USER, "system:nodes"),
            ("kube-proxy", "system:kube-proxy", ""),
            ("kube-scheduler", "system:kube-scheduler", ""),
            // The API server's identity towards the kubelet (logs, exec), an admin's.
            (
                "apiserver-kubelet-client",
                "kube-apiserver",
                "system:masters",
            ),
        ] {
            let groups: &[&str] = if group.is_empty() { &[] } else { &[group] };
            let identity = ca.issue_client(user, groups, CERT_VALIDITY)?;
            fs::write(dir.join(format!("{file}.crt")), &identity.cert_pem)?;
            fs::write(dir.join(format!("{file}.key")), &identity.key_pem)?;
        }
        let ca_pem = ca.certified().cert_pem.clone();
        for (name, contents) in [
            ("webhook-ca.crt", &webhook_ca.certified().cert_pem),
            ("webhook-ca.key", &webhook_ca.certified().key_pem),
            ("webhook.crt", &webhook.cert_pem),
            ("webhook.key", &webhook.key_pem),
            (WEBHOOK_CLIENT_CA, &webhook_client_ca.certified().cert_pem),
            (WEBHOOK_CLIENT[0], &webhook_client.cert_pem),
            (WEBHOOK_CLIENT[1], &webhook_client.key_pem),
            ("ca.crt", &ca_pem),
            // Kept so tools (the benchmarks) can issue further client identities.
            ("ca.key", &ca.certified().key_pem),
            ("apiserver.crt", &serving.cert_pem),
            ("apiserver.key", &serving.key_pem),
            ("registry.crt", &registry.cert_pem),
            ("registry.key", &registry.key_pem),
            ("sa.key", &sa_key),
            ("sa.pub", &sa_pub),
        ] {
            fs::write(dir.join(name), contents)?;
        }
        Ok(Self {
            ca_pem,
            admin,
            controller_manager,
            webhook_client,
        })
    }
}
