//! TLS for the webhook: rustls (TLS 1.2 and 1.3 only) with the certificate and key read from
//! files and reloaded when they change. New handshakes get the new certificate; established
//! connections carry on undisturbed. The reload runs as the supervised task `tls-reload`: were it
//! to end, the webhook would serve its certificate past expiry, so its end stops the webhook.
//!
//! With a client CA (`--client-ca-file`), every client must present a certificate it signed,
//! or the handshake fails: only an API server given such a certificate (its admission
//! kubeconfig) gets an answer, and nobody else can use the writer check as an oracle or spend
//! the webhook's CPU. The CA is read at start; a new one needs a restart.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use std::time::Duration;

use kube_retention_runtime::supervise::{self, Supervised};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::Result;

/// Serves whichever certificate was loaded last.
pub struct ReloadingResolver {
    /// Swapped whole on reload: a handshake reads it without a lock (`arc-swap`).
    current: ArcSwap<CertifiedKey>,
}

impl fmt::Debug for ReloadingResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReloadingResolver")
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Why a certificate and key could not be served, naming the file or the part that failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the serving certificate file: {0}")]
    Certificate(#[source] rustls_pki_types::pem::Error),
    #[error("the serving certificate file holds no certificate")]
    NoCertificate,
    #[error("the serving key file: {0}")]
    Key(#[source] rustls_pki_types::pem::Error),
    #[error("the serving certificate and key do not match: {0}")]
    Mismatch(#[source] rustls::Error),
    #[error("the TLS versions: {0}")]
    Versions(#[source] rustls::Error),
    #[error("the client CA file {}: {reason}", path.display())]
    ClientCa { path: PathBuf, reason: String },
}

/// The certificate chain and key files, and what they held when last read.
pub struct CertificateFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertificateFiles {
    fn read(&self) -> Result<(Vec<u8>, Vec<u8>)> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.to_owned(),
                source,
            })
        };
        Ok((read(&self.cert)?, read(&self.key)?))
    }
}

fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsError::Certificate)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate.into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsError::Key)?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(TlsError::Mismatch)?;
    Ok(Arc::new(certified))
}

/// A verifier of client certificates against the CAs in the PEM file at `path`: a client
/// without a certificate they signed fails its handshake.
pub fn client_verifier(path: &Path) -> Result<Arc<dyn ClientCertVerifier>> {
    let refused = |reason: String| TlsError::ClientCa {
        path: path.to_owned(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|error| refused(format!("reading it: {error}")))?;
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate = certificate.map_err(|error| refused(error.to_string()))?;
        roots
            .add(certificate)
            .map_err(|error| refused(format!("a certificate in it: {error}")))?;
    }
    if roots.is_empty() {
        return Err(refused("it holds no certificate".to_owned()).into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|error| refused(error.to_string()))?;
    Ok(verifier)
}

/// Loads the certificate, builds the server config (verifying clients with `clients`, if
/// given), and starts a task that reloads the files every `interval` when their contents
/// change, answered for a supervisor. A broken replacement is logged and skipped.
pub fn server_config(
    files: CertificateFiles,
    interval: Duration,
    clients: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<(Arc<ServerConfig>, Supervised)> {
    let (cert, key) = files.read()?;
    let resolver = Arc::new(ReloadingResolver {
        current: ArcSwap::new(certified_key(&cert, &key)?),
    });
    let builder =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(TlsError::Versions)?;
    let builder = match clients {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver.clone());
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let reloading = supervise::spawn("tls-reload", reload(files, resolver, (cert, key), interval));
    Ok((Arc::new(config), reloading))
}

async fn reload(
    files: CertificateFiles,
    resolver: Arc<ReloadingResolver>,
    mut loaded: (Vec<u8>, Vec<u8>),
    interval: Duration,
) {
    let mut ticker = tokio::time::interval(interval);
    loop {
        ticker.tick().await;
        let Ok(read) = files.read() else {
            continue; // Mid-rotation: one file replaced, the other not yet. Try again.
        };
        if read == loaded {
            continue;
        }
        match certified_key(&read.0, &read.1) {
            Ok(certified) => {
                resolver.current.store(certified);
                tracing::info!(cert = %files.cert.display(), "reloaded the serving certificate");
            }
            // Typically mid-rotation (new certificate, old key): the next change completes it.
            Err(error) => {
                tracing::warn!(%error, "changed certificate files are not usable; keeping the old certificate")
            }
        }
        loaded = read;
    }
}
