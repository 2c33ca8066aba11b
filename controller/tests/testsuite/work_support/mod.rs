//! Work for the executor's tests: actions on Jobs in a namespace, Events, and how to name them.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part; fixtures unwrap

use jiff::Timestamp;
use kube::runtime::events::EventType;
use kube_retention_common::kinds::Resource;
use kube_retention_common::{Registry, StampChange};
use kube_retention_controller::executor::queue::{EventWork, Work};
use kube_retention_state::{Action, EventTarget, ObjectKey, Reason, Warning};

/// The Job `name` in `namespace`.
pub fn key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        kind: Registry::builtin().named("Job.batch").unwrap(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

pub fn target(name: &str) -> EventTarget {
    EventTarget {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: name.into(),
        uid: None,
    }
}

pub fn deletion(namespace: &str, name: &str) -> Action {
    Action::Delete {
        key: key(namespace, name),
        uid: "uid".into(),
        resource_version: "1".into(),
        reason: Reason::Ttl,
        eligible_at: Timestamp::UNIX_EPOCH,
        event_target: target(name),
        policy: None,
        ledger: None,
    }
}

pub fn stamping(namespace: &str, name: &str, at: Timestamp) -> Action {
    Action::Stamp {
        key: key(namespace, name),
        change: StampChange::Set(at),
        resource_version: "1".into(),
    }
}

pub fn labelling(namespace: &str, name: &str) -> Action {
    Action::Label {
        key: key(namespace, name),
    }
}

pub fn warning(namespace: &str, name: &str) -> Action {
    Action::Warn {
        key: key(namespace, name),
        target: target(name),
        warning: Warning::DeleteFailing,
        note: "failing".into(),
    }
}

/// A deletion Event on the Job `name`.
pub fn event(namespace: &str, name: &str) -> Work {
    Work::Event(EventWork {
        target: target(name),
        namespace: namespace.into(),
        type_: EventType::Normal,
        reason: "RetentionExpired",
        action: "Delete",
        note: format!("Deleted Job {name}"),
    })
}

/// `namespace/name` of the work.
pub fn named(work: &Work) -> String {
    match work {
        Work::Action(action, _) => format!("{}/{}", action.key().namespace, action.key().name),
        Work::Event(event) => format!("{}/{}", event.namespace, event.target.name),
    }
}

/// Jobs, as the executor's work names their kind.
pub fn jobs() -> Resource {
    Resource::new("batch", "v1", "Job", "jobs")
}

/// The requests a [`recording_client`]'s API server saw, as `METHOD path`.
pub type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A client whose API server answers every request with a success Status and records it.
pub fn recording_client() -> (kube::Client, Seen) {
    let seen = Seen::default();
    let log = seen.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let line = format!("{} {}", request.method(), request.uri().path());
        log.lock().unwrap().push(line);
        async {
            let status = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}"#;
            let body = kube::client::Body::from(status.to_vec());
            Ok::<_, std::convert::Infallible>(http::Response::new(body))
        }
    });
    (kube::Client::new(service, "default"), seen)
}
