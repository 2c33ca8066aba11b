//! A mocked API server for what the sink policy learns of the cluster: the controller's
//! learning task started against it (paged lists, so each list is one request), requests told
//! apart by the kind they are for, each kept in the order it came so that a test asserts the
//! exact sequence of calls per kind; ServiceCIDRs, Nodes and the API server's EndpointSlices as
//! the API server sends them, in lists and in watch events.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test file uses a part

use std::collections::BTreeMap;
use std::time::Duration;

use http::Response;
use kube::client::Body;
use kube_retention_apimock::{ApiServer, Received, pair};
use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_io::initial_list::{InitialList, Lists};
use kube_retention_runtime::supervise::Supervised;
use kube_retention_sinks::SharedPolicy;
use kube_retention_sinks::cluster::{Learning, Source};
use kube_retention_sinks::metrics::SinkPolicyMetrics;
use serde_json::{Value, json};
use tower_test::mock::SendResponse;

pub const SERVICE_CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";
pub const NODES: &str = "/api/v1/nodes";
pub const API_SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";

/// The paged list of each kind: 500 objects a page, the `kubernetes` Service's slices only.
pub fn list_line(source: Source) -> String {
    match source {
        Source::ServiceCidrs => format!("GET {SERVICE_CIDRS}?&limit=500"),
        Source::Nodes => format!("GET {NODES}?&limit=500"),
        Source::ApiServerEndpoints => format!(
            "GET {API_SLICES}?&labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes&limit=500"
        ),
    }
}

/// The watch of each kind from resource version `version`.
pub fn watch_line(source: Source, version: u32) -> String {
    let (path, selector) = match source {
        Source::ServiceCidrs => (SERVICE_CIDRS, String::new()),
        Source::Nodes => (NODES, String::new()),
        Source::ApiServerEndpoints => (
            API_SLICES,
            "&labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes".to_owned(),
        ),
    };
    format!(
        "GET {path}?&watch=true&timeoutSeconds=290{selector}&allowWatchBookmarks=true&resourceVersion={version}"
    )
}

/// The learning task against a mocked API server, and what it publishes.
pub struct Cluster {
    pub policy: SharedPolicy,
    pub metrics: SinkPolicyMetrics,
    pub task: Supervised,
    server: ApiServer,
    /// Requests that came for another kind than the one awaited, in order.
    parked: Vec<Received>,
    /// Every request's line, by kind, in the order it came.
    pub lines: BTreeMap<Source, Vec<String>>,
    /// Watches left unanswered: they stay open.
    open: Vec<SendResponse<Response<Body>>>,
}

impl Cluster {
    /// Learning on top of `base`.
    pub fn start(base: SinkPolicy) -> Self {
        let (client, server) = pair();
        let metrics = SinkPolicyMetrics::default();
        let learning = Learning {
            client,
            lists: Lists::new(InitialList::Pages, 500),
            base,
            metrics: metrics.clone(),
        };
        let (policy, task) = learning.spawn();
        Self {
            policy,
            metrics,
            task,
            server,
            parked: Vec::new(),
            lines: BTreeMap::new(),
            open: Vec::new(),
        }
    }

    /// The next request for `source`.
    pub async fn next(&mut self, source: Source) -> Received {
        if let Some(index) = self.parked.iter().position(|request| of(request) == source) {
            return self.parked.remove(index);
        }
        loop {
            let request = self.server.next().await.expect("a request");
            assert_eq!(request.method, "GET", "{}", request.line());
            let kind = of(&request);
            self.lines.entry(kind).or_default().push(request.line());
            if kind == source {
                return request;
            }
            self.parked.push(request);
        }
    }

    /// Answers the next request for `source`, a list, with `items`.
    pub async fn list(&mut self, source: Source, items: Vec<Value>) {
        let request = self.next(source).await;
        request.reply(200, &list(source, items));
    }

    /// Answers the next request for `source`, a watch, with `events` (then it ends, and the
    /// watcher watches again).
    pub async fn events(&mut self, source: Source, events: &[Value]) {
        let request = self.next(source).await;
        assert!(request.query.contains("watch=true"), "{}", request.line());
        let body: String = events.iter().map(|event| format!("{event}\n")).collect();
        request.reply_raw(200, body.into_bytes());
    }

    /// Leaves the next request for `source` unanswered: the watch stays open.
    pub async fn hold(&mut self, source: Source) {
        let request = self.next(source).await;
        self.open.push(request.unanswered());
    }

    /// The lines of `source`'s requests so far.
    pub fn lines(&self, source: Source) -> Vec<String> {
        self.lines.get(&source).cloned().unwrap_or_default()
    }

    /// Whether no further request comes within the apimock's quiet time (an hour: on paused
    /// time only).
    pub async fn quiet(&mut self) -> bool {
        self.parked.is_empty() && self.server.quiet().await
    }

    /// Whether no further request comes within `wait` (on real time).
    pub async fn quiet_for(&mut self, wait: Duration) -> bool {
        self.parked.is_empty() && self.server.next_within(wait).await.is_none()
    }
}

fn of(request: &Received) -> Source {
    match request.path.as_str() {
        SERVICE_CIDRS => Source::ServiceCidrs,
        NODES => Source::Nodes,
        API_SLICES => Source::ApiServerEndpoints,
        other => panic!("a request for none of the three kinds: {other}"),
    }
}

/// A list of `source`'s kind at resource version 1.
pub fn list(source: Source, items: Vec<Value>) -> Value {
    let (api_version, kind) = match source {
        Source::ServiceCidrs => ("networking.k8s.io/v1", "ServiceCIDRList"),
        Source::Nodes => ("v1", "NodeList"),
        Source::ApiServerEndpoints => ("discovery.k8s.io/v1", "EndpointSliceList"),
    };
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "1"},
           "items": items})
}

pub fn service_cidr(name: &str, version: u32, cidrs: &[&str]) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
           "metadata": {"name": name, "resourceVersion": version.to_string()},
           "spec": {"cidrs": cidrs}})
}

/// A Node with `pod_cidr` and an InternalIP, and a status as large as a kubelet's in part.
pub fn node(name: &str, version: u32, pod_cidr: &str, internal_ip: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "resourceVersion": version.to_string(),
                        "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
           "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
           "status": {"addresses": [{"type": "InternalIP", "address": internal_ip},
                                    {"type": "Hostname", "address": name}],
                      "images": [{"names": ["registry.example/app:1"], "sizeBytes": 1}]}})
}

pub fn api_slice(name: &str, version: u32, addresses: &[&str]) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": "default",
                        "resourceVersion": version.to_string(),
                        "labels": {"kubernetes.io/service-name": "kubernetes"}},
           "addressType": "IPv4",
           "endpoints": [{"addresses": addresses, "conditions": {"ready": true}}],
           "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]})
}

/// A watch event of `kind` (`ADDED`, `MODIFIED`, `DELETED`) for `object`.
pub fn event(kind: &str, object: Value) -> Value {
    json!({"type": kind, "object": object})
}

/// The watch's resource version is too old: the watcher lists afresh.
pub fn gone() -> Value {
    json!({"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status", "metadata": {},
           "status": "Failure", "reason": "Expired", "code": 410,
           "message": "too old resource version: 1 (9)"}})
}
