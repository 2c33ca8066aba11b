//! The writer check without the webhook (issue 57's reproduction): with the webhook stopped,
//! its hook for annotated objects fails open, and a user who may patch a Deployment but not
//! delete it gives it `retention.dev/ttl: 2s` and the `retention.dev/managed` label. The API
//! server's own ValidatingAdmissionPolicy (`kube-retention-writers`) refuses it, naming the
//! annotation, the value and what the user lacks, and the controller deletes nothing; the label
//! alone is admitted (it sets nothing). The same write from the admin, who may delete, is
//! admitted and the controller deletes that Deployment on time: the controller was watching.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube_retention_common::writer_policy::NAME;
use kube_retention_e2e::components::{self, WEBHOOK};
use kube_retention_e2e::process::tracked;

use super::{apply, grant, kubectl_as, refusal};
use crate::support::TestNamespace;
use crate::workloads::eventually;

fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\n\
         spec: {{replicas: 0, selector: {{matchLabels: {{app: {name}}}}},\n  \
         template: {{metadata: {{labels: {{app: {name}}}}},\n  \
         spec: {{containers: [{{name: c, image: example.invalid/{name}}}]}}}}}}\n"
    )
}

/// The reproduced write: a two-second TTL and the label the controller's watches select on.
const TTL_AND_LABEL: &str = r#"{"metadata":{"annotations":{"retention.dev/ttl":"2s"},"labels":{"retention.dev/managed":"true"}}}"#;
const LABEL_ONLY: &str = r#"{"metadata":{"labels":{"retention.dev/managed":"true"}}}"#;

pub(super) async fn refused_with_the_webhook_stopped(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let webhook = tracked(&cluster.layout.state_dir, &[WEBHOOK])
        .pop()
        .context("no webhook pid")?;
    apply(
        &ns,
        &format!("{}---\n{}", deployment("app"), deployment("control")),
    )?;
    let user = format!("patcher-{}", ns.name);
    grant(
        &ns,
        "patch-deployments",
        &user,
        "apps",
        "deployments",
        "get, list, patch, update",
    )?;
    ensure!(
        webhook.stop(Duration::from_secs(10))?,
        "the webhook was running"
    );
    let outcome = refused_while_down(&ns, &user).await;
    components::start_webhook(&cluster)?;
    components::wait_for_admission(&cluster, Duration::from_secs(30))?;
    outcome
}

/// The API server type-checked the policy and found nothing to warn about.
async fn type_checked(ns: &TestNamespace) -> Result<()> {
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(ns.env.client.clone());
    eventually(
        Duration::from_secs(30),
        "the writer policy's status",
        || async {
            let policy = policies.get(NAME).await?;
            Ok(policy.status.and_then(|status| status.observed_generation)
                == policy.metadata.generation)
        },
    )
    .await?;
    let status = policies.get(NAME).await?.status.unwrap_or_default();
    let warnings = status
        .type_checking
        .and_then(|checking| checking.expression_warnings)
        .unwrap_or_default();
    ensure!(
        warnings.is_empty() && status.conditions.unwrap_or_default().is_empty(),
        "the API server's warnings about the writer policy: {warnings:?}"
    );
    Ok(())
}

async fn refused_while_down(ns: &TestNamespace, user: &str) -> Result<()> {
    type_checked(ns).await?;
    let patch = |who: Option<&str>, name: &str, body: &str| {
        let mut command = match who {
            Some(user) => kubectl_as(ns, user),
            None => ns.kubectl(),
        };
        command.args(["patch", "deployment", name, "--type=merge", "-p", body]);
        refusal(&mut command, "")
    };
    let said = patch(Some(user), "app", TTL_AND_LABEL)?
        .context("with the webhook stopped, a TTL was admitted from a user who may not delete")?;
    let expected = format!(
        "ValidatingAdmissionPolicy '{NAME}' with binding '{NAME}' denied request: \
         metadata.annotations[retention.dev/ttl]: \"2s\" you may not delete deployments.apps in \
         namespace {}, so you may not set their retention",
        ns.name
    );
    ensure!(said.contains(&expected), "the API server said: {said}");
    // The label sets nothing: admitted alone.
    if let Some(said) = patch(Some(user), "app", LABEL_ONLY)? {
        anyhow::bail!("the managed label alone was refused: {said}");
    }
    // The admin may delete: the same write is admitted, and the controller, watching, deletes it.
    if let Some(said) = patch(None, "control", TTL_AND_LABEL)? {
        anyhow::bail!("the admin's TTL was refused: {said}");
    }
    let deployments: Api<Deployment> = Api::namespaced(ns.env.client.clone(), &ns.name);
    eventually(
        Duration::from_secs(30),
        "the admin's Deployment with a 2s TTL deleted by the controller",
        || async { Ok(deployments.get_opt("control").await?.is_none()) },
    )
    .await?;
    let app = deployments
        .get_opt("app")
        .await?
        .context("the controller deleted the Deployment the user may not delete")?;
    let annotations = app.metadata.annotations.unwrap_or_default();
    ensure!(
        !annotations
            .keys()
            .any(|key| key.starts_with("retention.dev/")),
        "the refused write left retention settings: {annotations:?}"
    );
    Ok(())
}
