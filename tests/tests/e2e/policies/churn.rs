//! A tenant rewriting its policy over and over: every change of a policy lists its kinds afresh,
//! cluster-wide, so without a bound one namespace editor could have the controller LIST every
//! Job of the cluster every second. Changes within a window are coalesced into one relist at
//! its end, so the last change still takes effect.

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::Timestamp;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube_retention_common::api::RetentionPolicy;
use kube_retention_e2e::cluster::{CONTROLLER_SERVICE_ACCOUNT, LocalCluster};
use kube_retention_io::relist_throttle::WINDOW;
use serde_json::{Value, json};

use crate::kinds::{GROUP, define_kind, grant};
use crate::lists;
use crate::support::{TestNamespace, object};
use crate::workloads::{eventually, now_second};

/// Edits of the policy, and the time between them.
const EDITS: u32 = 20;
const BETWEEN: Duration = Duration::from_millis(500);
/// A kind of this test's own, so that no other test's watches list it meanwhile.
const KIND: &str = "Rewrite";
const PLURAL: &str = "rewrites";

pub async fn rewritten_policy(ns: TestNamespace) -> Result<()> {
    let rewrites = define_kind(&ns.env, KIND).await?;
    grant(&ns.env, PLURAL)?;
    let here = ns.dynamic(&rewrites);
    let finished = object(&rewrites, json!({"metadata": {"name": "finished"}}))?;
    here.create(&PostParams::default(), &finished).await?;
    let status = json!({"status": {"phase": "Done", "finishedAt": now_second().to_string()}});
    here.patch_status("finished", &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    let policies: Api<RetentionPolicy> = Api::namespaced(ns.env.client.clone(), &ns.name);
    let policy: RetentionPolicy = serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "rewritten"},
        "spec": {"resources": [{"apiVersion": format!("{GROUP}/v1"), "kind": KIND}],
                 "finished": {"succeeded": "object.status.phase == 'Done'",
                              "at": "timestamp(object.status.finishedAt)"},
                 "ttlAfterSucceeded": "100h"}}))?;
    policies.create(&PostParams::default(), &policy).await?;
    eventually(
        Duration::from_secs(60),
        "the policy Ready once the controller watches the new kind",
        || async { Ok(ready(&policies.get("rewritten").await?) == Some("True".to_owned())) },
    )
    .await?;
    // Its watch started with a LIST: count from a window after it.
    tokio::time::sleep(WINDOW).await;
    let started = Timestamp::now();
    for edit in 1..=EDITS {
        // Every edit a new generation; the last one makes the object due at once.
        let ttl = if edit == EDITS {
            "1s".to_owned()
        } else {
            format!("{}h", 100 + edit)
        };
        let patch = json!({"spec": {"ttlAfterSucceeded": ttl}});
        policies
            .patch("rewritten", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tokio::time::sleep(BETWEEN).await;
    }
    deleted_under_the_last_edit(&here).await?;
    let period = Timestamp::now().duration_since(started);
    let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
    let relists = lists::lists(&ns, &user, GROUP, PLURAL, started)?.total();
    let bound = (period.as_secs_f64() / WINDOW.as_secs_f64()).ceil() as usize + 1;
    ensure!(
        relists <= bound,
        "{EDITS} edits of a policy over {:.1} s made the controller list {PLURAL} {relists} \
         times; one relist per {WINDOW:?} allows {bound}",
        period.as_secs_f64()
    );
    Ok(())
}

async fn deleted_under_the_last_edit(here: &Api<DynamicObject>) -> Result<()> {
    eventually(
        WINDOW + Duration::from_secs(20),
        "the object deleted under the policy's last edit",
        || async { Ok(here.get_opt("finished").await?.is_none()) },
    )
    .await
}

fn ready(policy: &RetentionPolicy) -> Option<String> {
    let status: Value = serde_json::to_value(policy.status.as_ref()?).ok()?;
    let conditions = status["conditions"].as_array()?;
    let ready = conditions
        .iter()
        .find(|condition| condition["type"] == "Ready")?;
    ready["status"].as_str().map(str::to_owned)
}
