//! The real webhook binary on 127.0.0.1, as the campaign attacks it: started with a serving
//! certificate and a kubeconfig of a stand-in API server (which answers its SubjectAccessReviews,
//! discovery and parent lookups the same way every time), measured from /proc (its peak RSS,
//! VmHWM, and its open file descriptors), and reached over TLS with HTTP/1.1 or HTTP/2. The
//! in-process oracle is the webhook library's own handler over a context built from the same
//! flags, asking the same stand-in.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_retention_certs::CertificateAuthority;
use kube_retention_webhook::Context;
use kube_retention_webhook::args::Args;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::support::fixture;

/// The user every stand-in review refuses; anyone else may.
pub const REFUSED_USER: &str = "eve";

/// The stand-in API server: SubjectAccessReviews answered by user, discovery of the kinds the
/// campaign writes, the fixture Build `hello` as the only parent.
async fn stand_in() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let resources = |group_version: &str, kinds: &[(&str, &str)]| {
        let resources: Vec<Value> = kinds
            .iter()
            .map(|(kind, plural)| {
                json!({"name": plural, "singularName": "", "namespaced": true, "kind": kind,
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]})
            })
            .collect();
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
               "resources": resources})
    };
    let core = resources("v1", &[("Pod", "pods"), ("ConfigMap", "configmaps")]);
    let router = Router::new()
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(|Json(review): Json<Value>| async move {
                let user = review["spec"]["user"].as_str().unwrap_or_default();
                let allowed = user != REFUSED_USER;
                Json(json!({"apiVersion": "authorization.k8s.io/v1",
                            "kind": "SubjectAccessReview", "metadata": {},
                            "spec": review["spec"], "status": {"allowed": allowed}}))
            }),
        )
        .route("/api/v1", get(move || async move { Json(core.clone()) }))
        .route(
            "/apis/{group}/{version}",
            get(
                move |UrlPath((group, version)): UrlPath<(String, String)>| async move {
                    let kinds: &[(&str, &str)] = match group.as_str() {
                        "batch" => &[("Job", "jobs")],
                        "apps" => &[("Deployment", "deployments")],
                        "shipwright.io" => &[("Build", "builds"), ("BuildRun", "buildruns")],
                        _ => return not_found().into_response(),
                    };
                    Json(resources(&format!("{group}/{version}"), kinds)).into_response()
                },
            ),
        )
        .route(
            "/apis/shipwright.io/v1beta1/namespaces/team-a/builds/hello",
            get(|| async { Json(fixture("build-hello.json")) }),
        )
        .fallback(|| async { not_found() });
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        Json(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "not found", "reason": "NotFound", "code": 404}),
        ),
    )
}

/// A running webhook binary, killed when dropped, and what it needs.
pub struct Webhook {
    child: Child,
    pub address: SocketAddr,
    tls: TlsConnector,
    kubeconfig: std::path::PathBuf,
    flags: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Webhook {
    /// Starts the binary with `flags` besides those it needs, and waits until it answers.
    pub async fn start(flags: &[&str]) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let ca = CertificateAuthority::generate("campaign-ca", time::Duration::days(1)).unwrap();
        let serving = ca
            .issue_serving(&["127.0.0.1"], time::Duration::days(1))
            .unwrap();
        std::fs::write(dir.path().join("tls.crt"), &serving.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &serving.key_pem).unwrap();
        let api = stand_in().await;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://{api}'}}}}]\n\
                 users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
                 current-context: x\n"
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut all = vec![
            format!("--listen={address}"),
            format!("--tls-cert={}", dir.path().join("tls.crt").display()),
            format!("--tls-key={}", dir.path().join("tls.key").display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--log-format=text".to_owned(),
        ];
        all.extend(flags.iter().map(|flag| (*flag).to_owned()));
        // Flags to try besides (measuring another setting): WEBHOOK_CAMPAIGN_FLAGS.
        if let Ok(extra) = std::env::var("WEBHOOK_CAMPAIGN_FLAGS") {
            all.extend(extra.split_whitespace().map(str::to_owned));
        }
        // Another build of the webhook where asked (the figures before a change, measured by
        // the same test): WEBHOOK_CAMPAIGN_BINARY.
        let binary = std::env::var_os("WEBHOOK_CAMPAIGN_BINARY")
            .filter(|binary| !binary.is_empty())
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_kube-retention-webhook").into());
        let child = Command::new(binary)
            .args(&all)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        let ca_der = x509_parser::pem::parse_x509_pem(ca.certified().cert_pem.as_bytes())
            .unwrap()
            .1
            .contents;
        roots.add(ca_der.into()).unwrap();
        let client = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let webhook = Self {
            child,
            address,
            tls: TlsConnector::from(Arc::new(client)),
            kubeconfig,
            flags: all,
            _dir: dir,
        };
        webhook.wait_until_serving().await;
        webhook
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still the one started (it has not exited).
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Its peak resident memory so far (VmHWM), in bytes.
    pub fn peak_rss(&self) -> u64 {
        status_field(self.pid(), "VmHWM:")
    }

    /// Its resident memory now (VmRSS), in bytes.
    pub fn rss(&self) -> u64 {
        status_field(self.pid(), "VmRSS:")
    }

    /// Its open file descriptors now.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(Iterator::count)
            .unwrap_or(0)
    }

    async fn wait_until_serving(&self) {
        for _ in 0..200 {
            if let Ok(mut connection) = self.http1().await
                && let Ok(response) = connection.get("/healthz").await
                && response.0 == StatusCode::OK
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the webhook did not start serving");
    }

    /// A TLS connection offering `alpn`.
    pub async fn tls(&self, alpn: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
        tls(&self.tls, self.address, alpn).await
    }

    /// What connects to it: its CA trusted.
    pub fn connector(&self) -> TlsConnector {
        self.tls.clone()
    }

    pub async fn http1(&self) -> std::io::Result<Http1> {
        http1(&self.tls, self.address).await
    }

    pub async fn http2(&self) -> std::io::Result<Http2> {
        http2(&self.tls, self.address).await
    }

    /// An HTTP/2 connection from the API server's address ([`API_SERVER`]).
    pub async fn api_server(&self) -> std::io::Result<Http2> {
        http2_from(&self.tls, self.address, Some(API_SERVER)).await
    }

    /// The in-process oracle: the library's context from the same flags, asking the same
    /// stand-in API server.
    pub async fn oracle(&self) -> Context {
        let args = Args::parse_from(
            std::iter::once("kube-retention-webhook".to_owned()).chain(self.flags.clone()),
        );
        let client = kube_retention_runtime::client(Some(&self.kubeconfig))
            .await
            .unwrap();
        args.context(client).unwrap()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// The address the API server's requests come from in the campaign: another loopback address
/// than the attackers' (127.0.0.1), as the API server's is another than a pod's.
pub const API_SERVER: std::net::IpAddr =
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

/// A TLS connection to `address` through `connector`, offering `alpn`.
pub async fn tls(
    connector: &TlsConnector,
    address: SocketAddr,
    alpn: &[u8],
) -> std::io::Result<TlsStream<TcpStream>> {
    tls_from(connector, address, alpn, None).await
}

/// As [`tls`], from the loopback address `source` where given.
pub async fn tls_from(
    connector: &TlsConnector,
    address: SocketAddr,
    alpn: &[u8],
    source: Option<std::net::IpAddr>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let stream = match source {
        None => TcpStream::connect(address).await?,
        Some(source) => {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::new(source, 0))?;
            socket.connect(address).await?
        }
    };
    let mut config = (**connector.config()).clone();
    config.alpn_protocols = vec![alpn.to_vec()];
    TlsConnector::from(Arc::new(config))
        .connect("127.0.0.1".try_into().unwrap(), stream)
        .await
}

pub async fn http1(connector: &TlsConnector, address: SocketAddr) -> std::io::Result<Http1> {
    let tls = tls(connector, address, b"http/1.1").await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok(Http1(sender))
}

pub async fn http2(connector: &TlsConnector, address: SocketAddr) -> std::io::Result<Http2> {
    http2_from(connector, address, None).await
}

/// An HTTP/2 connection from the loopback address `source` where given.
pub async fn http2_from(
    connector: &TlsConnector,
    address: SocketAddr,
    source: Option<std::net::IpAddr>,
) -> std::io::Result<Http2> {
    let tls = tls_from(connector, address, b"h2", source).await?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok(Http2(sender))
}

fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// An HTTP/1.1 connection.
pub struct Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>);

/// An HTTP/2 connection.
#[derive(Clone)]
pub struct Http2(pub hyper::client::conn::http2::SendRequest<Full<Bytes>>);

/// A status and a body.
pub type Answered = (StatusCode, Bytes);

fn post_request(path: &str, body: Bytes) -> axum::http::Request<Full<Bytes>> {
    axum::http::Request::post(path)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap()
}

async fn answered(
    response: hyper::Response<hyper::body::Incoming>,
) -> Result<Answered, hyper::Error> {
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

impl Http1 {
    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<Answered, hyper::Error> {
        self.0.ready().await?;
        answered(self.0.send_request(post_request(path, body)).await?).await
    }

    pub async fn get(&mut self, path: &str) -> Result<Answered, hyper::Error> {
        self.0.ready().await?;
        let request = axum::http::Request::get(path)
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::new()))
            .unwrap();
        answered(self.0.send_request(request).await?).await
    }
}

impl Http2 {
    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<Answered, hyper::Error> {
        self.0.ready().await?;
        let mut request = post_request(path, body);
        *request.uri_mut() = format!("https://127.0.0.1{path}").parse().unwrap();
        answered(self.0.send_request(request).await?).await
    }
}

/// Writes `bytes` to a TLS stream and flushes it.
pub async fn write(stream: &mut TlsStream<TcpStream>, bytes: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    stream.write_all(bytes).await?;
    stream.flush().await
}
