//! The controller's watches, started and stopped per kind at run time: one paged LIST and then a
//! watch for each kind (label-selected where the kind's entry says so), and for kinds watched
//! through the managed label with stragglers to find, a metadata-only watch of every object.

use std::collections::HashMap;

use futures::stream::{AbortHandle, Abortable, BoxStream, SelectAll};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::kinds::{Entry, KindId, Watch};

use crate::kinds::api_resource;
use crate::watch_backoff::WatchBackoff;

/// What a watch delivered: whole objects, the metadata of a kind's unfiltered watch, retention
/// policies, or namespaces (for policies' `namespaceSelector`).
pub enum Observed {
    Object(KindId, Result<Event<DynamicObject>, watcher::Error>),
    Metadata(
        KindId,
        Result<Event<PartialObjectMeta<DynamicObject>>, watcher::Error>,
    ),
    Policy(Result<Event<RetentionPolicy>, watcher::Error>),
    ClusterPolicy(Result<Event<ClusterRetentionPolicy>, watcher::Error>),
    Namespace(Result<Event<PartialObjectMeta<Namespace>>, watcher::Error>),
}

pub struct Watches {
    client: Client,
    page_size: u32,
    streams: SelectAll<BoxStream<'static, Observed>>,
    running: HashMap<KindId, (Watch, Vec<AbortHandle>)>,
}

impl Watches {
    pub fn new(client: Client, page_size: u32) -> Self {
        Self {
            client,
            page_size,
            streams: stream::select_all(Vec::new()),
            running: HashMap::new(),
        }
    }

    pub fn mode(&self, kind: KindId) -> Option<&Watch> {
        self.running.get(&kind).map(|(mode, _)| mode)
    }

    pub fn is_running(&self, kind: KindId) -> bool {
        self.running.contains_key(&kind)
    }

    /// Watches `kind` as its entry says.
    pub fn start(&mut self, kind: KindId, entry: &Entry) {
        self.ensure(kind, entry, Some(entry.watch.clone()));
    }

    /// Watches `kind` in `mode` (a policy's kinds: every object), restarting the watch — a fresh
    /// list, every object judged again — when the mode changes or `relist` is set; `None` stops
    /// it.
    pub fn ensure(&mut self, kind: KindId, entry: &Entry, mode: Option<Watch>) {
        if self.running.get(&kind).map(|(running, _)| running) == mode.as_ref() {
            return;
        }
        self.stop(kind);
        if let Some(mode) = mode {
            self.launch(kind, entry, mode);
        }
    }

    /// Lists `kind` afresh in its current mode.
    pub fn relist(&mut self, kind: KindId, entry: &Entry) {
        if let Some((mode, _)) = self.running.get(&kind) {
            let mode = mode.clone();
            self.stop(kind);
            self.launch(kind, entry, mode);
        }
    }

    fn launch(&mut self, kind: KindId, entry: &Entry, mode: Watch) {
        let resource = api_resource(&entry.resource);
        let config = watcher::Config::default().page_size(self.page_size);
        let mut handles = Vec::new();
        if mode == Watch::Managed {
            let metadata: Api<PartialObjectMeta<DynamicObject>> =
                Api::all_with(self.client.clone(), &resource);
            let unlabelled = watcher::watcher(metadata, config.clone())
                .backoff(WatchBackoff::default())
                .map(move |event| Observed::Metadata(kind, event));
            handles.push(self.push(unlabelled.boxed()));
        }
        let config = match mode.selector() {
            Some(selector) => config.labels(selector),
            None => config,
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let objects = watcher::watcher(api, config)
            .backoff(WatchBackoff::default())
            .map(move |event| Observed::Object(kind, event));
        handles.push(self.push(objects.boxed()));
        self.running.insert(kind, (mode, handles));
    }

    /// Stops the watches of `kind`; they deliver nothing more.
    pub fn stop(&mut self, kind: KindId) {
        for handle in self
            .running
            .remove(&kind)
            .into_iter()
            .flat_map(|(_, handles)| handles)
        {
            handle.abort();
        }
    }

    /// Watches RetentionPolicies, ClusterRetentionPolicies and namespaces' metadata.
    pub fn start_policies(&mut self) {
        let config = watcher::Config::default();
        let policies = watcher::watcher(
            Api::<RetentionPolicy>::all(self.client.clone()),
            config.clone(),
        )
        .backoff(WatchBackoff::default())
        .map(Observed::Policy);
        self.push(policies.boxed());
        let cluster = watcher::watcher(
            Api::<ClusterRetentionPolicy>::all(self.client.clone()),
            config.clone(),
        )
        .backoff(WatchBackoff::default())
        .map(Observed::ClusterPolicy);
        self.push(cluster.boxed());
        let namespaces: Api<PartialObjectMeta<Namespace>> = Api::all(self.client.clone());
        let namespaces = watcher::watcher(namespaces, config)
            .backoff(WatchBackoff::default())
            .map(Observed::Namespace);
        self.push(namespaces.boxed());
    }

    fn push(&mut self, events: BoxStream<'static, Observed>) -> AbortHandle {
        let (handle, registration) = AbortHandle::new_pair();
        self.streams
            .push(Abortable::new(events, registration).boxed());
        handle
    }

    /// The next event of any watch; pending (never `None`) while no watch runs.
    pub async fn next(&mut self) -> Observed {
        loop {
            match self.streams.next().await {
                Some(observed) => return observed,
                None => std::future::pending::<()>().await,
            }
        }
    }
}
