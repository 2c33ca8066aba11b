//! Kubeconfig files for the local cluster: the admin's (client certificate) and one per
//! kube-retention ServiceAccount (bearer token), written as JSON, which every client reads.

use std::fs;
use std::path::Path;

use anyhow::Result;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// How a kubeconfig's user proves who it is.
pub enum Credentials<'a> {
    ClientCertificate { cert_pem: &'a str, key_pem: &'a str },
    Token(&'a str),
}

pub fn write(path: &Path, server: &str, ca_pem: &str, user: Credentials<'_>) -> Result<()> {
    let user: Value = match user {
        Credentials::ClientCertificate { cert_pem, key_pem } => json!({
            "client-certificate-data": STANDARD.encode(cert_pem),
            "client-key-data": STANDARD.encode(key_pem),
        }),
        Credentials::Token(token) => json!({ "token": token }),
    };
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "local",
            "cluster": {
                "server": server,
                "certificate-authority-data": STANDARD.encode(ca_pem),
            },
        }],
        "users": [{ "name": "local", "user": user }],
        "contexts": [{ "name": "local", "context": { "cluster": "local", "user": "local" } }],
        "current-context": "local",
    });
    fs::write(path, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}
