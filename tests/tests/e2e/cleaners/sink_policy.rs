//! The sink policy on the real cluster: a Cleaner whose sink is on 127.0.0.1 is admitted with a
//! warning, cleaned, and announced to nobody — a Warning Event says "refused by the sink
//! policy", the listener there accepts no connection and the refusal is counted — while a sink
//! on 127.0.0.2, which the local controller is told to allow, gets its CloudEvent.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use super::sink::{Sink, apply_announcing_cleaner};
use super::{config_maps, events, exists, expect};
use crate::listeners::Listener;
use crate::support::TestNamespace;
use crate::workloads::eventually;

/// The controller's count of CloudEvents the sink policy refused.
pub(super) fn refused_total(ns: &TestNamespace) -> Result<u64> {
    let metrics =
        kube_retention_e2e::components::http_get(ns.env.cluster.controller_port, "/metrics")?;
    Ok(metrics
        .lines()
        .filter(|line| line.starts_with("kube_retention_cleaner_sink_refused_total"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum())
}

pub async fn refused_sink(ns: TestNamespace) -> Result<()> {
    // Not 127.0.0.1: the local cluster's API server listens there, and the policy names the
    // more specific rule (the API server's address) for it.
    let listener = Listener::start("127.0.0.3").await?;
    let sink = format!("http://{}/", listener.address);
    let said = apply_announcing_cleaner(&ns, "probe", &sink).await?;
    expect(
        said.contains(&format!(
            "spec.cloudEventSink: \"{sink}\": 127.0.0.3 is a loopback address: refused by the \
             sink policy; the controller will not deliver to it"
        )),
        || format!("kubectl apply warned: {said}"),
    )?;
    eventually(
        Duration::from_secs(30),
        "a Warning Event on the Cleaner saying its sink was refused",
        || async {
            Ok(events(&ns, "probe")?.iter().any(|(reason, message)| {
                reason == "SinkRefused" && message.contains("refused by the sink policy")
            }))
        },
    )
    .await?;
    expect(!exists(&ns, &config_maps(), "probe").await?, || {
        "the group was not cleaned".into()
    })?;
    let notes = events(&ns, "probe")?;
    let note = notes
        .iter()
        .find(|(reason, _)| reason == "SinkRefused")
        .map(|(_, message)| message.clone())
        .context("the SinkRefused Event")?;
    expect(
        note == format!(
            "CloudEvent to {sink} refused by the sink policy: 127.0.0.3 is a loopback address"
        ),
        || format!("the Event says: {note}"),
    )?;
    // The refusal came before any connection; give a stray one time to show up anyway.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reached = listener.accepted();
    expect(reached == 0, || {
        format!("the controller connected to the refused sink {reached} times")
    })?;
    let refused = refused_total(&ns)?;
    expect(refused >= 1, || {
        format!("kube_retention_cleaner_sink_refused_total is {refused}")
    })
}

pub async fn allowed_sink(ns: TestNamespace) -> Result<()> {
    let sink = Sink::start().await?;
    let said = apply_announcing_cleaner(&ns, "announced", &sink.url).await?;
    expect(!said.contains("sink policy"), || {
        format!("kubectl apply warned about an allowed sink: {said}")
    })?;
    eventually(
        Duration::from_secs(30),
        "the sink on 127.0.0.2 receives the CloudEvent",
        || async { Ok(!sink.received().is_empty()) },
    )
    .await?;
    let received = sink.received();
    let event = &received[0];
    expect(
        event.headers.get("ce-type").map(String::as_str) == Some("dev.retention.cleaner.deleted"),
        || format!("{event:?}"),
    )?;
    expect(
        event.body["deleted"] == json!(["ConfigMap/announced"]),
        || format!("{event:?}"),
    )?;
    let notes = events(&ns, "announced")?;
    expect(
        !notes
            .iter()
            .any(|(reason, _)| reason == "SinkRefused" || reason == "SinkFailed"),
        || format!("Events: {notes:?}"),
    )
}
