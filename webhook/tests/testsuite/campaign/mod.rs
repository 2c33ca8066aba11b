//! A campaign against the webhook's port: the real binary on 127.0.0.1 ([`port`]), sent
//! generated bodies ([`bodies`]) over HTTP/1.1 and HTTP/2 side by side, bodies held open,
//! connections by the thousand, and HTTP/2 floods written frame by frame ([`frames`]). Held to
//! three things throughout: no crash (the process started is the process answering), no
//! limit overrun (its peak resident memory, VmHWM, under the chart's 128 MiB; its file
//! descriptors within the connection bounds), and no wrong verdict (each review answered as
//! the library's own handler answers the same body in process, from the same flags, asking
//! the same stand-in API server; a body past `--max-body-bytes` refused 413).
//!
//! Each reproduction of issue 57 is a test here too: a 4 MB review, sixteen UPDATEs of an
//! etcd-sized Job at once, 9,000 idle HTTP/2 connections, slow bodies held while a bad
//! policy is written. Run in a release build by `make fuzz-webhook-short` (in `make test`:
//! 2,000 generated requests) and `make fuzz-webhook` (100,000); ignored by `cargo test`, whose
//! debug build takes minutes for the TLS handshakes alone.

mod bodies;
mod frames;
mod port;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::StatusCode;
use jiff::Timestamp;
use kube_retention_webhook::connections::SETTLING;
use kube_retention_webhook::review::{self, Hook};
use serde_json::{Value, json};

use bodies::{Class, Generated, Generator};
use port::Webhook;

/// The chart's memory limit for the webhook.
const LIMIT: u64 = 128 * 1024 * 1024;

/// Policies compile at once whatever their number: the oracle's share and the webhook's are
/// kept apart, and neither may refuse what the other answers.
const FLAGS: [&str; 2] = [
    "--namespace-compile-share=1",
    "--namespace-compile-burst=1h",
];

const MIB: f64 = 1024.0 * 1024.0;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}

/// Asserts the webhook still runs and stayed under the limit, and says so.
fn held(webhook: &mut Webhook, what: &str) {
    assert!(webhook.alive(), "{what}: the webhook exited");
    let peak = webhook.peak_rss();
    println!(
        "{what}: peak RSS {:.1} MiB, {} file descriptors",
        mib(peak),
        webhook.fds()
    );
    assert!(
        peak < LIMIT,
        "{what}: peak RSS {:.1} MiB, past the chart's 128 MiB",
        mib(peak)
    );
}

/// A review of `policy` created.
fn policy_created(policy: &Value) -> Value {
    crate::support::review(
        "retention.dev",
        "v1alpha1",
        "RetentionPolicy",
        "CREATE",
        policy,
        None,
    )
}

/// A bad policy (a TTL that is no duration): denied by the webhook itself, naming the field.
fn bad_policy() -> Bytes {
    let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                        "metadata": {"name": "bad", "namespace": "team-a"},
                        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                                 "ttl": "1 day"}});
    let review = crate::support::as_user(policy_created(&policy), "alice");
    Bytes::from(serde_json::to_vec(&review).unwrap())
}

/// Posts the bad policy on a fresh HTTP/2 connection from the API server's address; asserts the
/// webhook denied it itself within the registrations' timeoutSeconds (3), as the API server
/// waits.
async fn bad_policy_denied(webhook: &Webhook) {
    let asking = async {
        let mut connection = webhook.api_server().await.expect("a connection");
        connection.post("/validate", bad_policy()).await
    };
    let (status, body) = tokio::time::timeout(Duration::from_secs(3), asking)
        .await
        .expect("answered within 3 s")
        .expect("an answer");
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["status"]["code"], 422, "{answer}");
}

fn requests() -> usize {
    std::env::var("WEBHOOK_CAMPAIGN_REQUESTS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(2000)
}

/// What each class got, for the distribution printed at the end.
#[derive(Default)]
struct Tally {
    by_class: BTreeMap<Class, BTreeMap<String, usize>>,
}

impl Tally {
    fn count(&mut self, class: Class, outcome: String) {
        *self
            .by_class
            .entry(class)
            .or_default()
            .entry(outcome)
            .or_default() += 1;
    }

    fn print(&self) {
        for (class, outcomes) in &self.by_class {
            let total: usize = outcomes.values().sum();
            println!("  {class:?}: {total} — {outcomes:?}");
        }
    }
}

/// How an answer reads in the distribution: its status, and its verdict where it has one.
fn outcome(status: StatusCode, answer: &Value) -> String {
    let response = &answer["response"];
    match (
        response["allowed"].as_bool(),
        response["status"]["code"].as_i64(),
    ) {
        (Some(true), _) if response.get("patch").is_some() => {
            format!("{} patched", status.as_u16())
        }
        (Some(true), _) => format!("{} allowed", status.as_u16()),
        (Some(false), Some(code)) => format!("{} denied {code}", status.as_u16()),
        _ => format!("{}", status.as_u16()),
    }
}

/// How a review answered at its deadline reads in the distribution.
const TIMED_OUT: &str = "timed out";

/// Whether the webhook answered at the admission's deadline (a body not arrived: 408; a
/// validation not finished: 504; a mutation admitted unchanged, saying so).
fn timed_out(status: StatusCode, answer: &Value) -> bool {
    let response = &answer["response"];
    let warned = response["warnings"].as_array().is_some_and(|warnings| {
        warnings.iter().any(|warning| {
            warning
                .as_str()
                .is_some_and(|text| text.contains("did not finish"))
        })
    });
    status == StatusCode::REQUEST_TIMEOUT || response["status"]["code"] == 504 || warned
}

/// The handler's answer to `body`, a mutation computing deadlines from `now`.
async fn handled_at(
    oracle: &kube_retention_webhook::Context,
    hook: Hook,
    body: &[u8],
    now: Timestamp,
) -> review::Answer {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + oracle.limits.timeout;
    let mut held = oracle.memory.hold();
    match review::read(oracle, hook, body, &mut held, started) {
        Ok(request) => review::answer_at(oracle, hook, &request, deadline, started, now).await,
        Err(refused) => *refused,
    }
}

/// Checks the answer to `sent`, sent in the second `since` or later, against the oracle's.
async fn check(
    sent: &Generated,
    since: i64,
    answer: Result<port::Answered, hyper::Error>,
    oracle: &kube_retention_webhook::Context,
) -> Result<String, String> {
    let (status, body) = match answer {
        Ok(answered) => answered,
        // Refused by its Content-Length before it was read: HTTP/1 closes the connection
        // under a client still writing, which sees the close and not the 413.
        Err(_) if sent.class == Class::Oversized => return Ok("413 closed".to_owned()),
        Err(error) => {
            return Err(format!(
                "{:?} to {}: no answer: {error}",
                sent.class, sent.path
            ));
        }
    };
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if sent.class == Class::Oversized {
        return if status == StatusCode::PAYLOAD_TOO_LARGE {
            Ok(outcome(status, &answer))
        } else {
            Err(format!("an oversized body got {status}: {answer}"))
        };
    }
    if status == StatusCode::SERVICE_UNAVAILABLE && sent.body.len() > 1024 * 1024 {
        // A large body refused for room while others arrive: a shed, not a verdict.
        return Ok("503 shed".to_owned());
    }
    if timed_out(status, &answer) {
        // Said so, as the deadline asks: counted, and held to a share of the whole below.
        return Ok(TIMED_OUT.to_owned());
    }
    let hook = if sent.path == "/validate" {
        Hook::Validate
    } else {
        Hook::Mutate
    };
    // A mutation stamps deadlines from the second it is answered in, which the webhook and the
    // handler need not share: the answer is held to the handler's at each second from before
    // it was sent to now (one or two), and must equal one of them.
    let mut expected = None;
    let mut second = since;
    while second <= Timestamp::now().as_second() {
        let now = Timestamp::from_second(second).unwrap();
        let (expected_status, review) = handled_at(oracle, hook, &sent.body, now).await;
        let review = serde_json::to_value(review).unwrap();
        let same = status == expected_status && answer == review;
        expected = Some((expected_status, review));
        if same || hook == Hook::Validate {
            break;
        }
        second += 1;
    }
    let (expected_status, expected) = expected.expect("judged at one second at least");
    if status != expected_status || answer != expected {
        return Err(format!(
            "{:?} to {}: the webhook answered {status} {answer:.400}, the handler {expected_status} {expected:.400}",
            sent.class, sent.path
        ));
    }
    Ok(outcome(status, &answer))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short, make fuzz-webhook"]
async fn generated_bodies_are_answered_as_the_handler_answers_them_within_the_limits() {
    let mut webhook = Webhook::start(&FLAGS).await;
    let oracle = Arc::new(webhook.oracle().await);
    let total = requests();
    let generator = Arc::new(Mutex::new((Generator::new(), 0usize)));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|worker| {
            let generator = generator.clone();
            let tally = tally.clone();
            let oracle = oracle.clone();
            let address = webhook.address;
            let connect = webhook_connector(&webhook);
            tokio::spawn(async move {
                let _ = address;
                let mut failures = Vec::new();
                let mut connection: Option<Connection> = None;
                loop {
                    let sent = {
                        let mut generator = generator.lock().unwrap();
                        if generator.1 >= total {
                            break;
                        }
                        generator.1 += 1;
                        generator.0.next()
                    };
                    // A request the webhook never answered (its connection closed after an
                    // early answer to the one before) is sent again on a new connection.
                    let mut answer = None;
                    let since = Timestamp::now().as_second();
                    for _ in 0..3 {
                        let open = match connection.as_mut() {
                            Some(open) => open,
                            None => connection.insert(connect.open(worker % 2 == 0).await),
                        };
                        let sent_now = open.post(sent.path, sent.body.clone()).await;
                        let keep =
                            matches!(&sent_now, Ok((status, _)) if *status == StatusCode::OK);
                        if !keep {
                            connection = None;
                        }
                        let unanswered = sent_now.is_err();
                        answer = Some(sent_now);
                        if !unanswered {
                            break;
                        }
                    }
                    let answer = answer.expect("sent at least once");
                    match check(&sent, since, answer, &oracle).await {
                        Ok(outcome) => tally.lock().unwrap().count(sent.class, outcome),
                        Err(failure) => failures.push(failure),
                    }
                }
                failures
            })
        })
        .collect();
    let mut failures = Vec::new();
    for worker in workers {
        failures.extend(worker.await.unwrap());
    }
    println!(
        "{total} generated requests in {:.1} s; by class and answer:",
        started.elapsed().as_secs_f64()
    );
    tally.lock().unwrap().print();
    println!("{} answered otherwise than the handler", failures.len());
    held(&mut webhook, "the generated bodies");
    assert!(webhook.fds() < 64, "{} descriptors open", webhook.fds());
    assert!(
        failures.is_empty(),
        "{} wrong: {failures:#?}",
        failures.len()
    );
    let timed_out: usize = tally
        .lock()
        .unwrap()
        .by_class
        .values()
        .filter_map(|outcomes| outcomes.get(TIMED_OUT))
        .sum();
    assert!(
        timed_out * 100 <= total,
        "{timed_out} of {total} answered at their deadline: the webhook is too slow for them"
    );
}

/// Opens connections to the webhook for a worker.
struct Connector {
    webhook: Arc<WebhookHandle>,
}

/// What a worker needs of the webhook to connect: shared, since the webhook itself is not.
struct WebhookHandle {
    tls: tokio_rustls::TlsConnector,
    address: std::net::SocketAddr,
}

fn webhook_connector(webhook: &Webhook) -> Connector {
    Connector {
        webhook: Arc::new(WebhookHandle {
            tls: webhook.connector(),
            address: webhook.address,
        }),
    }
}

enum Connection {
    One(port::Http1),
    Two(port::Http2),
}

impl Connector {
    async fn open(&self, http2: bool) -> Connection {
        for _ in 0..100 {
            let opened = if http2 {
                port::http2(&self.webhook.tls, self.webhook.address)
                    .await
                    .map(Connection::Two)
            } else {
                port::http1(&self.webhook.tls, self.webhook.address)
                    .await
                    .map(Connection::One)
            };
            if let Ok(connection) = opened {
                return connection;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no connection to the webhook");
    }
}

impl Connection {
    async fn post(&mut self, path: &str, body: Bytes) -> Result<port::Answered, hyper::Error> {
        match self {
            Self::One(connection) => connection.post(path, body).await,
            Self::Two(connection) => connection.post(path, body).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short"]
async fn regression_a_4mb_review_keeps_the_webhook_near_its_body() {
    let mut webhook = Webhook::start(&FLAGS).await;
    let before = webhook.rss();
    let body = Bytes::from(bodies::job_review(4 * 1024 * 1024 - 64 * 1024));
    for path in ["/mutate", "/validate"] {
        let mut connection = webhook.http2().await.unwrap();
        let (status, answer) = connection.post(path, body.clone()).await.unwrap();
        assert_eq!(
            status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }
    let peak = webhook.peak_rss();
    println!(
        "a {:.1} MiB review: from {:.1} MiB to a peak of {:.1} MiB",
        mib(body.len() as u64),
        mib(before),
        mib(peak)
    );
    held(&mut webhook, "a 4 MB review");
    // Its body, the buffer's growth to it, and the allocator's pages: 217 MiB at b59abb3.
    assert!(
        peak < before + 6 * body.len() as u64,
        "the peak {:.1} MiB is not near the body's {:.1} MiB",
        mib(peak),
        mib(body.len() as u64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short"]
async fn regression_sixteen_updates_of_an_etcd_sized_job_at_once() {
    let mut webhook = Webhook::start(&FLAGS).await;
    let body = Bytes::from(bodies::etcd_sized_update());
    let connection = webhook.http2().await.unwrap();
    let updates: Vec<_> = (0..16)
        .map(|index| {
            let mut connection = connection.clone();
            let body = body.clone();
            let path = if index % 2 == 0 {
                "/mutate"
            } else {
                "/validate"
            };
            tokio::spawn(async move { connection.post(path, body).await })
        })
        .collect();
    let mut shed = 0;
    for update in updates {
        let (status, answer) = update.await.unwrap().unwrap();
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // Past the memory budget: refused for room, and the API server applies the
            // registration's failurePolicy, as to an absent webhook.
            shed += 1;
            continue;
        }
        assert_eq!(status, StatusCode::OK, "{answer:.300}");
        assert_eq!(answer["response"]["allowed"], true, "{answer:.300}");
    }
    println!(
        "sixteen UPDATEs of {:.1} MiB at once on one HTTP/2 connection: {} answered, {shed} \
         refused for room",
        mib(body.len() as u64),
        16 - shed
    );
    assert!(shed <= 8, "{shed} of 16 refused: the budget holds a dozen");
    held(&mut webhook, "sixteen etcd-sized UPDATEs");
}

/// Opens `count` HTTP/2 connections, 200 at a time; keeps those that opened.
async fn open_many(webhook: &Webhook, count: usize) -> Vec<port::Http2> {
    let handle = Arc::new(WebhookHandle {
        tls: webhook.connector(),
        address: webhook.address,
    });
    let mut open = Vec::new();
    for batch in 0..count.div_ceil(200) {
        let opening: Vec<_> = (0..200.min(count - batch * 200))
            .map(|_| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    tokio::time::timeout(
                        Duration::from_secs(5),
                        port::http2(&handle.tls, handle.address),
                    )
                    .await
                })
            })
            .collect();
        for opened in opening {
            if let Ok(Ok(Ok(connection))) = opened.await {
                open.push(connection);
            }
        }
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short"]
async fn regression_idle_http2_connections_are_capped_and_closed() {
    let mut webhook = Webhook::start(&["--idle-connection-timeout=3s"]).await;
    let baseline = webhook.fds();
    let open = open_many(&webhook, 9000).await;
    let during = webhook.fds();
    println!(
        "9,000 HTTP/2 connections from one address: {} opened, {during} descriptors open",
        open.len()
    );
    let per_peer = kube_retention_webhook::connections::DEFAULT_MAX_PER_PEER;
    assert!(
        during <= baseline + per_peer,
        "{during} descriptors: past the bound of {per_peer} connections from one address"
    );
    bad_policy_denied(&webhook).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = webhook.fds();
    println!("after 4 s idle: {after} descriptors");
    assert!(
        after <= baseline + 2,
        "{after} descriptors still open after 4 s idle"
    );
    held(&mut webhook, "9,000 idle HTTP/2 connections");
    drop(open);

    // Many addresses: the bound on all connections, the idlest closed for a new one.
    let mut webhook =
        Webhook::start(&["--max-connections-per-peer=100000", "--max-connections=512"]).await;
    let baseline = webhook.fds();
    let open = open_many(&webhook, 9000).await;
    let during = webhook.fds();
    println!(
        "9,000 HTTP/2 connections, 512 at most: {} opened, {during} descriptors open",
        open.len()
    );
    assert!(
        during <= baseline + 512,
        "{during} descriptors: past the bound of 512"
    );
    let started = Instant::now();
    bad_policy_denied(&webhook).await;
    println!(
        "a new connection's review answered in {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    held(&mut webhook, "9,000 HTTP/2 connections, 512 at most");
}

/// Keeps up short requests on an HTTP/2 connection from `source`, a `gap` apart, re-opening it
/// whenever the webhook closes it, until `until`, counting itself in `open` while its
/// connection is; returns how many were answered.
async fn keep_busy(
    webhook: Arc<WebhookHandle>,
    source: std::net::IpAddr,
    gap: Duration,
    until: Instant,
    open: Arc<AtomicUsize>,
) -> usize {
    let mut answered = 0;
    while Instant::now() < until {
        let Ok(mut connection) =
            port::http2_from(&webhook.tls, webhook.address, Some(source)).await
        else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        open.fetch_add(1, Ordering::SeqCst);
        while Instant::now() < until {
            if connection.post("/healthz", Bytes::new()).await.is_err() {
                break;
            }
            answered += 1;
            tokio::time::sleep(gap).await;
        }
        open.fetch_sub(1, Ordering::SeqCst);
    }
    answered
}

/// Every place taken by connections that keep up short requests (each answered at once, then
/// another 200 ms later), from four addresses of 64 connections each: none is ever idle for a
/// settling, nor holds a request that long. The API server's new connection is still given a
/// place, its review answered within the registrations' 3 s, time after time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short"]
async fn regression_connections_kept_busy_with_short_requests_still_make_room() {
    use kube_retention_webhook::connections::{DEFAULT_MAX, DEFAULT_MAX_PER_PEER};
    let mut webhook = Webhook::start(&[]).await;
    let handle = Arc::new(WebhookHandle {
        tls: webhook.connector(),
        address: webhook.address,
    });
    let until = Instant::now() + Duration::from_secs(15);
    let peers = DEFAULT_MAX / DEFAULT_MAX_PER_PEER;
    let open = Arc::new(AtomicUsize::new(0));
    let busy: Vec<_> = (0..peers)
        .flat_map(|peer| {
            let source = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 1, peer as u8 + 1));
            let (handle, open) = (handle.clone(), open.clone());
            (0..DEFAULT_MAX_PER_PEER).map(move |_| {
                let gap = Duration::from_millis(200);
                tokio::spawn(keep_busy(handle.clone(), source, gap, until, open.clone()))
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while open.load(Ordering::SeqCst) < DEFAULT_MAX && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let taken = open.load(Ordering::SeqCst);
    println!("{peers} addresses keeping {DEFAULT_MAX} connections busy: {taken} open");
    assert!(
        taken >= DEFAULT_MAX,
        "only {taken} of {DEFAULT_MAX} places taken"
    );
    tokio::time::sleep(SETTLING).await;
    for attempt in 0..4 {
        let started = Instant::now();
        bad_policy_denied(&webhook).await;
        println!(
            "the API server's review {attempt} on a new connection answered in {:.0} ms",
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    let mut answered = 0;
    for worker in busy {
        answered += worker.await.unwrap();
    }
    println!("{answered} short requests answered meanwhile");
    held(&mut webhook, "256 connections kept busy");
}

/// Holds `count` HTTP/1 requests open, each having sent its headers and `sent` bytes of a
/// 4 MB body, re-opening each as the webhook cuts it off, until `until`.
fn hold_slow_bodies(
    webhook: &Webhook,
    count: usize,
    sent: usize,
    until: Instant,
) -> Vec<tokio::task::JoinHandle<usize>> {
    let handle = Arc::new(WebhookHandle {
        tls: webhook.connector(),
        address: webhook.address,
    });
    (0..count)
        .map(|_| {
            let handle = handle.clone();
            tokio::spawn(async move {
                let mut opened = 0;
                while Instant::now() < until {
                    let Ok(mut stream) = port::tls(&handle.tls, handle.address, b"http/1.1").await
                    else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let mut request = b"POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\n\
                        content-type: application/json\r\ncontent-length: 4000000\r\n\r\n"
                        .to_vec();
                    request.extend(std::iter::repeat_n(b' ', sent.max(1)));
                    if port::write(&mut stream, &request).await.is_err() {
                        continue;
                    }
                    opened += 1;
                    // Held until the webhook answers (408 at the deadline, 503 when cut off).
                    let mut answer = [0u8; 256];
                    let left = until.saturating_duration_since(Instant::now());
                    let _ = tokio::time::timeout(left, async {
                        use tokio::io::AsyncReadExt;
                        stream.read(&mut answer).await
                    })
                    .await;
                }
                opened
            })
        })
        .collect()
}

/// Starts the webhook with `flags` and holds `count` slow bodies against it, each `bytes` in,
/// for 8 s; after `settle`, a bad policy is written every 300 ms and must be denied by the
/// webhook itself each time. Asserts it stayed within its limits, and says so as `what`.
async fn bad_policies_denied_through_slow_bodies(
    flags: &[&str],
    count: usize,
    bytes: usize,
    settle: Duration,
    what: &str,
) {
    let mut webhook = Webhook::start(flags).await;
    let until = Instant::now() + Duration::from_secs(8);
    let slow = hold_slow_bodies(&webhook, count, bytes, until);
    tokio::time::sleep(settle).await;
    while Instant::now() + Duration::from_millis(500) < until {
        bad_policy_denied(&webhook).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut opened = 0;
    for task in slow {
        opened += task.await.unwrap();
    }
    println!("{what}, {opened} sent in 8 s: every bad policy denied");
    held(&mut webhook, what);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short"]
async fn regression_slow_bodies_do_not_shed_the_api_servers_reviews() {
    // 128 held from one address (its bound of connections, and the rest re-tried), each one
    // byte in, re-opened as they are cut: every place among the reviews answered would be
    // theirs if a body took one.
    bad_policies_denied_through_slow_bodies(&[], 128, 1, Duration::from_secs(1), "128 slow bodies")
        .await;
    // As from many addresses, each 512 KiB in: 200 of them (within the bound on connections)
    // ask for half again the memory budget.
    bad_policies_denied_through_slow_bodies(
        &["--max-connections-per-peer=100000"],
        200,
        512 * 1024,
        Duration::from_secs(2),
        "200 slow bodies of 512 KiB",
    )
    .await;
}

/// Frames to write, one after another.
type Frames = Box<dyn Iterator<Item = Vec<u8>> + Send>;

/// Writes `frames` after the preface on a raw HTTP/2 connection, reading nothing back.
async fn flood(webhook: &Webhook, frames: impl Iterator<Item = Vec<u8>>) -> usize {
    let Ok(mut stream) = webhook.tls(b"h2").await else {
        return 0;
    };
    if port::write(&mut stream, &frames::preface()).await.is_err() {
        return 0;
    }
    let mut written = 0;
    let mut batch = Vec::new();
    for frame in frames {
        batch.extend(frame);
        if batch.len() > 64 * 1024 {
            let writing = port::write(&mut stream, &batch);
            match tokio::time::timeout(Duration::from_secs(2), writing).await {
                Ok(Ok(())) => written += batch.len(),
                // Closed by the webhook, or no longer read: the flood is over.
                _ => return written,
            }
            batch.clear();
        }
    }
    written
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short"]
async fn http2_floods_leave_the_webhook_answering() {
    let mut webhook = Webhook::start(&[]).await;
    let floods: [(&str, Frames); 4] = [
        (
            "rapid reset: 20,000 streams opened and reset",
            Box::new((0..20_000u32).flat_map(|index| {
                let stream = 2 * index + 1;
                [frames::headers(stream, true), frames::reset(stream)]
            })),
        ),
        (
            "200,000 pings, none of the answers read",
            Box::new((0..200_000u64).map(frames::ping)),
        ),
        (
            "a header block continued 20,000 times",
            Box::new(
                std::iter::once(frames::headers(1, false))
                    .chain((0..20_000).map(|_| frames::continuation(1))),
            ),
        ),
        (
            "100,000 SETTINGS",
            Box::new((0..100_000u32).map(|index| frames::settings(index % 100))),
        ),
    ];
    for (what, frames) in floods {
        let written = flood(&webhook, frames).await;
        println!(
            "{what}: {:.1} MiB written before the webhook stopped reading or closed",
            mib(written as u64)
        );
        bad_policy_denied(&webhook).await;
        held(&mut webhook, what);
    }
}

/// A policy naming sixteen kinds, by a writer whose `userInfo` holds `groups` groups of about
/// 100 bytes, each review's its own: 32 questions to the API server, none cached before.
fn policy_by_a_crowded_writer(review: usize, groups: usize) -> Bytes {
    let resources: Vec<Value> = (0..16)
        .map(|kind| json!({"apiVersion": format!("g{kind}.example.com/v1"), "kind": "Thing"}))
        .collect();
    let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                        "metadata": {"name": "crowded", "namespace": "team-a"},
                        "spec": {"resources": resources, "ttl": "1h"}});
    let mut body = policy_created(&policy);
    let groups: Vec<String> = (0..groups)
        .map(|group| format!("review-{review:06}-group-{group:06}-{}", "x".repeat(72)))
        .collect();
    body["request"]["userInfo"] = json!({"username": "alice", "groups": groups});
    Bytes::from(serde_json::to_vec(&body).unwrap())
}

/// Sends `reviews` of [`policy_by_a_crowded_writer`] from sixteen HTTP/2 connections at once;
/// what each got, by answer.
async fn crowded_writers(
    webhook: &Webhook,
    reviews: usize,
    groups: usize,
) -> BTreeMap<String, usize> {
    let mut connections = Vec::new();
    for _ in 0..16 {
        connections.push(webhook.http2().await.expect("a connection"));
    }
    let senders: Vec<_> = connections
        .into_iter()
        .enumerate()
        .map(|(sender, mut connection)| async move {
            let mut answers = Vec::new();
            for review in (sender..reviews).step_by(16) {
                let body = policy_by_a_crowded_writer(review, groups);
                let (status, answer) = connection.post("/validate", body).await.unwrap();
                let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
                let message = answer["response"]["status"]["message"]
                    .as_str()
                    .unwrap_or_default();
                let read = match (status, answer["response"]["allowed"].as_bool()) {
                    (StatusCode::OK, Some(true)) => "allowed".to_owned(),
                    (StatusCode::OK, Some(false))
                        if message.contains("could not check your permissions") =>
                    {
                        "denied: no room to ask".to_owned()
                    }
                    (StatusCode::SERVICE_UNAVAILABLE, _) => "503 shed".to_owned(),
                    _ => format!("unexpected {status}: {answer:.300}"),
                };
                answers.push(read);
            }
            answers
        })
        .map(tokio::spawn)
        .collect();
    let mut tally = BTreeMap::new();
    for sender in senders {
        for answer in sender.await.unwrap() {
            *tally.entry(answer).or_insert(0) += 1;
        }
    }
    tally
}

/// A review's `userInfo` is what its sender says: a pod posting to the webhook may send each
/// writer check a different one of a megabyte. Each question about it once kept its own copy
/// in the answers' cache for 5 s (10,000 of them allowed), so crowded writers' policies of
/// sixteen kinds held 32 copies each; now the cache keeps a digest, and asking is charged to
/// the memory admissions share before the writer is copied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "against the release binary: make fuzz-webhook-short"]
async fn regression_crowded_user_info_is_charged_and_never_cached_whole() {
    let mut webhook = Webhook::start(&FLAGS).await;
    for (reviews, groups, what) in [
        (
            1600,
            160,
            "1,600 policies of 16 kinds by writers of 16 KiB of groups each",
        ),
        (
            160,
            4000,
            "160 policies of 16 kinds by writers of 400 KiB of groups each",
        ),
    ] {
        let tally = crowded_writers(&webhook, reviews, groups).await;
        println!("{what}: {tally:?}");
        let unexpected: Vec<_> = tally
            .keys()
            .filter(|answer| answer.starts_with("unexpected"))
            .collect();
        assert!(unexpected.is_empty(), "{unexpected:#?}");
        held(&mut webhook, what);
    }
    bad_policy_denied(&webhook).await;
}
