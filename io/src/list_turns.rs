//! Lists take turns (`--list-concurrency`): each list holds objects in memory (a page, or the
//! events in flight of a streamed one) and loads the API server, and 100 kinds listed at once
//! would do so 100 times over. A watch's events pass through [`taking_turns`], which holds one
//! of [`ListTurns`]' permits while its kind lists. The controller's watches and the Cleaners'
//! share one [`ListTurns`], so `--list-concurrency` bounds them together.

use std::sync::Arc;

use futures::{StreamExt, stream};
use kube::runtime::watcher::{self, Event};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::initial_list::Events;

/// The permits lists take turns with: `--list-concurrency` of them (at least one), shared by
/// every clone.
#[derive(Clone)]
pub struct ListTurns(Arc<Semaphore>);

impl ListTurns {
    pub fn new(concurrency: u32) -> Self {
        let permits = usize::try_from(concurrency).unwrap_or(usize::MAX).max(1);
        Self(Arc::new(Semaphore::new(permits)))
    }

    /// `events`, listing only in their turn ([`taking_turns`]).
    pub fn taking<K: Send + 'static>(
        &self,
        events: impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    ) -> Events<K> {
        taking_turns(events, self.0.clone())
    }
}

/// `events` that list only while holding one of `lists`' permits: from before the first poll
/// (the watcher sends its first request, a page or a streamed list, when first polled) or from a
/// relist's [`Event::Init`], to the list's end or to an error (the retry queues again, so a kind
/// that keeps failing cannot starve the others). A streamed list's relist shows itself only once
/// its request was answered: it holds a connection while it waits its turn, but reads nothing.
pub fn taking_turns<K: Send + 'static>(
    events: impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    lists: Arc<Semaphore>,
) -> Events<K> {
    let start: (Events<K>, Option<OwnedSemaphorePermit>, bool) = (events.boxed(), None, true);
    stream::unfold(start, move |(mut events, mut permit, first)| {
        let lists = lists.clone();
        async move {
            if first {
                permit = lists.clone().acquire_owned().await.ok();
            }
            let event = events.next().await?;
            match &event {
                Ok(Event::Init) if permit.is_none() => permit = lists.acquire_owned().await.ok(),
                Ok(Event::InitDone) | Err(_) => permit = None,
                Ok(_) => {}
            }
            Some((event, (events, permit, false)))
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn listing(events: Vec<Event<u8>>, lists: &Arc<Semaphore>) -> Events<u8> {
        let events = stream::iter(events.into_iter().map(Ok)).chain(stream::pending());
        taking_turns(events, lists.clone())
    }

    /// The next event if there is one now, as its debug form (events are not comparable).
    fn next(events: &mut Events<u8>) -> Option<String> {
        let event = events.next().now_or_never().flatten()?;
        Some(format!("{:?}", event.ok()?))
    }

    fn shown(event: Event<u8>) -> Option<String> {
        Some(format!("{event:?}"))
    }

    #[tokio::test]
    async fn kinds_take_turns_to_list_and_a_relist_keeps_its_turn() {
        let lists = Arc::new(Semaphore::new(1));
        let mut first = listing(
            vec![
                Event::Init,
                Event::InitApply(1),
                Event::Init,
                Event::InitDone,
                Event::Apply(2),
            ],
            &lists,
        );
        let mut second = listing(
            vec![Event::Init, Event::InitApply(3), Event::InitDone],
            &lists,
        );
        assert_eq!(next(&mut first), shown(Event::Init));
        assert_eq!(next(&mut second), None, "waits while the first kind lists");
        assert_eq!(next(&mut first), shown(Event::InitApply(1)));
        assert_eq!(
            next(&mut first),
            shown(Event::Init),
            "a list restarted keeps its permit"
        );
        assert_eq!(next(&mut second), None);
        assert_eq!(next(&mut first), shown(Event::InitDone));
        assert_eq!(next(&mut second), shown(Event::Init));
        assert_eq!(
            next(&mut first),
            shown(Event::Apply(2)),
            "watching needs no turn"
        );
        assert_eq!(next(&mut second), shown(Event::InitApply(3)));
        assert_eq!(next(&mut second), shown(Event::InitDone));
        assert_eq!(lists.available_permits(), 1);
    }

    /// A streamed list sends its request when first polled and shows [`Event::Init`] only once
    /// answered, so a kind waiting its turn is not polled at all.
    #[tokio::test]
    async fn a_kind_waiting_its_turn_does_not_poll_its_watch() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        let lists = Arc::new(Semaphore::new(1));
        let mut first = listing(vec![Event::Init, Event::InitDone], &lists);
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = polls.clone();
        let mut events = vec![Event::Init, Event::InitApply(3), Event::InitDone].into_iter();
        let watch = stream::poll_fn(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            std::task::Poll::Ready(events.next().map(Ok))
        });
        let mut second = taking_turns(watch, lists.clone());
        assert_eq!(next(&mut first), shown(Event::Init));
        assert_eq!(next(&mut second), None);
        assert_eq!(
            polls.load(Ordering::Relaxed),
            0,
            "no request before its turn"
        );
        assert_eq!(next(&mut first), shown(Event::InitDone));
        assert_eq!(next(&mut second), shown(Event::Init));
        assert_eq!(next(&mut second), shown(Event::InitApply(3)));
        assert_eq!(next(&mut second), shown(Event::InitDone));
        assert_eq!(lists.available_permits(), 1);
    }
}
