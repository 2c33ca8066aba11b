//! The HTTPS server: accepts TCP connections, completes the TLS handshake, and serves the router
//! over HTTP/1.1 or HTTP/2 until shutdown, letting in-flight requests finish. Accept errors
//! (out of file descriptors, most often) back off instead of spinning on the error.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP/1.1 client may take to send a request's headers, idle time before them
/// included: a client that trickles them is cut off, and so is a connection idle that long (the
/// API server opens another). A body is the handler's to cut, by the admission's deadline
/// ([`crate::limits`]).
const HEADER_READ_TIMEOUT: Duration = HANDSHAKE_TIMEOUT;

/// The pause after a failed accept: 5 ms doubling to 1 s while failures continue (backon's
/// exponential backoff, without jitter: one listener, nothing to spread), so a process out of
/// file descriptors neither spins nor stays deaf long once they free up.
#[derive(Debug)]
pub struct AcceptBackoff {
    pauses: ExponentialBackoff,
}

impl AcceptBackoff {
    const PAUSES: ExponentialBuilder = ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(5))
        .with_max_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .without_max_times();

    /// The pause after one more failure.
    pub fn failed(&mut self) -> Duration {
        self.pauses.next().unwrap_or(Duration::from_secs(1))
    }

    pub fn succeeded(&mut self) {
        self.pauses = Self::PAUSES.build();
    }
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self {
            pauses: Self::PAUSES.build(),
        }
    }
}

pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    tokio::pin!(shutdown);
    let mut backoff = AcceptBackoff::default();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => {
                    backoff.succeeded();
                    accepted
                }
                Err(error) => {
                    let pause = backoff.failed();
                    tracing::warn!(%error, pause_ms = pause.as_millis(), "accept failed; pausing");
                    tokio::select! {
                        () = tokio::time::sleep(pause) => continue,
                        () = &mut shutdown => break,
                    }
                }
            },
            () = &mut shutdown => break,
        };
        stream.set_nodelay(true).ok();
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls_stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls_stream)) => tls_stream,
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let connection =
                builder.serve_connection_with_upgrades(TokioIo::new(tls_stream), service);
            if let Err(error) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_secs(10)) => tracing::warn!("connections still open after 10s; closing"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_errors_pause_5ms_doubling_to_a_second_and_reset() {
        let mut backoff = AcceptBackoff::default();
        // backon computes in f32: 40 ms comes out as 39.999..., so to the nearest millisecond.
        let millis = |pause: Duration| (pause.as_secs_f64() * 1000.0).round();
        let pauses: Vec<f64> = (0..10).map(|_| millis(backoff.failed())).collect();
        assert_eq!(
            pauses,
            [
                5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1000.0, 1000.0
            ]
        );
        // A thousand failures in a row take minutes, not a busy loop.
        let total: Duration = (0..1000).map(|_| backoff.failed()).sum();
        assert!(total >= Duration::from_secs(990), "{total:?}");
        backoff.succeeded();
        assert_eq!(backoff.failed(), Duration::from_millis(5));
    }
}
