//! When a Cleaner acts, and when it must not: a monotonic time condition acts at its moment
//! (± 2 s) although the period is an hour; a condition that does not compile is refused at
//! `kubectl apply`; one that fails at run time is reported and never taken as true.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube_retention_common::cleaner::Cleaner;
use serde_json::json;

use super::{POLL, condition, config_map, config_maps, create_cleaner, exists, expect};
use crate::support::TestNamespace;
use crate::workloads::{eventually, sleep_until};

pub async fn monotonic(ns: TestNamespace) -> Result<()> {
    config_map(&ns, "until-friday").await?;
    let moment = Timestamp::now() + SignedDuration::from_secs(8);
    create_cleaner(
        &ns,
        "until-friday",
        json!({
            "ttl": "1s",
            "retry": {"period": "1h", "monotonic": true},
            "targets": [{"name": "settings", "delete": true,
                         "reference": {"version": "v1", "kind": "ConfigMap", "name": "until-friday"}}],
            "conditions": [format!("time >= timestamp(\"{moment}\")")]
        }),
    )
    .await?;
    let cleaners: Api<Cleaner> = Api::namespaced(ns.env.client.clone(), &ns.name);
    eventually(
        Duration::from_secs(5),
        "the Cleaner schedules the moment",
        || async {
            let cleaner = cleaners.get("until-friday").await?;
            let waiting = condition(&cleaner, "Waiting").unwrap_or_default();
            Ok(waiting.2.contains("the conditions turn true at"))
        },
    )
    .await?;
    sleep_until(moment - SignedDuration::from_secs(2)).await;
    ensure!(
        exists(&ns, &config_maps(), "until-friday").await?,
        "cleaned more than 2 s early"
    );
    let gone = loop {
        if !exists(&ns, &config_maps(), "until-friday").await? {
            break Timestamp::now();
        }
        ensure!(
            Timestamp::now() < moment + SignedDuration::from_secs(2),
            "not cleaned within 2 s of {moment}"
        );
        tokio::time::sleep(POLL).await;
    };
    let off = gone.duration_since(moment);
    println!("monotonic condition acted {off:#} after its moment");
    ensure!(
        off.abs() <= SignedDuration::from_secs(2),
        "cleaned at {gone}, the moment was {moment}"
    );
    Ok(())
}

pub async fn broken_condition(ns: TestNamespace) -> Result<()> {
    let cleaner = json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": "broken", "namespace": ns.name},
        "spec": {"ttl": "1h",
                 "targets": [{"name": "settings", "includeWhenEvaluating": true,
                              "reference": {"version": "v1", "kind": "ConfigMap", "name": "x"}}],
                 "conditions": ["settings.items.size() =="]}});
    let output = kube_retention_e2e::output_with_input(
        ns.kubectl().args(["apply", "-f", "-"]),
        &cleaner.to_string(),
    )?;
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    expect(!output.status.success(), || {
        "a broken condition was admitted".to_owned()
    })?;
    expect(
        said.contains("spec.conditions[0]")
            && said.contains("settings.items.size() ==")
            && said.contains("is not valid CEL"),
        || format!("the denial must name spec.conditions[0], its value and the rule: {said}"),
    )?;
    let cleaners: Api<Cleaner> = Api::namespaced(ns.env.client.clone(), &ns.name);
    ensure!(
        cleaners.get_opt("broken").await?.is_none(),
        "nothing is created"
    );
    Ok(())
}

pub async fn runtime_error(ns: TestNamespace) -> Result<()> {
    config_map(&ns, "unready").await?;
    create_cleaner(
        &ns,
        "unready",
        json!({
            "ttl": "1s",
            "retry": {"period": "1h"},
            "targets": [{"name": "settings", "includeWhenEvaluating": true, "delete": true,
                         "reference": {"version": "v1", "kind": "ConfigMap", "name": "unready"}}],
            "conditions": ["settings.items.all(s, s.data.ready == \"yes\")"]
        }),
    )
    .await?;
    let cleaners: Api<Cleaner> = Api::namespaced(ns.env.client.clone(), &ns.name);
    eventually(
        Duration::from_secs(10),
        "the Cleaner reports the CEL error",
        || async {
            let cleaner = cleaners.get("unready").await?;
            Ok(condition(&cleaner, "Ready")
                .is_some_and(|(status, reason, _)| status == "False" && reason == "ConditionError"))
        },
    )
    .await?;
    let cleaner = cleaners.get("unready").await?;
    let (_, _, message) = condition(&cleaner, "Ready").context("Ready")?;
    expect(message.contains("data"), || {
        format!("the message names what failed: {message}")
    })?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(
        exists(&ns, &config_maps(), "unready").await?,
        "a CEL error was taken as true"
    );
    let events = kube_retention_e2e::run(ns.kubectl().args([
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=unready,reason=ConditionError",
        "-o",
        "name",
    ]))?;
    expect(!events.trim().is_empty(), || {
        "no ConditionError Event on the Cleaner".to_owned()
    })?;
    Ok(())
}
