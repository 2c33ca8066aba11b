//! The CloudEvent announcing a cleaned group, sent to the Cleaner's `cloudEventSink` in HTTP
//! binary mode (attributes as `ce-` headers, `data` as the JSON body). Delivery is retried with
//! backoff in its own task: a sink that stays down never blocks or undoes the deletion; it is
//! counted and reported in an Event on the Cleaner.

use std::time::Duration;

use cloudevents::binding::http::{Builder, Serializer};
use cloudevents::message::{BinaryDeserializer, Error as MessageError};
use cloudevents::{Event, EventBuilder, EventBuilderV10};
use http::{Request, header::HeaderValue};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kube_retention_common::cleaner::EVENT_TYPE;
use serde_json::Value;

/// How an event is delivered: attempts `first_backoff` apart, doubling, each given `timeout`.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub attempts: u32,
    pub first_backoff: Duration,
    pub timeout: Duration,
}

impl Default for Delivery {
    /// 8 attempts 1 s, 2 s, 4 s … apart: about two minutes in all.
    fn default() -> Self {
        Self {
            attempts: 8,
            first_backoff: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        }
    }
}

/// The event for the Cleaner `source` (`/apis/retention.dev/v1alpha1/namespaces/NS/cleaners/NAME`).
pub fn event(id: &str, source: &str, data: Value) -> Result<Event, String> {
    EventBuilderV10::new()
        .id(id)
        .ty(EVENT_TYPE)
        .source(source)
        .time(chrono::Utc::now())
        .data("application/json", data)
        .build()
        .map_err(|error| error.to_string())
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
pub fn request(sink: &str, event: Event) -> Result<Request<Vec<u8>>, String> {
    let builder = http::Request::post(sink);
    BinaryDeserializer::deserialize_binary(event, Serializer::new(RequestBuilder(Some(builder))))
        .map_err(|error| error.to_string())
}

/// Delivers `event` to `sink`, retrying with backoff; the last error if every attempt failed.
pub async fn deliver(sink: &str, event: Event, delivery: &Delivery) -> Result<(), String> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|error| format!("no TLS roots: {error}"))?
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let mut backoff = delivery.first_backoff;
    let mut last = String::new();
    for attempt in 1..=delivery.attempts {
        let request = request(sink, event.clone())?.map(|body| Full::new(Bytes::from(body)));
        match tokio::time::timeout(delivery.timeout, client.request(request)).await {
            Ok(Ok(response)) if response.status().is_success() => return Ok(()),
            Ok(Ok(response)) => last = format!("the sink answered {}", response.status()),
            Ok(Err(error)) => last = format!("{error}"),
            Err(_) => last = format!("no answer within {:?}", delivery.timeout),
        }
        tracing::debug!(sink, attempt, error = %last, "CloudEvent not delivered");
        if attempt < delivery.attempts {
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
    Err(format!(
        "{} attempts failed, the last: {last}",
        delivery.attempts
    ))
}
