//! A CloudEvent sent to a sink in HTTP binary mode (attributes as `ce-` headers, `data` as the
//! JSON body), retried with backoff: a Cleaner's announcement of a cleaned group, the deletion
//! ledger's. A sink that stays down never blocks or undoes a deletion (only an
//! `archiveBeforeDelete` policy waits for its sink, by choice); it is counted and reported.
//!
//! Every destination passes the sink policy first ([`super::guard`]: the URL, then each
//! resolved address, on every connection); a refused one is never connected to nor retried.
//! What the Event says is only "refused by the sink policy: `<rule>`" or "delivery failed after N
//! attempts": never a status code, a body or a connection error, and every failed attempt
//! lasts the whole timeout, so a tenant cannot tell a closed port from a filtered one, nor an
//! HTTP server from neither. The details go to the controller's debug log.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use cloudevents::binding::http::{Builder, Serializer};
use cloudevents::event::EventBuilderError;
use cloudevents::message::{BinaryDeserializer, Error as MessageError};
use cloudevents::{Event, EventBuilder, EventBuilderV10};
use http::{Request, header::HeaderValue};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kube_retention_common::ledger::Entry;
use kube_retention_common::sink_policy::Refusal;
use serde_json::Value;
use tokio::time::Instant;

use super::SharedPolicy;
use super::guard::{self, Guarded, Lookup};

/// How an event is delivered: attempts `first_backoff` apart, doubling, each pause plus up to as
/// much again of jitter (backon's), so Cleaners failing together do not retry in step; each
/// attempt given `timeout`, and a failed attempt lasts its whole `timeout`, however soon it
/// failed (how long a failure took says nothing about what answered).
#[derive(Debug, Clone)]
pub struct Delivery {
    pub attempts: u32,
    pub first_backoff: Duration,
    pub timeout: Duration,
}

impl Delivery {
    /// The pauses between attempts: `first_backoff` doubling, each with up to as much again of
    /// jitter, without end.
    pub fn pauses(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        ExponentialBuilder::new()
            .with_min_delay(self.first_backoff)
            .with_factor(2.0)
            .with_jitter()
            .without_max_delay()
            .without_max_times()
            .build()
    }
}

impl Default for Delivery {
    /// 8 attempts 1 s, 2 s, 4 s … apart, 10 s each: about three and a half minutes in all.
    fn default() -> Self {
        Self {
            attempts: 8,
            first_backoff: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        }
    }
}

/// An event of `event_type` from `source` (a Cleaner's:
/// `/apis/retention.dev/v1alpha1/namespaces/NS/cleaners/NAME`), at `time` (the sender's clock).
pub fn event(
    event_type: &str,
    id: &str,
    source: &str,
    data: Value,
    time: jiff::Timestamp,
) -> Result<Event, EventBuilderError> {
    EventBuilderV10::new()
        .id(id)
        .ty(event_type)
        .source(source)
        .time(chrono_time(time))
        .data("application/json", data)
        .build()
}

/// The deletion ledger's event of `event_type` carrying `entry`, from `source`: its id is the
/// object's uid and the type (`<uid>/<type>`), so a consumer can drop a repeat, and its subject
/// `Kind/namespace/name`, and its time the entry's. The one shape of a ledger event, whoever
/// sends it.
pub fn ledger_event(
    event_type: &str,
    source: &str,
    entry: &Entry,
) -> Result<Event, LedgerEventError> {
    let data = serde_json::to_value(entry)?;
    let id = format!("{}/{event_type}", entry.uid);
    let subject = format!("{}/{}/{}", entry.kind, entry.namespace, entry.name);
    Ok(EventBuilderV10::new()
        .id(id)
        .ty(event_type)
        .source(source)
        .subject(subject)
        .time(chrono_time(entry.time))
        .data("application/json", data)
        .build()?)
}

/// Why a ledger event could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LedgerEventError {
    #[error("serializing the ledger entry: {0}")]
    Entry(#[from] serde_json::Error),
    #[error("building the CloudEvent: {0}")]
    Event(#[from] EventBuilderError),
}

struct RequestBuilder(Option<http::request::Builder>);

impl Builder<Request<Vec<u8>>> for RequestBuilder {
    fn header(&mut self, key: &str, value: HeaderValue) {
        self.0 = self.0.take().map(|builder| builder.header(key, value));
    }

    fn body(&mut self, bytes: Vec<u8>) -> Result<Request<Vec<u8>>, MessageError> {
        let builder = self.0.take().unwrap_or_default();
        builder.body(bytes).map_err(|error| MessageError::Other {
            source: Box::new(error),
        })
    }

    fn finish(&mut self) -> Result<Request<Vec<u8>>, MessageError> {
        self.body(Vec::new())
    }
}

/// `event` as a binary-mode POST to `sink`.
pub fn request(sink: &str, event: Event) -> Result<Request<Vec<u8>>, MessageError> {
    let builder = http::Request::post(sink);
    BinaryDeserializer::deserialize_binary(event, Serializer::new(RequestBuilder(Some(builder))))
}

/// Why an event was not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undelivered {
    /// The sink policy refused the destination: no connection was attempted, none will be.
    Refused(Refusal),
    /// Every attempt failed: no connection, no answer in time, or an answer other than 2xx.
    Failed { attempts: u32 },
    /// The event or its request could not be built: why.
    Unsendable(String),
}

impl Undelivered {
    /// The note of the Event on the Cleaner: the rule that refused, or that delivery failed;
    /// nothing the sink (or whatever answered in its place) said.
    pub fn note(&self, sink: &str) -> String {
        match self {
            Self::Refused(refusal) => format!(
                "CloudEvent to {sink} refused by the sink policy: {}",
                refusal.what()
            ),
            Self::Failed { attempts } => format!(
                "CloudEvent to {sink} not delivered: delivery failed after {attempts} attempts"
            ),
            Self::Unsendable(error) => format!("CloudEvent to {sink} not sent: {error}"),
        }
    }
}

/// Sends events to sinks the policy allows: TLS with the system's CA certificates, or
/// Mozilla's (webpki-roots) where there are none, as in the static image; plain http too.
pub struct Sender {
    policy: SharedPolicy,
    client: Client<HttpsConnector<Guarded>, Full<Bytes>>,
}

impl Sender {
    /// A sender judging by `policy`: a fixed one (`Arc<SinkPolicy>`), or one its publisher
    /// changes as it learns ([`SharedPolicy`]).
    pub fn new(policy: impl Into<SharedPolicy>) -> Self {
        Self::with_lookup(policy, guard::system_lookup())
    }

    /// A sender resolving names with `lookup`.
    pub fn with_lookup(policy: impl Into<SharedPolicy>, lookup: Lookup) -> Self {
        let policy = policy.into();
        let tls = HttpsConnectorBuilder::new()
            .with_native_roots()
            .unwrap_or_else(|error| {
                tracing::debug!(%error, "no system CA certificates: using webpki-roots");
                HttpsConnectorBuilder::new().with_webpki_roots()
            });
        let connector = tls
            .https_or_http()
            .enable_http1()
            .wrap_connector(Guarded::new(policy.clone(), lookup));
        // No pooled connections: each attempt connects, and so is judged, afresh.
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Self { policy, client }
    }

    /// Waits until the policy is settled (it has heard from everything it learns from).
    pub async fn settled(&self) {
        self.policy.settled().await;
    }

    /// One attempt to deliver `event` to `sink` within `timeout`, judged by the policy in force
    /// (not waiting for it to settle: [`Sender::settled`]). It returns as soon as it fails: the
    /// caller makes a failure last the whole `timeout` ([`Delivery`]), outside whatever it
    /// shares with other sinks.
    pub async fn attempt(&self, sink: &str, event: Event, timeout: Duration) -> Attempted {
        if let Err(refusal) = self.policy.load().check_url(sink) {
            return Attempted::Refused(refusal);
        }
        let request = match request(sink, event) {
            Ok(request) => request.map(|body| Full::new(Bytes::from(body))),
            Err(error) => return Attempted::Unsendable(error.to_string()),
        };
        match tokio::time::timeout(timeout, self.client.request(request)).await {
            Ok(Ok(response)) if response.status().is_success() => Attempted::Delivered,
            Ok(Ok(response)) => {
                Attempted::Failed(format!("the sink answered {}", response.status()))
            }
            Ok(Err(error)) => match guard::refusal(&error) {
                Some(refusal) => Attempted::Refused(refusal.clone()),
                None => Attempted::Failed(guard::chain(&error)),
            },
            Err(_) => Attempted::Failed(format!("no answer within {timeout:?}")),
        }
    }

    /// Delivers `event` to `sink`, retrying with backoff unless the policy refuses it; first
    /// waits until the policy is settled (it has heard from everything it learns from).
    pub async fn deliver(
        &self,
        sink: &str,
        event: Event,
        delivery: &Delivery,
    ) -> Result<(), Undelivered> {
        self.settled().await;
        self.policy
            .load()
            .check_url(sink)
            .map_err(Undelivered::Refused)?;
        let mut pauses = delivery.pauses();
        for attempt in 1..=delivery.attempts {
            let started = Instant::now();
            let error = match self.attempt(sink, event.clone(), delivery.timeout).await {
                Attempted::Delivered => return Ok(()),
                Attempted::Refused(refusal) => return Err(Undelivered::Refused(refusal)),
                Attempted::Unsendable(error) => return Err(Undelivered::Unsendable(error)),
                Attempted::Failed(error) => error,
            };
            tracing::debug!(sink, attempt, %error, "CloudEvent not delivered");
            tokio::time::sleep_until(started + delivery.timeout).await;
            if attempt < delivery.attempts {
                tokio::time::sleep(pauses.next().unwrap_or(delivery.first_backoff)).await;
            }
        }
        Err(Undelivered::Failed {
            attempts: delivery.attempts,
        })
    }
}

/// What one attempt to deliver came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// The sink answered 2xx.
    Delivered,
    /// The sink policy refused the destination: no connection was attempted, none will be.
    Refused(Refusal),
    /// No connection, no answer in time, or an answer other than 2xx: why, for the debug log.
    Failed(String),
    /// The request could not be built: why.
    Unsendable(String),
}

/// `time` as the CloudEvents SDK takes it (chrono's).
fn chrono_time(time: jiff::Timestamp) -> chrono::DateTime<chrono::Utc> {
    i64::try_from(time.as_nanosecond())
        .map(chrono::DateTime::from_timestamp_nanos)
        .unwrap_or_default()
}
