//! The controller's watches, started and stopped per kind at run time: one paged LIST and then a
//! watch for each kind (label-selected where the kind's entry says so), and for kinds watched
//! through the managed label with stragglers to find, a metadata-only watch of every object.

use std::collections::HashMap;

use futures::stream::{AbortHandle, Abortable, BoxStream, SelectAll};
use futures::{StreamExt, stream};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use kube_retention_common::kinds::{Entry, KindId, Watch};

use crate::kinds::api_resource;
use crate::watch_backoff::WatchBackoff;

/// What a watch delivered: whole objects, or the metadata of a kind's unfiltered watch.
pub enum Observed {
    Object(KindId, Result<Event<DynamicObject>, watcher::Error>),
    Metadata(
        KindId,
        Result<Event<PartialObjectMeta<DynamicObject>>, watcher::Error>,
    ),
}

pub struct Watches {
    client: Client,
    page_size: u32,
    streams: SelectAll<BoxStream<'static, Observed>>,
    running: HashMap<KindId, Vec<AbortHandle>>,
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

    pub fn is_running(&self, kind: KindId) -> bool {
        self.running.contains_key(&kind)
    }

    pub fn start(&mut self, kind: KindId, entry: &Entry) {
        if self.is_running(kind) {
            return;
        }
        let resource = api_resource(&entry.resource);
        let config = watcher::Config::default().page_size(self.page_size);
        let mut handles = Vec::new();
        if entry.watch == Watch::Managed {
            let metadata: Api<PartialObjectMeta<DynamicObject>> =
                Api::all_with(self.client.clone(), &resource);
            let unlabelled = watcher::watcher(metadata, config.clone())
                .backoff(WatchBackoff::default())
                .map(move |event| Observed::Metadata(kind, event));
            handles.push(self.push(unlabelled.boxed()));
        }
        let config = match entry.watch.selector() {
            Some(selector) => config.labels(selector),
            None => config,
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let objects = watcher::watcher(api, config)
            .backoff(WatchBackoff::default())
            .map(move |event| Observed::Object(kind, event));
        handles.push(self.push(objects.boxed()));
        self.running.insert(kind, handles);
    }

    /// Stops the watches of `kind`; they deliver nothing more.
    pub fn stop(&mut self, kind: KindId) {
        for handle in self.running.remove(&kind).into_iter().flatten() {
            handle.abort();
        }
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
