//! How a watch first lists its kind: streamed (one watch request with `sendInitialEvents`,
//! KEP-3157, served from the API server's watch cache) or in pages (LISTs with a continue token,
//! served from etcd), `--initial-list`.
//!
//! Streamed by default, because paged lists have a limit at scale: every page is read at the
//! revision of the first, and etcd compacts old revisions every 5 minutes. A list of a million
//! Jobs took longer than that, its next page was refused ("The provided continue parameter is
//! too old to display a consistent list result") and the list began again from its first page
//! (docs/benchmarks/envelope.md, a million Jobs). A streamed list has no token to expire.
//!
//! Streamed lists have limits of their own, and pages are the fallback, chosen by what the API
//! server does, never guessed: refused by the server, or cut at the request's timeout or before
//! it ([`Fallback`] names each case; `initial_list/fallback.rs` says when and for how long).
//!
//! kube-runtime's watcher does the listing either way (`InitialListStrategy`); this module only
//! picks the strategy and switches it, so the events downstream are the same in both.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::de::DeserializeOwned;

mod fallback;

use fallback::Streaming;
pub use fallback::{Fallback, ListFallbackLabels};

/// kube-runtime's watch request timeout where `watcher::Config::timeout` sets none.
const DEFAULT_WATCH_TIMEOUT_SECS: u32 = 290;

/// Objects per page of a paged list: kubectl's `--chunk-size` default. A page holds whole
/// objects in memory; the streamed list, the default, has no pages.
pub const PAGE_SIZE: u32 = 500;

/// How a watch first lists its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialList {
    /// One watch request that streams every object, then a bookmark; pages where the API server
    /// refuses that or cuts it off.
    Stream,
    /// LIST requests of [`PAGE_SIZE`] objects each, with a continue token.
    Pages,
}

/// The events of a watch, initial list included.
pub type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// How every watch of this controller lists, shared by them all: the strategy, the page size,
/// the APIs whose server refused a streamed list, and the count of fallbacks to pages.
#[derive(Clone, Debug)]
pub struct Lists {
    initial: InitialList,
    page_size: u32,
    refused: Refused,
    fallbacks: Family<ListFallbackLabels, Counter>,
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
            fallbacks: Family::default(),
        }
    }

    /// Counts each fallback to pages in `fallbacks` (the metric), by API and [`Fallback`].
    pub fn counting_fallbacks(mut self, fallbacks: Family<ListFallbackLabels, Counter>) -> Self {
        self.fallbacks = fallbacks;
        self
    }

    /// Whether the server of `api` (`/api`, `/apis/GROUP`) refused a streamed list: every list
    /// of it since is paged.
    pub fn refused(&self, api: &str) -> bool {
        self.refused.contains(api)
    }

    /// How many streamed lists of `api` the API server refused or cut off, as `fallback` says.
    pub fn fallbacks(&self, api: &str, fallback: Fallback) -> u64 {
        self.fallbacks.get_or_create(&fallback.labels(api)).get()
    }

    /// The watch of `api` with `config`'s selectors, listing as [`Lists`] says; `what` names it
    /// in the log.
    pub fn watch<K>(&self, api: Api<K>, config: watcher::Config, what: String) -> Events<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let paged_config = config.clone().page_size(self.page_size);
        if self.initial == InitialList::Pages {
            return watcher::watcher(api, paged_config).boxed();
        }
        let timeout = config.timeout.unwrap_or(DEFAULT_WATCH_TIMEOUT_SECS);
        let streamed_config = config.streaming_lists();
        let streamed_api = api.clone();
        let start = Streaming::new(
            self.clone(),
            api_of(api.resource_url()),
            Duration::from_secs(u64::from(timeout)),
            Box::new(move || {
                watcher::watcher(streamed_api.clone(), streamed_config.clone()).boxed()
            }),
            Box::new(move || watcher::watcher(api.clone(), paged_config.clone()).boxed()),
            what,
        );
        stream::unfold(start, Streaming::next).boxed()
    }
}

/// The API a resource's URL belongs to: `/api` for the core group, else `/apis/GROUP`.
pub(crate) fn api_of(url: &str) -> String {
    let mut segments = url.trim_start_matches('/').split('/');
    match (segments.next(), segments.next()) {
        (Some("apis"), Some(group)) => format!("/apis/{group}"),
        _ => "/api".to_owned(),
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
