//! How a watch first lists its kind ([`kube_retention_controller::initial_list`]), against a
//! mocked API server: streamed by default, with the exact requests kube-runtime's watcher sends;
//! in pages where `--initial-list=pages` says so, where the server refuses a streamed list (and
//! then for every later watch too), and where a streamed list was cut before its end.

#![allow(clippy::unwrap_used)] // test code

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use kube_retention_apimock::{ApiServer, Received, pair};
use kube_retention_controller::initial_list::{Events, InitialList, Lists};
use serde_json::{Value, json};

fn job(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "7"}})
}

/// A page with Jobs of these names, the list's last.
fn job_list(names: &[&str]) -> Value {
    let items: Vec<Value> = names.iter().map(|name| job(name)).collect();
    json!({"apiVersion": "batch/v1", "kind": "JobList",
           "metadata": {"resourceVersion": "9"}, "items": items})
}

/// A watch's body: one event a line.
fn events(lines: &[Value]) -> Vec<u8> {
    lines
        .iter()
        .map(|line| format!("{line}\n"))
        .collect::<String>()
        .into_bytes()
}

fn added(name: &str) -> Value {
    json!({"type": "ADDED", "object": job(name)})
}

/// The bookmark that ends a streamed list.
fn initial_events_end() -> Value {
    json!({"type": "BOOKMARK", "object": {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"resourceVersion": "9",
                        "annotations": {"k8s.io/initial-events-end": "true"}}}})
}

fn jobs_watch(lists: &Lists, api: &Api<Job>) -> Events<Job> {
    lists.watch(api.clone(), watcher::Config::default(), "Job.batch".into())
}

/// The next request, which must be on Jobs.
async fn next(server: &mut ApiServer) -> Received {
    let request = server.next().await.expect("a request");
    assert_eq!(request.method, "GET");
    assert_eq!(request.path, "/apis/batch/v1/jobs");
    request
}

fn is_streamed_list(request: &Received) -> bool {
    let query = &request.query;
    query.contains("watch=true")
        && query.contains("sendInitialEvents=true")
        && query.contains("resourceVersionMatch=NotOlderThan")
}

fn is_page(request: &Received) -> bool {
    !request.query.contains("watch=true") && request.query.contains("limit=500")
}

/// The names of the objects in `events`' next `count` events, `init`, `done` for the list's
/// start and end.
async fn read(events: &mut Events<Job>, count: usize) -> Vec<String> {
    let mut read = Vec::new();
    for _ in 0..count {
        let event = events
            .next()
            .await
            .expect("an event")
            .expect("not an error");
        read.push(match event {
            Event::Init => "init".to_owned(),
            Event::InitApply(job) | Event::Apply(job) => job.metadata.name.unwrap(),
            Event::InitDone => "done".to_owned(),
            Event::Delete(job) => format!("deleted {}", job.metadata.name.unwrap()),
        });
    }
    read
}

#[tokio::test]
async fn a_kind_is_listed_by_one_streamed_watch_then_watched_from_its_bookmark() {
    let (client, mut server) = pair();
    let lists = Lists::new(InitialList::Stream, 500);
    let mut watch = jobs_watch(&lists, &Api::all(client));
    let answered = tokio::spawn(async move {
        let list = next(&mut server).await;
        assert!(is_streamed_list(&list), "{}", list.line());
        assert!(list.query.contains("resourceVersion=0"), "{}", list.line());
        let body = events(&[added("first"), added("second"), initial_events_end()]);
        list.reply_raw(200, body);
        let resumed = next(&mut server).await;
        assert!(resumed.query.contains("watch=true"), "{}", resumed.line());
        assert!(
            !resumed.query.contains("sendInitialEvents"),
            "a resumed watch lists nothing: {}",
            resumed.line()
        );
        assert!(
            resumed.query.contains("resourceVersion=9"),
            "{}",
            resumed.line()
        );
        resumed.reply_raw(200, events(&[added("third")]));
        server
    });
    assert_eq!(
        read(&mut watch, 5).await,
        ["init", "first", "second", "done", "third"]
    );
    answered.await.unwrap();
    assert!(!lists.refused("/apis/batch"));
}

#[tokio::test]
async fn pages_list_without_a_stream() {
    let (client, mut server) = pair();
    let lists = Lists::new(InitialList::Pages, 500);
    let mut watch = jobs_watch(&lists, &Api::all(client));
    let answered = tokio::spawn(async move {
        let page = next(&mut server).await;
        assert!(is_page(&page), "{}", page.line());
        page.reply(200, &job_list(&["first"]));
        server
    });
    assert_eq!(read(&mut watch, 3).await, ["init", "first", "done"]);
    answered.await.unwrap();
}

/// A server with the WatchList feature gate off answers a streamed list so: every watch of that
/// API lists in pages from then on, this one at once, one created before the refusal but not yet
/// run and later ones without asking again; another API's server is asked on its own.
#[tokio::test]
async fn a_server_that_refuses_streamed_lists_is_listed_in_pages_from_then_on() {
    let (client, mut server) = pair();
    let lists = Lists::new(InitialList::Stream, 500);
    let api = Api::all(client.clone());
    let mut watch = jobs_watch(&lists, &api);
    let mut waiting = jobs_watch(&lists, &api);
    let answered = tokio::spawn(async move {
        let list = next(&mut server).await;
        assert!(is_streamed_list(&list), "{}", list.line());
        list.refuse(
            422,
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
             sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        );
        let page = next(&mut server).await;
        assert!(is_page(&page), "the same watch, in pages: {}", page.line());
        page.reply(200, &job_list(&["first"]));
        server
    });
    assert_eq!(
        read(&mut watch, 3).await,
        ["init", "first", "done"],
        "the refusal is not an error downstream"
    );
    let mut server = answered.await.unwrap();
    assert!(lists.refused("/apis/batch"));
    assert!(!lists.refused("/api"));
    let answered = tokio::spawn(async move {
        let page = next(&mut server).await;
        assert!(
            is_page(&page),
            "a watch created before, in pages: {}",
            page.line()
        );
        page.reply(200, &job_list(&[]));
        server
    });
    assert_eq!(read(&mut waiting, 2).await, ["init", "done"]);
    let mut server = answered.await.unwrap();
    let pods: Api<Pod> = Api::all(client);
    let mut pods = lists.watch(pods, watcher::Config::default(), "Pod".into());
    let answered = tokio::spawn(async move {
        let list = server.next().await.expect("a request");
        assert_eq!(list.path, "/api/v1/pods");
        assert!(is_streamed_list(&list), "another API: {}", list.line());
        list.reply_raw(200, events(&[initial_events_end()]));
        server
    });
    assert!(matches!(pods.next().await, Some(Ok(Event::Init))));
    assert!(matches!(pods.next().await, Some(Ok(Event::InitDone))));
    let mut server = answered.await.unwrap();
    let mut later = jobs_watch(&lists, &api);
    let answered = tokio::spawn(async move {
        let page = next(&mut server).await;
        assert!(is_page(&page), "a later watch, in pages: {}", page.line());
        page.reply(200, &job_list(&[]));
    });
    assert_eq!(read(&mut later, 2).await, ["init", "done"]);
    answered.await.unwrap();
}

/// A streamed list cut before its end (its request's timeout, say) begins again; the watch
/// begins it again in pages, since a list too long for one request would be cut each time.
#[tokio::test]
async fn a_streamed_list_cut_before_its_end_begins_again_in_pages() {
    let (client, mut server) = pair();
    let lists = Lists::new(InitialList::Stream, 500);
    let mut watch = jobs_watch(&lists, &Api::all(client));
    let answered = tokio::spawn(async move {
        let list = next(&mut server).await;
        assert!(is_streamed_list(&list), "{}", list.line());
        list.reply_raw(200, events(&[added("first")]));
        // kube-runtime's watcher starts the list over; the restart is what shows the cut.
        let again = next(&mut server).await;
        assert!(is_streamed_list(&again), "{}", again.line());
        again.reply_raw(200, events(&[added("first")]));
        let page = next(&mut server).await;
        assert!(is_page(&page), "{}", page.line());
        page.reply(200, &job_list(&["first", "second"]));
        server
    });
    assert_eq!(
        read(&mut watch, 6).await,
        ["init", "first", "init", "first", "second", "done"],
        "the list begins again, once"
    );
    answered.await.unwrap();
    assert!(
        !lists.refused("/apis/batch"),
        "one kind's cut list says nothing of the server"
    );
}
