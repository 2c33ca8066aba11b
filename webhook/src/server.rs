//! The HTTPS server: accepts TCP connections within their bounds ([`crate::connections`]),
//! completes the TLS handshake, and serves the router over HTTP/1.1 or HTTP/2 until shutdown,
//! letting in-flight requests finish. Accept errors (out of file descriptors, most often) back
//! off instead of spinning on the error.
//!
//! Every connection's cost is bounded: its handshake by `HANDSHAKE_TIMEOUT`; an HTTP/1
//! request's headers by `HEADER_READ_TIMEOUT` and its buffer by `HTTP1_BUFFER`; an HTTP/2
//! connection's streams by `--max-streams-per-connection`, the data it may have sent ahead of
//! what the webhook has read by `HTTP2_WINDOW` (a stream's by `HTTP2_STREAM_WINDOW`), its
//! headers by `HEADER_LIST_SIZE`, the streams a client may reset before they are answered
//! by `PENDING_RESETS`; a peer that stops answering pings is dropped after
//! `KEEP_ALIVE_TIMEOUT`, and any connection without a request for
//! `--idle-connection-timeout` is closed. A body's bytes are the memory budget's
//! ([`crate::memory`]).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::connections::{Connection, Connections};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP/1.1 client may take to send a request's headers, idle time before them
/// included: a client that trickles them is cut off. A body is the handler's to cut, by the
/// admission's deadline ([`crate::limits`]).
const HEADER_READ_TIMEOUT: Duration = HANDSHAKE_TIMEOUT;

/// An HTTP/1 connection's read buffer: headers larger than this are refused (431). The API
/// server's are a few hundred bytes.
const HTTP1_BUFFER: usize = 16 * 1024;

/// How much an HTTP/2 client may send on one connection, and on one stream, before the
/// webhook has read it: what the connection holds beyond the bodies the memory budget counts.
/// The webhook reads each body as it arrives, so a body larger than a window still arrives at
/// the network's speed.
const HTTP2_WINDOW: u32 = 256 * 1024;
const HTTP2_STREAM_WINDOW: u32 = 128 * 1024;

/// The largest header block an HTTP/2 request may have.
const HEADER_LIST_SIZE: u32 = 16 * 1024;

/// Streams a client may reset before the webhook has seen them, per connection (the "rapid
/// reset" flood): past it, the connection is closed.
const PENDING_RESETS: usize = 20;

/// How often an HTTP/2 connection is pinged, and how long the peer has to answer before the
/// connection is dropped: a peer gone without closing holds nothing for long.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(20);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long connections may take to finish their requests once asked to close.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The default bound on one HTTP/2 connection's streams open at once; the API server opens
/// another connection past it.
pub const DEFAULT_MAX_STREAMS: u32 = 64;

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

/// The HTTP builder for every connection: HTTP/1.1 and HTTP/2 with the bounds above, at most
/// `max_streams` streams on one HTTP/2 connection.
fn http(max_streams: u32) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(HTTP1_BUFFER);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(max_streams)
        .initial_connection_window_size(HTTP2_WINDOW)
        .initial_stream_window_size(HTTP2_STREAM_WINDOW)
        .max_header_list_size(HEADER_LIST_SIZE)
        .max_pending_accept_reset_streams(PENDING_RESETS)
        .keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    builder
}

/// Serves `router` over TLS on `listener` until `shutdown`, within `connections`' bounds and
/// `max_streams` streams per HTTP/2 connection; then lets the connections finish their
/// requests, for at most `DRAIN_TIMEOUT`.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    connections: Arc<Connections>,
    max_streams: u32,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let builder = http(max_streams);
    let (stopping, stop) = watch::channel(false);
    tokio::pin!(shutdown);
    let mut backoff = AcceptBackoff::default();
    loop {
        let slot = tokio::select! {
            slot = connections.slot() => slot,
            () = &mut shutdown => break,
        };
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
        let Some(connection) = connections.open(slot, peer.ip()) else {
            tracing::debug!(%peer, "refused: the peer has its bound of connections open");
            continue;
        };
        stream.set_nodelay(true).ok();
        let serving = Serving {
            acceptor: acceptor.clone(),
            builder: builder.clone(),
            router: router.clone(),
            stop: stop.clone(),
        };
        tokio::spawn(serving.connection(stream, peer, connection));
    }
    stopping.send_replace(true);
    tokio::select! {
        () = connections.all_closed() => {}
        () = tokio::time::sleep(DRAIN_TIMEOUT) => {
            tracing::warn!(open = connections.open_now(), "connections still open after 10s; closing");
        }
    }
    Ok(())
}

/// What one connection is served with.
struct Serving {
    acceptor: TlsAcceptor,
    builder: Builder<TokioExecutor>,
    router: Router,
    stop: watch::Receiver<bool>,
}

/// Why a connection is asked to close.
#[derive(Debug, Clone, Copy)]
enum Closing {
    Idle,
    ForRoom,
    /// Dropped for room: its requests held it longest.
    Dropped,
    ShuttingDown,
}

impl Serving {
    /// Serves one accepted connection until it ends, or closes it gracefully once it is idle
    /// past its timeout, asked to make room, or the server is shutting down.
    async fn connection(
        mut self,
        stream: tokio::net::TcpStream,
        peer: std::net::SocketAddr,
        connection: Connection,
    ) {
        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream));
        let tls = tokio::select! {
            done = handshake => match done {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            },
            closing = until_closing(&connection, &mut self.stop) => {
                tracing::debug!(%peer, ?closing, "closed during its TLS handshake");
                return;
            }
        };
        let activity = connection.activity.clone();
        let router = self.router;
        let tracked = tower::service_fn(move |request: Request<Incoming>| {
            let in_request = activity.request();
            let router = router.clone();
            async move {
                let response: Result<Response, Infallible> =
                    router.oneshot(request.map(Body::new)).await;
                drop(in_request);
                response
            }
        });
        let serving = self
            .builder
            .serve_connection(TokioIo::new(tls), TowerToHyperService::new(tracked))
            .into_owned();
        tokio::pin!(serving);
        let ended = tokio::select! {
            ended = serving.as_mut() => Some(ended),
            closing = until_closing(&connection, &mut self.stop) => {
                tracing::debug!(%peer, ?closing, "closing the connection");
                match closing {
                    Closing::Dropped => return,
                    Closing::Idle => connection.closed_idle(),
                    Closing::ForRoom | Closing::ShuttingDown => {}
                }
                serving.as_mut().graceful_shutdown();
                // Closing for room, it is dropped if it has not closed a settling later.
                tokio::select! {
                    ended = tokio::time::timeout(DRAIN_TIMEOUT, serving.as_mut()) => ended.ok(),
                    () = connection.activity.asked_to_drop() => return,
                }
            }
        };
        if let Some(Err(error)) = ended {
            tracing::debug!(%peer, %error, "connection ended with an error");
        }
    }
}

/// Resolves when `connection` should close: idle past its timeout, asked to make room for a
/// new one, or the server shutting down.
async fn until_closing(connection: &Connection, stop: &mut watch::Receiver<bool>) -> Closing {
    let idle = async {
        loop {
            match connection.idle_deadline() {
                Some(deadline) if deadline <= tokio::time::Instant::now() => return Closing::Idle,
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => tokio::time::sleep(connection.idle_timeout()).await,
            }
        }
    };
    tokio::select! {
        closing = idle => closing,
        () = connection.activity.asked_to_close() => Closing::ForRoom,
        () = connection.activity.asked_to_drop() => Closing::Dropped,
        _ = stop.wait_for(|stopping| *stopping) => Closing::ShuttingDown,
    }
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
