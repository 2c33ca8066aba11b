//! One source's watch, as updates for the index's owner: a list (streamed or in pages, as every
//! watch of the controller lists: [`Lists`]) arrives whole, as [`Update::Listed`], then each
//! change; an error is an [`Update::Failed`] saying why, after which the watch waits before it
//! tries again. A source the controller may not read (403) or the cluster does not serve (404:
//! ServiceCIDRs before Kubernetes 1.33) is tried again every [`UNAVAILABLE_RETRY`], so an admin's
//! grant or an upgrade counts within it without a request every few seconds meanwhile; any
//! other failure retries as every watch does ([`watch_backoff`]).

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use kube::Api;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event, ExponentialBackoff};
use kube_retention_common::sink_policy::Range;

use super::Source;
use super::objects::Says;
use kube_retention_io::initial_list::{Events, Lists};
use kube_retention_io::watch_backoff::{LONGEST, watch_backoff};

/// How long a source that is forbidden or not served waits before it is tried again.
pub const UNAVAILABLE_RETRY: Duration = Duration::from_secs(30);

/// What a source's watch says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// A fresh list: these objects, by name, and no others.
    Listed(Source, Vec<(String, Vec<Range>)>),
    /// An object now says these ranges.
    Applied(Source, String, Vec<Range>),
    /// An object is gone.
    Deleted(Source, String),
    /// The watch failed; it tries again.
    Failed(Source, Unavailable),
}

/// Why a source's watch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// The controller may not list or watch it (403).
    Forbidden,
    /// The cluster does not serve it (404).
    NotServed,
    /// Anything else, as the watcher said it.
    Failed(String),
}

impl Unavailable {
    /// Why `error` happened.
    pub fn of(error: &watcher::Error) -> Self {
        let code = match error {
            watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            | watcher::Error::WatchFailed(kube::Error::Api(status))
            | watcher::Error::WatchError(status) => Some(status.code),
            _ => None,
        };
        match code {
            Some(403) => Self::Forbidden,
            Some(404) => Self::NotServed,
            _ => Self::Failed(error.to_string()),
        }
    }

    /// Its name in metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::NotServed => "not_served",
            Self::Failed(_) => "failed",
        }
    }

    /// How long to wait before trying again.
    fn pause(&self, backoff: &mut ExponentialBackoff) -> Duration {
        match self {
            Self::Forbidden | Self::NotServed => UNAVAILABLE_RETRY,
            Self::Failed(_) => backoff.next().unwrap_or(LONGEST),
        }
    }
}

struct Watching<K> {
    events: Events<K>,
    /// The objects of the list under way, if one is.
    listing: Option<Vec<(String, Vec<Range>)>>,
    backoff: ExponentialBackoff,
    /// How long to wait before polling again, after a failure.
    pause: Option<Duration>,
}

/// The updates of `K`'s watch through `api`, selected by `config`.
pub fn updates<K: Says>(
    lists: &Lists,
    api: Api<K>,
    config: watcher::Config,
) -> BoxStream<'static, Update> {
    let events = lists.watch(api, config, K::SOURCE.kind().to_owned());
    let watching = Watching {
        events,
        listing: None,
        backoff: watch_backoff(),
        pause: None,
    };
    stream::unfold(watching, next::<K>).boxed()
}

async fn next<K: Says>(mut watching: Watching<K>) -> Option<(Update, Watching<K>)> {
    if let Some(pause) = watching.pause.take() {
        tokio::time::sleep(pause).await;
    }
    let source = K::SOURCE;
    loop {
        let update = match watching.events.next().await? {
            Ok(event) => {
                watching.backoff.reset();
                match event {
                    Event::Init => {
                        watching.listing = Some(Vec::new());
                        continue;
                    }
                    Event::InitApply(object) => {
                        let listing = watching.listing.get_or_insert_default();
                        listing.push((object.name(), object.ranges()));
                        continue;
                    }
                    Event::InitDone => {
                        Update::Listed(source, watching.listing.take().unwrap_or_default())
                    }
                    Event::Apply(object) => Update::Applied(source, object.name(), object.ranges()),
                    Event::Delete(object) => Update::Deleted(source, object.name()),
                }
            }
            Err(error) => {
                let why = Unavailable::of(&error);
                watching.pause = Some(why.pause(&mut watching.backoff));
                watching.listing = None;
                Update::Failed(source, why)
            }
        };
        return Some((update, watching));
    }
}
