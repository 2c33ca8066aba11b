//! How a watch first lists its kind ([`kube_retention_io::initial_list`]), against a
//! mocked API server: streamed by default, with the exact requests kube-runtime's watcher sends;
//! in pages where `--initial-list=pages` says so, and where the server refuses a streamed list
//! (and then for every later watch too). Cut lists: `initial_list_cuts.rs`.

use crate::list_support;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use kube_retention_apimock::pair;
use kube_retention_io::initial_list::{Fallback, InitialList, Lists};
use list_support::{
    added, events, initial_events_end, is_page, is_resumed_watch, is_streamed_list, job_list,
    jobs_watch, next, read, streaming_jobs,
};

#[tokio::test]
async fn a_kind_is_listed_by_one_streamed_watch_then_watched_from_its_bookmark() {
    let (lists, mut watch, mut server) = streaming_jobs();
    let answered = tokio::spawn(async move {
        let list = next(&mut server).await;
        assert!(is_streamed_list(&list), "{}", list.line());
        assert!(list.query.contains("resourceVersion=0"), "{}", list.line());
        let body = events(&[added("first"), added("second"), initial_events_end()]);
        list.reply_raw(200, body);
        let resumed = next(&mut server).await;
        assert!(
            is_resumed_watch(&resumed),
            "a resumed watch lists nothing: {}",
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
    assert_eq!(lists.fallbacks("/apis/batch", Fallback::Refused), 0);
    assert_eq!(lists.fallbacks("/apis/batch", Fallback::Cut), 0);
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
    assert_eq!(
        lists.fallbacks("/apis/batch", Fallback::Refused),
        1,
        "the one refusal is counted; the watches that never asked are not"
    );
    assert_eq!(lists.fallbacks("/api", Fallback::Refused), 0);
}
