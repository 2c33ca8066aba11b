//! The API server's admission configuration (`--admission-control-config-file`): a
//! kubeconfig for its ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins giving it
//! a client certificate for every webhook it calls (user `*`), as an admin gives one for
//! kube-retention's `webhook.clientAuth`. A webhook that asks for no certificate is sent none,
//! so the local webhook without `--client-ca-file` is called as before.

use std::fs;
use std::path::PathBuf;

use anyhow::Result;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube_retention_certs::CertifiedKey;
use serde_json::json;

use crate::layout::Layout;

/// The AdmissionConfiguration, in the state folder (JSON, which the API server reads as YAML).
pub const FILE: &str = "admission-control.json";
/// The kubeconfig it names.
const KUBECONFIG: &str = "admission-webhooks.kubeconfig";

/// Writes the AdmissionConfiguration and its kubeconfig presenting `client`; answers the
/// configuration's path.
pub(crate) fn write(layout: &Layout, client: &CertifiedKey) -> Result<PathBuf> {
    let kubeconfig = layout.state(KUBECONFIG);
    let users = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "users": [{"name": "*", "user": {
            "client-certificate-data": STANDARD.encode(&client.cert_pem),
            "client-key-data": STANDARD.encode(&client.key_pem),
        }}],
    });
    fs::write(&kubeconfig, serde_json::to_vec_pretty(&users)?)?;
    let plugin = |name: &str| {
        json!({"name": name, "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": kubeconfig.display().to_string(),
        }})
    };
    let config = json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [plugin("ValidatingAdmissionWebhook"), plugin("MutatingAdmissionWebhook")],
    });
    let path = layout.state(FILE);
    fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(path)
}
