//! A streamed list cut before its end ([`kube_retention_io::initial_list`]), against a
//! mocked API server, on paused time: how long the list ran before the cut decides. Cut early
//! (the API server's watch cache closes a listing watcher under churn), that list is done in
//! pages and the watch's next list streams again; cut at its request's timeout, the watch lists
//! in pages from then on. Either way the fallback is counted, by API and reason.

use crate::list_support;

use std::time::Duration;

use kube_retention_apimock::ApiServer;
use kube_retention_io::initial_list::Fallback;
use list_support::{
    added, events, gone, initial_events_end, is_page, is_resumed_watch, is_streamed_list, job_list,
    next, read, streaming_jobs,
};

/// Answers a streamed list with `first` and ends the body there: the list is cut. kube-runtime's
/// watcher asks again at once, and that is answered alike.
async fn cut_streamed_list(server: &mut ApiServer) {
    let list = next(server).await;
    assert!(is_streamed_list(&list), "{}", list.line());
    list.reply_raw(200, events(&[added("first")]));
    let again = next(server).await;
    assert!(is_streamed_list(&again), "{}", again.line());
    again.reply_raw(200, events(&[added("first")]));
}

/// Answers the watch resumed after a list with 410 Gone: the watcher lists again.
async fn resumed_then_gone(server: &mut ApiServer) {
    let resumed = next(server).await;
    assert!(is_resumed_watch(&resumed), "{}", resumed.line());
    resumed.reply_raw(200, events(&[gone()]));
}

#[tokio::test(start_paused = true)]
async fn a_list_cut_early_is_done_in_pages_and_the_next_list_streams_again() {
    let (lists, mut watch, mut server) = streaming_jobs();
    let answered = tokio::spawn(async move {
        cut_streamed_list(&mut server).await;
        let page = next(&mut server).await;
        assert!(
            is_page(&page),
            "the rest of the list, in pages: {}",
            page.line()
        );
        page.reply(200, &job_list(&["first", "second"]));
        resumed_then_gone(&mut server).await;
        let list = next(&mut server).await;
        assert!(
            is_streamed_list(&list),
            "the next list streams: {}",
            list.line()
        );
        list.reply_raw(200, events(&[added("second"), initial_events_end()]));
        server
    });
    assert_eq!(read(&mut watch, 2).await, ["init", "first"]);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        read(&mut watch, 8).await,
        [
            "init", "first", "second", "done", "error", "init", "second", "done"
        ],
        "the list begins again once, in pages; after the 410, streamed"
    );
    answered.await.unwrap();
    assert_eq!(lists.fallbacks("/apis/batch", Fallback::Cut), 1);
    assert_eq!(lists.fallbacks("/apis/batch", Fallback::Timeout), 0);
    assert!(
        !lists.refused("/apis/batch"),
        "one kind's cut list says nothing of the server"
    );
}

#[tokio::test(start_paused = true)]
async fn a_list_cut_at_its_requests_timeout_is_listed_in_pages_from_then_on() {
    let (lists, mut watch, mut server) = streaming_jobs();
    let answered = tokio::spawn(async move {
        cut_streamed_list(&mut server).await;
        let page = next(&mut server).await;
        assert!(is_page(&page), "{}", page.line());
        page.reply(200, &job_list(&["first"]));
        resumed_then_gone(&mut server).await;
        let page = next(&mut server).await;
        assert!(is_page(&page), "the next list too: {}", page.line());
        page.reply(200, &job_list(&["first"]));
        server
    });
    assert_eq!(read(&mut watch, 2).await, ["init", "first"]);
    // kube-runtime's request timeout is 290 s; a cut within its last tenth is the timeout's.
    tokio::time::sleep(Duration::from_secs(265)).await;
    assert_eq!(
        read(&mut watch, 7).await,
        ["init", "first", "done", "error", "init", "first", "done"]
    );
    answered.await.unwrap();
    assert_eq!(lists.fallbacks("/apis/batch", Fallback::Timeout), 1);
    assert_eq!(lists.fallbacks("/apis/batch", Fallback::Cut), 0);
}
