//! Watch sets against a mocked API server, on paused time: two owners' sets (the controller's
//! kinds and the Cleaners' targets) sharing one [`ListTurns`] list one at a time; a watch that
//! is stopped delivers nothing more; a watch whose stream ends is its group's fault.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use kube_retention_io::initial_list::{InitialList, Lists};
use kube_retention_io::list_turns::ListTurns;
use kube_retention_io::watch_set::{FORWARDED_BYTES, Held, WatchSet, Watching};
use kube_retention_runtime::object_memory::{DEFAULT_BYTES, ObjectMemory};
use kube_retention_runtime::supervise::{self, TaskEnd};
use serde_json::json;

type Set = WatchSet<&'static str, Shown>;

/// An event as a test shows it: its watch's key, its name, and what it is said to hold.
struct Shown(&'static str, String, usize);

impl Held for Shown {
    fn held(&self) -> usize {
        self.2
    }
}

/// Two sets sharing one turn, as the controller and the Cleaners do under
/// `--list-concurrency=1`; and the supervised group of their tasks.
fn two_owners() -> (Set, Set, supervise::Supervised) {
    two_owners_within(ObjectMemory::new(DEFAULT_BYTES))
}

/// Two owners' sets whose events are charged to `memory`.
fn two_owners_within(memory: ObjectMemory) -> (Set, Set, supervise::Supervised) {
    let (watching, group) = watching(memory);
    (
        WatchSet::new(watching.clone()),
        WatchSet::new(watching),
        group,
    )
}

/// One owner's set, and the supervised group of its tasks.
fn one_owner() -> (Set, supervise::Supervised) {
    let (watching, group) = watching(ObjectMemory::new(DEFAULT_BYTES));
    (WatchSet::new(watching), group)
}

fn watching(memory: ObjectMemory) -> (Watching, supervise::Supervised) {
    let (tasks, group) = supervise::group("watches");
    let watching = Watching {
        lists: Lists::new(InitialList::Pages, 500),
        turns: ListTurns::new(1),
        tasks,
        memory,
    };
    (watching, group)
}

/// Watches the ConfigMaps of `namespace` under `key`, each event shown as its name.
fn watch(set: &mut Set, client: &kube::Client, key: &'static str, namespace: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let events = set
        .objects(api, watcher::Config::default(), namespace.into())
        .map(move |event| {
            let shown = match event {
                Ok(Event::InitApply(map) | Event::Apply(map)) => map.metadata.name.unwrap(),
                Ok(Event::Init) => "Init".into(),
                Ok(Event::InitDone) => "InitDone".into(),
                Ok(Event::Delete(_)) => "Delete".into(),
                Err(error) => error.to_string(),
            };
            Shown(key, shown, 0)
        });
    set.start(key, format!("ConfigMaps in {namespace}"), events.boxed());
}

fn list(names: &[&str]) -> serde_json::Value {
    let items: Vec<_> = names
        .iter()
        .map(|name| json!({"metadata": {"name": name, "resourceVersion": "5"}}))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMapList",
           "metadata": {"resourceVersion": "7"}, "items": items})
}

#[tokio::test(start_paused = true)]
async fn owners_sharing_a_turn_list_one_at_a_time() {
    let (client, mut server) = kube_retention_apimock::pair();
    let (mut kinds, mut cleaners, _group) = two_owners();
    watch(&mut kinds, &client, "kinds", "team-a");
    watch(&mut cleaners, &client, "cleaners", "team-b");
    let first = server.next().await.expect("one list");
    assert!(!first.query.contains("watch=true"), "{}", first.line());
    let listed = if first.path.contains("team-a") {
        "team-a"
    } else {
        "team-b"
    };
    assert!(
        server.next_within(Duration::from_secs(60)).await.is_none(),
        "the other owner's list waits for the turn"
    );
    first.reply(200, &list(&["one"]));
    // The list ended: its watch and the other owner's list follow, in either order.
    let mut after = Vec::new();
    let mut open = Vec::new();
    for _ in 0..2 {
        let received = server.next().await.expect("a request");
        after.push((
            received.path.contains(listed),
            received.query.contains("watch=true"),
        ));
        if received.query.contains("watch=true") {
            open.push(received.unanswered());
        } else {
            received.reply(200, &list(&["two"]));
        }
    }
    after.sort();
    assert_eq!(
        after,
        [(false, false), (true, true)],
        "the first's watch, the other's list"
    );
    let (owner, other) = match listed {
        "team-a" => (&mut kinds, &mut cleaners),
        _ => (&mut cleaners, &mut kinds),
    };
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(owner.next().await.0.1);
    }
    assert_eq!(seen, ["Init", "one", "InitDone"]);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(other.next().await.0.1);
    }
    assert_eq!(seen, ["Init", "two", "InitDone"]);
}

#[tokio::test(start_paused = true)]
async fn a_stopped_watch_delivers_nothing_more() {
    let (mut set, _group) = one_owner();
    let (sender, receiver) = futures::channel::mpsc::unbounded();
    set.start("replayed", "replayed".into(), receiver.boxed());
    sender
        .unbounded_send(Shown("replayed", "first".into(), 0))
        .unwrap();
    assert_eq!(set.next().await.0.1, "first");
    assert!(set.is_running(&"replayed"));
    set.stop(&"replayed");
    assert!(!set.is_running(&"replayed"));
    sender
        .unbounded_send(Shown("replayed", "second".into(), 0))
        .ok();
    let next = tokio::time::timeout(Duration::from_secs(3600), set.next()).await;
    assert!(next.is_err(), "nothing after the stop");
}

#[tokio::test(start_paused = true)]
async fn a_watch_whose_stream_ends_is_its_groups_fault() {
    let (mut set, _other, group) = two_owners();
    set.start(
        "ended",
        "ended".into(),
        futures::stream::empty::<Shown>().boxed(),
    );
    let ended = tokio::time::timeout(Duration::from_secs(60), group)
        .await
        .expect("the group reports the end");
    assert_eq!(ended.task, "watches/ended");
    assert_eq!(
        ended.outcome,
        TaskEnd::Failed("the watch stream ended".into())
    );
}

/// A watch decodes ahead of the loop no more than FORWARDED_BYTES of what its events hold:
/// events of 3 MiB, the loop not reading, stop at two forwarded and the third decoded and
/// waiting for room; each one the loop takes lets one more through. Counted in events only,
/// seventeen would have been decoded ahead.
#[tokio::test(start_paused = true)]
async fn a_watch_decodes_ahead_no_more_than_its_bytes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let (mut set, _group) = one_owner();
    let decoded = Arc::new(AtomicUsize::new(0));
    let counted = decoded.clone();
    let heavy = 3 * 1024 * 1024;
    let events = futures::stream::iter(0..40)
        .map(move |index| {
            counted.fetch_add(1, Ordering::Relaxed);
            Shown("heavy", format!("{index}"), heavy)
        })
        .chain(futures::stream::pending());
    set.start("heavy", "heavy".into(), events.boxed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(FORWARDED_BYTES / heavy, 2);
    assert_eq!(
        decoded.load(Ordering::Relaxed),
        3,
        "two forwarded, one waiting"
    );
    assert_eq!(set.next().await.0.1, "0");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(decoded.load(Ordering::Relaxed), 4, "one taken, one more");
    // One heavier than the whole room goes alone.
    let (mut set, _other_group) = one_owner();
    let huge = futures::stream::iter([Shown("huge", "huge".into(), 4 * FORWARDED_BYTES)])
        .chain(futures::stream::pending());
    set.start("huge", "huge".into(), huge.boxed());
    let (alone, _) = set.next().await;
    assert_eq!((alone.0, alone.1.as_str()), ("huge", "huge"));
}

/// The watches of one owner decode ahead no more than FORWARDED_BYTES together: three watches
/// of 3 MiB events (two of the controller's, one of the Cleaners'), the loops not reading, stop
/// at two forwarded for each owner and one decoded and waiting in each watch. With a room for
/// each watch (as before), each watch forwarded two: a tenant's Cleaners watching sixteen kinds
/// had sixteen rooms. Each owner has its own, so that one loop slow to read holds up no other.
#[tokio::test(start_paused = true)]
async fn the_watches_of_one_owner_share_one_room() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let (mut controller, mut cleaners, _group) = two_owners();
    let decoded = Arc::new(AtomicUsize::new(0));
    let heavy = 3 * 1024 * 1024;
    let heavy_events = |key: &'static str| {
        let counted = decoded.clone();
        futures::stream::iter(0..40)
            .map(move |index| {
                counted.fetch_add(1, Ordering::Relaxed);
                Shown(key, format!("{index}"), heavy)
            })
            .chain(futures::stream::pending())
            .boxed()
    };
    controller.start("jobs", "jobs".into(), heavy_events("jobs"));
    controller.start("pods", "pods".into(), heavy_events("pods"));
    cleaners.start("maps", "maps".into(), heavy_events("maps"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(FORWARDED_BYTES / heavy, 2);
    assert_eq!(
        decoded.load(Ordering::Relaxed),
        (2 + 2) + (2 + 1),
        "the controller's two forwarded and one waiting in each of its watches; the Cleaners' two and one"
    );
    let (taken, _) = controller.next().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        decoded.load(Ordering::Relaxed),
        (2 + 2) + (2 + 1) + 1,
        "{} taken, one more through",
        taken.1
    );
    let (taken, _) = cleaners.next().await;
    assert_eq!(taken.0, "maps");
}

/// An event read as text: what it will hold decoded, and a count of those decoded.
struct Text(
    &'static str,
    usize,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
);

impl kube_retention_io::watch_set::Ready for Text {
    type Event = Shown;

    fn will_hold(&self) -> usize {
        self.1
    }

    fn ready(self) -> Shown {
        self.2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Shown(self.0, "decoded".into(), self.1)
    }
}

/// Each watch holds what it read as text while it waits for the room, and decodes it only once
/// it has its room: waiting watches, however many, hold no decoded event.
#[tokio::test(start_paused = true)]
async fn an_event_is_decoded_only_once_it_has_its_room() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let (mut set, _group) = one_owner();
    let decoded = Arc::new(AtomicUsize::new(0));
    let heavy = 3 * 1024 * 1024;
    let watches = 16;
    for key in 0..watches {
        let key: &'static str = Box::leak(format!("scope-{key}").into_boxed_str());
        let counted = decoded.clone();
        let events = futures::stream::iter(0..4)
            .map(move |_| Text(key, heavy, counted.clone()))
            .chain(futures::stream::pending())
            .boxed();
        set.start(key, key.into(), events);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(FORWARDED_BYTES / heavy, 2);
    assert_eq!(
        decoded.load(Ordering::Relaxed),
        2,
        "two within the room decoded; the other {watches} watches' first events wait as text"
    );
    let (Shown(_, shown, _), _) = set.next().await;
    assert_eq!(shown, "decoded");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        decoded.load(Ordering::Relaxed),
        3,
        "one taken, one more decoded"
    );
}

/// Every owner's watches are charged to the process's one budget, and a charge goes on with
/// its event until whoever holds the object drops it: with 6 MiB for the process, the
/// controller's watch decodes two events of 3 MiB and the Cleaners' none, though the Cleaners'
/// own room is empty; the event the loop took, still held, keeps its charge, so nothing more is
/// decoded until it is dropped, and then the Cleaners' watch, first in line, has the room.
#[tokio::test(start_paused = true)]
async fn the_owners_share_the_process_budget_which_goes_on_with_each_event() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let heavy = 3 * 1024 * 1024;
    let memory = ObjectMemory::new(2 * heavy);
    let (mut controller, mut cleaners, _group) = two_owners_within(memory.clone());
    let (jobs, maps) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let events = |key: &'static str, counted: &Arc<AtomicUsize>| {
        let counted = counted.clone();
        futures::stream::iter(0..40)
            .map(move |_| Text(key, heavy, counted.clone()))
            .chain(futures::stream::pending())
            .boxed()
    };
    let decoded = || (jobs.load(Ordering::Relaxed), maps.load(Ordering::Relaxed));
    controller.start("jobs", "jobs".into(), events("jobs", &jobs));
    tokio::time::sleep(Duration::from_secs(1)).await;
    cleaners.start("maps", "maps".into(), events("maps", &maps));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        decoded(),
        (2, 0),
        "the budget is the controller's two events"
    );
    assert_eq!(memory.held(), 2 * heavy);
    let (event, charge) = controller.next().await;
    assert_eq!((event.0, charge.bytes()), ("jobs", heavy));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        decoded(),
        (2, 0),
        "the event taken keeps its charge: its owner's room is free, the budget is not"
    );
    drop(charge);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(decoded(), (2, 1), "the Cleaners' watch came first in line");
    assert_eq!(memory.held(), 2 * heavy);
    let (event, _charge) = cleaners.next().await;
    assert_eq!(event.0, "maps");
}
