//! When a watch that streams its lists lists in pages instead, and for how long. Each case is a
//! [`Fallback`]; each streamed list the API server refused or cut off is logged at warn and
//! counted in `kube_retention_list_fallbacks_total{api,reason}`:
//! - A server with the WatchList feature gate off (it is on by default from Kubernetes 1.34)
//!   refuses `sendInitialEvents` with 422 Invalid. The gate is the server's, and one server
//!   serves an API (`/api`, `/apis/GROUP`: an aggregated API such as OpenShift's builds has a
//!   server of its own), so the first refusal sends every list of that API to pages, those of
//!   watches already created included when they first run
//!   ([`Lists::refused`](super::Lists::refused)).
//! - A streamed list cut before its end begins again (kube-runtime's watcher starts over from
//!   [`Event::Init`]). How long it ran tells why:
//!   - Cut at its request's timeout (kube-runtime's 290 s): the list is too long for one request
//!     and would be cut each time, so that watch lists in pages from then on.
//!   - Cut earlier: the API server's watch cache closes a watcher that is sent its initial events
//!     while more new events of its kind arrive than it buffers for it (at most 100 for a
//!     cluster-wide watch, `cacheWatcher.add` in k8s.io/apiserver), so a long list under churn
//!     is cut, and the controller's own catch-up deletions are churn. Pages are read from etcd at
//!     one revision and are not cut by churn, so that list is done in pages. The watch's next
//!     list (after a 410 Gone, or the paged list beginning again) streams: churn passes (a
//!     catch-up ends), and a paged list that outlasts etcd's compaction window (5 minutes) is
//!     refused its next page and begins again, so a watch paged for good at that size would
//!     never finish a list.

use std::time::Duration;

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use prometheus_client::encoding::EncodeLabelSet;
use tokio::time::Instant;

use super::{Events, Lists};

/// A fallback from streamed lists to pages: the API (`/api`, `/apis/GROUP`) and why
/// (`refused`, `timeout`, `cut`: [`Fallback`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ListFallbackLabels {
    pub api: String,
    pub reason: &'static str,
}

/// Why a watch lists in pages though streamed lists are asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// The API's server refuses streamed lists: every watch of it lists in pages.
    Refused,
    /// A streamed list was cut at its request's timeout: that watch lists in pages from then on.
    Timeout,
    /// A streamed list was cut before its timeout: that list is done in pages, the next streams.
    Cut,
}

impl Fallback {
    pub(super) fn labels(self, api: &str) -> ListFallbackLabels {
        let reason = match self {
            Self::Refused => "refused",
            Self::Timeout => "timeout",
            Self::Cut => "cut",
        };
        ListFallbackLabels {
            api: api.to_owned(),
            reason,
        }
    }

    fn says(self) -> &'static str {
        match self {
            Self::Refused => {
                "the API server refuses streamed lists (is its WatchList feature gate off?); \
                 every list of this API is paged from now on"
            }
            Self::Timeout => {
                "a streamed list outlasted its request's timeout and began again; \
                 this watch lists in pages from now on"
            }
            Self::Cut => {
                "a streamed list was cut before its end (the API server cuts one off while more \
                 new events of its kind arrive than it buffers) and began again; \
                 this list is done in pages, the next is streamed"
            }
        }
    }
}

/// Makes a fresh watch; nothing is sent before it is polled.
pub(super) type MakeWatch<K> = Box<dyn Fn() -> Events<K> + Send>;

/// A watch that streams its lists, and pages where [`Fallback`] says.
pub(super) struct Streaming<K> {
    events: Events<K>,
    /// Whether the watch has been polled: it sends its first request then.
    started: bool,
    /// When the streamed list under way began ([`Event::Init`], sent once its request is
    /// answered), if one is.
    listing_since: Option<Instant>,
    /// While the watch is paged, and why: [`Fallback::Cut`] for one list (`true` once that list
    /// has begun: the next begins streamed), the others for good.
    pages: Option<(Fallback, bool)>,
    request_timeout: Duration,
    streamed: MakeWatch<K>,
    paged: MakeWatch<K>,
    lists: Lists,
    /// The API whose server serves this watch.
    served_by: String,
    what: String,
}

impl<K: Send + 'static> Streaming<K> {
    pub(super) fn new(
        lists: Lists,
        served_by: String,
        request_timeout: Duration,
        streamed: MakeWatch<K>,
        paged: MakeWatch<K>,
        what: String,
    ) -> Self {
        Self {
            events: futures::stream::empty().boxed(),
            started: false,
            listing_since: None,
            pages: None,
            request_timeout,
            streamed,
            paged,
            lists,
            served_by,
            what,
        }
    }

    pub(super) async fn next(mut self) -> Option<(Result<Event<K>, watcher::Error>, Self)> {
        if !self.started {
            self.started = true;
            // Refused since this watch was created (by a watch that ran first): no request.
            if self.lists.refused.contains(&self.served_by) {
                tracing::debug!(watch = %self.what, api = %self.served_by, "listing in pages: this API refuses streamed lists");
                self.pages = Some((Fallback::Refused, false));
                self.events = (self.paged)();
            } else {
                self.events = (self.streamed)();
            }
        }
        loop {
            let event = self.events.next().await?;
            match self.pages {
                None => {
                    if let Some(fallback) = self.ends_streaming(&event) {
                        self.page(fallback);
                        continue;
                    }
                    match &event {
                        Ok(Event::Init) => self.listing_since = Some(Instant::now()),
                        Ok(Event::InitDone) => self.listing_since = None,
                        _ => {}
                    }
                }
                Some((Fallback::Cut, false)) if matches!(event, Ok(Event::Init)) => {
                    self.pages = Some((Fallback::Cut, true));
                }
                // The paged watch lists again, after its list or when its list began again
                // (its continue token expired, say); it sends no request before its first page.
                // The streamed watch lists instead, and its own Init goes downstream.
                Some((Fallback::Cut, true)) if matches!(event, Ok(Event::Init)) => {
                    tracing::info!(watch = %self.what, api = %self.served_by, "listing again: streamed");
                    self.pages = None;
                    self.events = (self.streamed)();
                    continue;
                }
                Some(_) => {}
            }
            return Some((event, self));
        }
    }

    /// Why `event`, from the streamed watch, sends it to pages, if it does.
    fn ends_streaming(&self, event: &Result<Event<K>, watcher::Error>) -> Option<Fallback> {
        match (event, self.listing_since) {
            (Err(watcher::Error::WatchStartFailed(kube::Error::Api(status))), _)
                if status.code == 422 =>
            {
                Some(Fallback::Refused)
            }
            // Within a tenth of the timeout of it: the server's clock and the request's start
            // are not this watch's.
            (Ok(Event::Init), Some(since)) if since.elapsed() >= self.request_timeout * 9 / 10 => {
                Some(Fallback::Timeout)
            }
            (Ok(Event::Init), Some(_)) => Some(Fallback::Cut),
            _ => None,
        }
    }

    /// Lists in pages from here, for `fallback`: counted, logged, and the paged watch started.
    fn page(&mut self, fallback: Fallback) {
        if fallback == Fallback::Refused {
            self.lists.refused.insert(&self.served_by);
        }
        let labels = fallback.labels(&self.served_by);
        self.lists.fallbacks.get_or_create(&labels).inc();
        tracing::warn!(watch = %self.what, api = %self.served_by, "{}", fallback.says());
        self.pages = Some((fallback, false));
        self.listing_since = None;
        self.events = (self.paged)();
    }
}
