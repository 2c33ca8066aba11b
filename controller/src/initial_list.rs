//! How a watch first lists its kind: streamed (one watch request with `sendInitialEvents`,
//! KEP-3157, served from the API server's watch cache) or in pages (LISTs with a continue token,
//! served from etcd), `--initial-list`.
//!
//! Streamed by default, because paged lists have a limit at scale: every page is read at the
//! revision of the first, and etcd compacts old revisions every 5 minutes. A list of a million
//! Jobs took longer than that, its next page was refused ("The provided continue parameter is
//! too old to display a consistent list result") and the list began again from its first page
//! (docs/benchmarks.md, the million-Job section). A streamed list has no token to expire.
//!
//! Pages remain the fallback, chosen by what the API server does, never guessed:
//! - A server with the WatchList feature gate off (it is on by default from Kubernetes 1.34)
//!   refuses `sendInitialEvents` with 422 Invalid. The gate is the server's, and one server
//!   serves an API (`/api`, `/apis/GROUP`: an aggregated API such as OpenShift's builds has a
//!   server of its own), so the first refusal sends every list of that API to pages, those of
//!   watches already created included when they first run ([`Lists::refused`]).
//! - A streamed list cut before its end began again (kube-runtime's watcher starts over from
//!   [`Event::Init`]). The watch request's timeout is also the streamed list's, so a list too long
//!   for one request would be cut again each time; that kind's watch lists in pages from then
//!   on, until the watch itself is started afresh.
//!
//! kube-runtime's watcher does the listing either way (`InitialListStrategy`); this module only
//! picks the strategy and switches it, so the events downstream are the same in both.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// How a watch first lists its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialList {
    /// One watch request that streams every object, then a bookmark; pages where the API server
    /// refuses that or cuts it off.
    Stream,
    /// LIST requests of `--page-size` objects each, with a continue token.
    Pages,
}

/// The events of a watch, initial list included.
pub type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// How every watch of this controller lists, shared by them all: the strategy, the page size,
/// and the APIs whose server refused a streamed list.
#[derive(Clone, Debug)]
pub struct Lists {
    initial: InitialList,
    page_size: u32,
    refused: Refused,
}

/// The APIs (`/api`, `/apis/GROUP`) whose server refused a streamed list, shared by every watch.
#[derive(Clone, Debug, Default)]
struct Refused(Arc<Mutex<HashSet<String>>>);

impl Refused {
    fn contains(&self, api: &str) -> bool {
        self.apis().contains(api)
    }

    fn insert(&self, api: &str) {
        self.apis().insert(api.to_owned());
    }

    fn apis(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Lists {
    pub fn new(initial: InitialList, page_size: u32) -> Self {
        Self {
            initial,
            page_size,
            refused: Refused::default(),
        }
    }

    /// Whether the server of `api` (`/api`, `/apis/GROUP`) refused a streamed list: every list
    /// of it since is paged.
    pub fn refused(&self, api: &str) -> bool {
        self.refused.contains(api)
    }

    /// The watch of `api` with `config`'s selectors, listing as [`Lists`] says; `what` names it
    /// in the log.
    pub fn watch<K>(&self, api: Api<K>, config: watcher::Config, what: String) -> Events<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let paged = config.clone().page_size(self.page_size);
        if self.initial == InitialList::Pages {
            return watcher::watcher(api, paged).boxed();
        }
        let served_by = api_of(api.resource_url());
        let streamed = watcher::watcher(api.clone(), config.streaming_lists()).boxed();
        let start = Streaming {
            events: streamed,
            started: false,
            listing: false,
            refused: self.refused.clone(),
            served_by,
            fallback: Some(Box::new(move || watcher::watcher(api, paged).boxed())),
            what,
        };
        stream::unfold(start, Streaming::next).boxed()
    }
}

/// The API a resource's URL belongs to: `/api` for the core group, else `/apis/GROUP`.
fn api_of(url: &str) -> String {
    let mut segments = url.trim_start_matches('/').split('/');
    match (segments.next(), segments.next()) {
        (Some("apis"), Some(group)) => format!("/apis/{group}"),
        _ => "/api".to_owned(),
    }
}

/// A streamed watch, and the paged one that takes over from it.
struct Streaming<K> {
    events: Events<K>,
    /// Whether the streamed watch has been polled: it sends its request then.
    started: bool,
    /// Between [`Event::Init`] and [`Event::InitDone`].
    listing: bool,
    refused: Refused,
    /// The API whose server serves this watch.
    served_by: String,
    /// The paged watch, until it takes over.
    fallback: Option<Box<dyn FnOnce() -> Events<K> + Send>>,
    what: String,
}

impl<K: Send + 'static> Streaming<K> {
    async fn next(mut self) -> Option<(Result<Event<K>, watcher::Error>, Self)> {
        if !self.started {
            self.started = true;
            // Refused since this watch was created (by a watch that ran first): no request.
            if self.refused.contains(&self.served_by)
                && let Some(paged) = self.fallback.take()
            {
                self.events = paged();
            }
        }
        loop {
            let event = self.events.next().await?;
            if let Some((reason, refusal)) = ends_streaming(&event, self.listing)
                && let Some(paged) = self.fallback.take()
            {
                if refusal {
                    self.refused.insert(&self.served_by);
                }
                tracing::warn!(watch = %self.what, api = %self.served_by, "{reason}; listing in pages instead");
                self.events = paged();
                self.listing = false;
                continue;
            }
            match &event {
                Ok(Event::Init) => self.listing = true,
                Ok(Event::InitDone) => self.listing = false,
                _ => {}
            }
            return Some((event, self));
        }
    }
}

/// Why `event` ends streaming for a watch, if it does, and whether the server refused streamed
/// lists (and so will refuse every other of its API): the server refused this one, or it was
/// cut before its end (`listing`: it had begun).
fn ends_streaming<K>(
    event: &Result<Event<K>, watcher::Error>,
    listing: bool,
) -> Option<(&'static str, bool)> {
    match event {
        Err(watcher::Error::WatchStartFailed(kube::Error::Api(status))) if status.code == 422 => {
            Some((
                "the API server refuses streamed lists (is its WatchList feature gate off?)",
                true,
            ))
        }
        Ok(Event::Init) if listing => Some((
            "a streamed list was cut before its end and began again",
            false,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_is_named_by_its_path() {
        assert_eq!(api_of("/api/v1/pods"), "/api");
        assert_eq!(api_of("/apis/batch/v1/jobs"), "/apis/batch");
        assert_eq!(
            api_of("/apis/build.openshift.io/v1/builds"),
            "/apis/build.openshift.io"
        );
        assert_eq!(
            api_of("/apis/batch/v1/namespaces/team-a/jobs"),
            "/apis/batch"
        );
    }
}
