//! `kubectl retention approve`: lets a policy's or a Cleaner's current generation delete more at
//! once than its blast-radius guard allows, by naming that generation in its
//! `retention.dev/approved-generation` annotation. The webhook admits a policy's annotation only
//! from a writer who may delete what the policy governs; a Cleaner's needs what writing the
//! Cleaner needs (its writer was checked for every target it deletes). A later change to the
//! spec is a new generation, counted afresh.

use crate::output::Format;
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use kube_retention_common::annotations::APPROVED_GENERATION;
use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::cleaner::Cleaner;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    pub target: PolicyKind,
    pub name: String,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Which kind of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyKind {
    /// A RetentionPolicy.
    Policy,
    /// A ClusterRetentionPolicy.
    Clusterpolicy,
    /// A Cleaner.
    Cleaner,
}

pub async fn run(client: Client, args: ApproveArgs) -> Result<()> {
    let approved = match args.target {
        PolicyKind::Policy => {
            let namespace = args
                .namespace
                .unwrap_or_else(|| client.default_namespace().to_owned());
            let api: Api<RetentionPolicy> = Api::namespaced(client, &namespace);
            approve(&api, Some(namespace), &args.name, |policy| {
                policy.status.as_ref().map(|status| &status.conditions[..])
            })
            .await?
        }
        PolicyKind::Clusterpolicy => {
            let api: Api<ClusterRetentionPolicy> = Api::all(client);
            approve(&api, None, &args.name, |policy| {
                policy.status.as_ref().map(|status| &status.conditions[..])
            })
            .await?
        }
        PolicyKind::Cleaner => {
            let namespace = args
                .namespace
                .unwrap_or_else(|| client.default_namespace().to_owned());
            let api: Api<Cleaner> = Api::namespaced(client, &namespace);
            approve(&api, Some(namespace), &args.name, |cleaner| {
                cleaner.status.as_ref().map(|status| &status.conditions[..])
            })
            .await?
        }
    };
    approved.said(args.output)
}

/// What was approved, for `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Approved {
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
    approved_generation: i64,
    /// The Ready condition before the approval, as `reason: message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    was: Option<String>,
}

/// A policy as the messages name it: `RetentionPolicy team-a/jobs`, `ClusterRetentionPolicy all`.
fn shown(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

impl Approved {
    fn said(&self, format: Format) -> Result<()> {
        let was = self
            .was
            .as_ref()
            .map(|was| format!(" (it said: {was})"))
            .unwrap_or_default();
        let sentence = format!(
            "approved generation {} of {}{was}",
            self.approved_generation,
            shown(&self.kind, self.namespace.as_deref(), &self.name)
        );
        crate::output::say(format, &sentence, self)
    }
}

async fn approve<K>(
    api: &Api<K>,
    namespace: Option<String>,
    name: &str,
    conditions: impl Fn(&K) -> Option<&[Condition]>,
) -> Result<Approved>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let kind = K::kind(&()).into_owned();
    let shown = shown(&kind, namespace.as_deref(), name);
    let policy = api
        .get(name)
        .await
        .with_context(|| format!("reading {shown}"))?;
    let Some(generation) = policy.meta().generation else {
        bail!("{shown} has no metadata.generation to approve");
    };
    let patch = json!({"metadata": {"annotations": {APPROVED_GENERATION: generation.to_string()}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("approving generation {generation} of {shown}"))?;
    let was = conditions(&policy)
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|ready| format!("{}: {}", ready.reason, ready.message));
    Ok(Approved {
        kind,
        namespace,
        name: name.to_owned(),
        approved_generation: generation,
        was,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn policy(generation: i64) -> Value {
        json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
               "metadata": {"name": "jobs", "namespace": "team-a", "generation": generation},
               "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttl": "1s"},
               "status": {"conditions": [{"type": "Ready", "status": "False",
                   "reason": "AwaitingApproval", "message": "would delete 150 objects at once",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    }

    fn args() -> ApproveArgs {
        ApproveArgs {
            target: PolicyKind::Policy,
            name: "jobs".into(),
            namespace: Some("team-a".into()),
            output: Format::Table,
        }
    }

    #[tokio::test]
    async fn approves_the_generation_it_read() {
        let (client, mut server) = kube_retention_apimock::pair();
        let approving = tokio::spawn(run(client, args()));
        let path = "/apis/retention.dev/v1alpha1/namespaces/team-a/retentionpolicies/jobs";
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {path}"));
        get.reply(200, &policy(3));
        let patch = server.next().await.unwrap();
        assert_eq!(patch.line(), format!("PATCH {path}"));
        assert_eq!(patch.content_type, "application/merge-patch+json");
        assert_eq!(
            patch.body,
            json!({"metadata": {"annotations": {"retention.dev/approved-generation": "3"}}})
        );
        patch.reply(200, &policy(3));
        approving.await.unwrap().unwrap();
        assert!(server.quiet().await, "nothing else is sent");
    }

    #[tokio::test]
    async fn a_refusal_says_what_could_not_be_approved() {
        let (client, mut server) = kube_retention_apimock::pair();
        let approving = tokio::spawn(run(client, args()));
        server.next().await.unwrap().reply(200, &policy(2));
        let refusal = "admission webhook denied the request: you may not delete jobs.batch in namespace team-a";
        server.next().await.unwrap().refuse(403, refusal);
        let error = format!("{:#}", approving.await.unwrap().unwrap_err());
        assert!(
            error.starts_with("approving generation 2 of RetentionPolicy team-a/jobs: "),
            "{error}"
        );
        assert!(error.contains("you may not delete jobs.batch"), "{error}");
    }

    #[tokio::test]
    async fn approves_a_cleaners_generation_too() {
        let (client, mut server) = kube_retention_apimock::pair();
        let cleaner_args = ApproveArgs {
            target: PolicyKind::Cleaner,
            name: "preview".into(),
            ..args()
        };
        let approving = tokio::spawn(run(client, cleaner_args));
        let path = "/apis/retention.dev/v1alpha1/namespaces/team-a/cleaners/preview";
        let cleaner = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
               "metadata": {"name": "preview", "namespace": "team-a", "generation": 5},
               "spec": {"targets": []},
               "status": {"conditions": [{"type": "Ready", "status": "False",
                   "reason": "AwaitingApproval", "message": "would delete 150 objects at once",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {path}"));
        get.reply(200, &cleaner);
        let patch = server.next().await.unwrap();
        assert_eq!(patch.line(), format!("PATCH {path}"));
        assert_eq!(
            patch.body,
            json!({"metadata": {"annotations": {"retention.dev/approved-generation": "5"}}})
        );
        patch.reply(200, &cleaner);
        approving.await.unwrap().unwrap();
        assert!(server.quiet().await, "nothing else is sent");
    }
}
