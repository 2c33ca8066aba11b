//! CloudEvent delivery against a local HTTP server: retried with backoff until the sink takes
//! it, and given up with the last error when the sink stays down.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kube_retention_controller::cleaners::sink::{self, Delivery};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A sink answering 503 to the first `failures` requests and 202 after; counts requests.
async fn sink(failures: u32) -> (String, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}/", listener.local_addr().expect("an address"));
    let requests = Arc::new(AtomicU32::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = vec![0; 64 * 1024];
            let read = stream.read(&mut buffer).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buffer[..read]).into_owned();
            let seen = counted.fetch_add(1, Ordering::SeqCst);
            let status = if seen < failures {
                "503 Service Unavailable"
            } else {
                "202 Accepted"
            };
            let typed = request
                .to_ascii_lowercase()
                .contains("ce-type: dev.retention.cleaner.deleted");
            let status = if typed { status } else { "400 Bad Request" };
            let answer =
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            stream.write_all(answer.as_bytes()).await.ok();
        }
    });
    (url, requests)
}

fn quick(attempts: u32) -> Delivery {
    Delivery {
        attempts,
        first_backoff: Duration::from_millis(10),
        timeout: Duration::from_secs(2),
    }
}

fn event() -> cloudevents::Event {
    sink::event(
        "id",
        "/apis/retention.dev/v1alpha1/namespaces/n/cleaners/c",
        json!({"deleted": []}),
    )
    .expect("an event")
}

#[tokio::test]
async fn a_sink_that_recovers_gets_the_event_after_retries() {
    let (url, requests) = sink(2).await;
    sink::deliver(&url, event(), &quick(5))
        .await
        .expect("delivered");
    assert_eq!(requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_sink_that_stays_down_is_given_up_with_the_last_error() {
    let (url, requests) = sink(u32::MAX).await;
    let error = sink::deliver(&url, event(), &quick(3))
        .await
        .expect_err("not delivered");
    assert_eq!(requests.load(Ordering::SeqCst), 3);
    assert_eq!(
        error,
        "3 attempts failed, the last: the sink answered 503 Service Unavailable"
    );
}
