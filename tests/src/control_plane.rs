//! kube-apiserver's command line, and what the chaos suite does to the control plane: restart
//! the API server and compact etcd so that watches resuming from an old resourceVersion get
//! 410 Gone and must list afresh.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::LocalCluster;
use crate::process;

impl LocalCluster {
    pub(crate) fn pki_file(&self, name: &str) -> String {
        self.layout
            .state(&format!("pki/{name}"))
            .display()
            .to_string()
    }

    /// Writes a kubeconfig at `path` for `server`, acting as the client certificate
    /// `pki/<identity>.crt` (and its key) that [`crate::pki`] issued.
    pub(crate) fn write_identity_kubeconfig(
        &self,
        identity: &str,
        server: &str,
        path: &std::path::Path,
    ) -> Result<()> {
        let read = |name: String| {
            std::fs::read_to_string(self.pki_file(&name))
                .with_context(|| format!("reading the local cluster's pki/{name}"))
        };
        crate::kubeconfig::write(
            path,
            server,
            &read("ca.crt".into())?,
            crate::kubeconfig::Credentials::ClientCertificate {
                cert_pem: &read(format!("{identity}.crt"))?,
                key_pem: &read(format!("{identity}.key"))?,
            },
        )
    }

    pub(crate) fn apiserver_command(&self) -> Command {
        let layout = &self.layout;
        let file = |name: &str| self.pki_file(name);
        let mut command = Command::new(layout.binary("kube-apiserver"));
        command
            .arg(format!(
                "--etcd-servers=http://127.0.0.1:{}",
                self.etcd_port
            ))
            .arg(format!(
                "--bind-address={}",
                if self.node { "0.0.0.0" } else { "127.0.0.1" }
            ))
            .arg(format!("--secure-port={}", self.api_port))
            .arg(format!("--tls-cert-file={}", file("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", file("apiserver.key")))
            .arg(format!("--client-ca-file={}", file("ca.crt")))
            .arg(format!("--service-account-key-file={}", file("sa.pub")))
            .arg(format!(
                "--service-account-signing-key-file={}",
                file("sa.key")
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-cluster-ip-range={}",
                crate::node::SERVICE_CIDR
            ))
            // The Node authorizer: what a kubelet may read, as in a real cluster.
            .arg("--authorization-mode=Node,RBAC")
            .arg(format!("--cert-dir={}", layout.state("pki").display()))
            .arg(format!(
                "--audit-policy-file={}",
                layout.audit_policy().display()
            ))
            .arg(format!("--audit-log-path={}", layout.audit_log().display()))
            .arg("--audit-log-maxsize=4000")
            // The client certificate it presents to webhooks that ask for one.
            .arg(format!(
                "--admission-control-config-file={}",
                layout.state(crate::admission_config::FILE).display()
            ));
        if self.node {
            command
                // The `kubernetes` Service's endpoint, for the node's pods.
                .arg(format!("--advertise-address={}", crate::node::HOST_IP))
                // Webhook Services are called at their pods' addresses, routed through the node.
                .arg("--enable-aggregator-routing=true")
                // The node's name resolves nowhere: the API server calls its kubelet by address.
                .arg("--kubelet-preferred-address-types=InternalIP")
                .arg(format!(
                    "--kubelet-client-certificate={}",
                    file("apiserver-kubelet-client.crt")
                ))
                .arg(format!(
                    "--kubelet-client-key={}",
                    file("apiserver-kubelet-client.key")
                ));
        } else {
            command
                .arg("--advertise-address=127.0.0.1")
                // No node, no pods: the `kubernetes` Service needs no endpoint.
                .arg("--endpoint-reconciler-type=none");
        }
        command
    }

    /// Stops kube-apiserver (SIGTERM), compacts etcd up to its current revision when `compact`,
    /// and starts the API server again, waiting until it is ready. The other components come
    /// back on their own time: [`Self::wait_until_controllers_act`] waits for them.
    pub fn restart_apiserver(&self, compact: bool) -> Result<()> {
        self.stop_apiserver()?;
        if compact {
            self.compact_etcd()?;
        }
        self.start_apiserver(&mut self.apiserver_command())
    }

    /// Restarts kube-apiserver with Go's soft memory limit (`GOMEMLIMIT`, such as "10GiB"): its
    /// garbage collector then runs before the heap passes the limit, not only once the heap
    /// has doubled since the last collection. For benchmarks at scale, where that headroom
    /// decides whether the control plane fits the machine.
    pub fn restart_apiserver_with_memory_limit(&self, limit: &str) -> Result<()> {
        self.stop_apiserver()?;
        self.start_apiserver(self.apiserver_command().env("GOMEMLIMIT", limit))
    }

    /// Restarts kube-apiserver with `--feature-gates=GATES` (such as "WatchList=false"), waiting
    /// until it is ready; [`Self::restart_apiserver`] brings back its usual flags.
    pub fn restart_apiserver_with_feature_gates(&self, gates: &str) -> Result<()> {
        self.stop_apiserver()?;
        self.start_apiserver(
            self.apiserver_command()
                .arg(format!("--feature-gates={gates}")),
        )
    }

    fn stop_apiserver(&self) -> Result<()> {
        let apiserver = process::tracked(&self.layout.state_dir, &["kube-apiserver"]).remove(0);
        apiserver.stop(Duration::from_secs(30)).map(drop)
    }

    fn start_apiserver(&self, command: &mut Command) -> Result<()> {
        process::spawn(&self.layout.state_dir, "kube-apiserver", command)?;
        self.wait_until_ready(Duration::from_secs(90))
    }

    /// Waits until kube-controller-manager's controllers act on new objects again: a probe
    /// namespace gets its `default` ServiceAccount. After the API server went away, their
    /// watches reconnect on client-go's backoff (up to 30 s, plus as much again of jitter), so
    /// a namespace created the moment the API server is ready may wait that long for it.
    pub fn wait_until_controllers_act(&self, timeout: Duration) -> Result<()> {
        let probe = format!(
            "control-plane-probe-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis())
        );
        let run = |args: &[&str]| {
            self.kubectl()
                .args(args)
                .output()
                .is_ok_and(|output| output.status.success())
        };
        anyhow::ensure!(
            run(&["create", "namespace", &probe]),
            "creating the probe namespace {probe}"
        );
        let deadline = std::time::Instant::now() + timeout;
        let acted = loop {
            if run(&["get", "serviceaccount", "default", "-n", &probe]) {
                break true;
            }
            if std::time::Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        run(&["delete", "namespace", &probe, "--wait=false"]);
        anyhow::ensure!(
            acted,
            "kube-controller-manager made no default ServiceAccount in {probe} within {timeout:?}"
        );
        Ok(())
    }

    /// Moves etcd's revision on (a write outside the API server's keys) and compacts its history
    /// up to there (etcd's JSON gateway), so every resourceVersion handed out so far — even one a
    /// departing API server sent in its last bookmark — is too old to watch from.
    pub fn compact_etcd(&self) -> Result<i64> {
        // "chaos-bump" = "Y2hhb3MtYnVtcA==", value "1" = "MQ=="; the answer carries the revision.
        let put = self.etcd_post(
            "/v3/kv/put",
            r#"{"key": "Y2hhb3MtYnVtcA==", "value": "MQ=="}"#,
        )?;
        let revision: i64 = put
            .pointer("/header/revision")
            .and_then(Value::as_str)
            .context("etcd's range answer has a revision")?
            .parse()?;
        self.etcd_post(
            "/v3/kv/compaction",
            &format!(r#"{{"revision": "{revision}", "physical": true}}"#),
        )?;
        Ok(revision)
    }

    fn etcd_post(&self, path: &str, body: &str) -> Result<Value> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.etcd_port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let (head, payload) = response
            .split_once("\r\n\r\n")
            .context("etcd answered without a body")?;
        anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "etcd {path}: {head}");
        // The gateway may answer with a chunked body: the JSON is the first line that parses.
        payload
            .lines()
            .find_map(|line| serde_json::from_str(line).ok())
            .with_context(|| format!("etcd {path}: no JSON in {payload:?}"))
    }
}
