//! `kubectl retention selftest`: proves, in one namespace, that kube-retention works as
//! installed, end to end: the webhook refuses an invalid RetentionPolicy naming its field (a
//! server-side dry run: nothing is stored), stamps a ConfigMap given a two-second time to live,
//! and the controller deletes that ConfigMap once it expired. The chart's `helm test` runs it;
//! an admin can run it anywhere they may write ConfigMaps and RetentionPolicies.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use kube_retention_common::annotations::{EXPIRES_AT, TTL};
use kube_retention_common::api::{PolicyRules, ResourceRef, RetentionPolicy, RetentionPolicySpec};
use serde::Serialize;

use crate::output::Format;

#[derive(Debug, clap::Args)]
pub struct SelftestArgs {
    /// Where to test (default: the context's namespace).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// How long the controller may take to delete the expired ConfigMap.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// The time to live the test ConfigMap is given.
const TIME_TO_LIVE: &str = "2s";
/// The CEL the invalid policy carries, and the field the webhook must name.
const INVALID_CEL: &str = "object.metadata.name.startsWith(";
const INVALID_FIELD: &str = "spec.match";

/// What the test saw, for `-o json|yaml`.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    namespace: String,
    /// The webhook's denial of the invalid policy.
    refused: String,
    /// The ConfigMap created, and the stamp the webhook gave it.
    config_map: String,
    expires_at: String,
    /// How long after its stamp the controller deleted it, in seconds.
    deleted_after_seconds: f64,
}

pub async fn run(client: Client, args: SelftestArgs) -> Result<()> {
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let mut report = Report {
        namespace: namespace.clone(),
        refused: refused(&client, &namespace).await?,
        ..Report::default()
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let name = format!(
        "kube-retention-selftest-{}",
        Timestamp::now().as_millisecond()
    );
    let created = create(&config_maps, &name).await?;
    report.config_map = format!("{namespace}/{name}");
    let Some(stamp) = created.annotations().get(EXPIRES_AT).cloned() else {
        cleanup(&config_maps, &name).await;
        bail!(
            "the webhook gave ConfigMap {namespace}/{name} no {EXPIRES_AT}: is the \
             MutatingWebhookConfiguration kube-retention registered, and the webhook up?"
        );
    };
    report.expires_at = stamp.clone();
    let expires: Timestamp = stamp
        .parse()
        .with_context(|| format!("reading the stamp {stamp:?}"))?;
    let deadline = tokio::time::Instant::now() + args.timeout;
    while config_maps
        .get_opt(&name)
        .await
        .with_context(|| format!("reading ConfigMap {namespace}/{name}"))?
        .is_some()
    {
        if tokio::time::Instant::now() >= deadline {
            cleanup(&config_maps, &name).await;
            bail!(
                "ConfigMap {namespace}/{name} expired at {stamp} and was not deleted within {}: \
                 is the controller leading (kubectl retention explain configmap {name}), and \
                 may it delete ConfigMaps (the chart's controller.objectKinds.configmaps)?",
                humantime::format_duration(args.timeout)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after = Timestamp::now().duration_since(expires);
    report.deleted_after_seconds = after.as_secs_f64().max(0.0);
    let sentence = format!(
        "admission: the webhook refused an invalid RetentionPolicy ({})\n\
         stamp: ConfigMap {} expires at {}\n\
         deletion: the controller deleted it {:.1} s after it expired",
        report.refused, report.config_map, report.expires_at, report.deleted_after_seconds
    );
    crate::output::say(args.output, &sentence, &report)
}

/// A server-side dry run of an invalid policy: the webhook's denial, naming the field.
async fn refused(client: &Client, namespace: &str) -> Result<String> {
    let policies: Api<RetentionPolicy> = Api::namespaced(client.clone(), namespace);
    let invalid = RetentionPolicy {
        metadata: ObjectMeta {
            name: Some("kube-retention-selftest".into()),
            ..ObjectMeta::default()
        },
        spec: RetentionPolicySpec {
            rules: PolicyRules {
                resources: vec![ResourceRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                }],
                match_expression: Some(INVALID_CEL.into()),
                ttl: Some("1h".into()),
                ..PolicyRules::default()
            },
        },
        status: None,
    };
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match policies.create(&dry_run, &invalid).await {
        Err(kube::Error::Api(status)) if status.message.contains(INVALID_FIELD) => {
            Ok(status.message)
        }
        Err(error) => Err(error).context("a dry run of an invalid RetentionPolicy"),
        Ok(_) => bail!(
            "the API server admitted a RetentionPolicy whose {INVALID_FIELD} is not CEL: is the \
             ValidatingWebhookConfiguration kube-retention registered?"
        ),
    }
}

async fn create(config_maps: &Api<ConfigMap>, name: &str) -> Result<ConfigMap> {
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some([(TTL.to_owned(), TIME_TO_LIVE.to_owned())].into()),
            labels: Some([("app.kubernetes.io/part-of".into(), "kube-retention".into())].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .with_context(|| format!("creating ConfigMap {name} with {TTL}: {TIME_TO_LIVE}"))
}

/// Deletes the test's ConfigMap where the controller did not.
async fn cleanup(config_maps: &Api<ConfigMap>, name: &str) {
    if let Err(error) = config_maps.delete(name, &DeleteParams::default()).await {
        eprintln!("note: could not delete ConfigMap {name}: {error}");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // fixtures

    use serde_json::{Value, json};

    use super::*;

    const POLICIES: &str = "/apis/retention.dev/v1alpha1/namespaces/team-a/retentionpolicies";
    const CONFIG_MAPS: &str = "/api/v1/namespaces/team-a/configmaps";

    fn args() -> SelftestArgs {
        SelftestArgs {
            namespace: Some("team-a".into()),
            timeout: Duration::from_secs(5),
            output: Format::Json,
        }
    }

    fn config_map(body: &Value, stamp: Option<&str>) -> Value {
        let mut created = body.clone();
        if let Some(stamp) = stamp {
            created["metadata"]["annotations"][EXPIRES_AT] = json!(stamp);
        }
        created["metadata"]["namespace"] = json!("team-a");
        created
    }

    #[tokio::test]
    async fn a_refused_policy_a_stamp_and_the_configmap_gone_pass() {
        let (client, mut server) = kube_retention_apimock::pair();
        let testing = tokio::spawn(run(client, args()));
        let dry_run = server.next().await.unwrap();
        assert_eq!(dry_run.line(), format!("POST {POLICIES}?&dryRun=All"));
        assert_eq!(dry_run.body["spec"]["match"], INVALID_CEL);
        dry_run.refuse(
            400,
            "admission webhook denied the request: spec.match: is not valid CEL",
        );
        let create = server.next().await.unwrap();
        assert_eq!(create.line(), format!("POST {CONFIG_MAPS}"));
        assert_eq!(create.body["metadata"]["annotations"][TTL], TIME_TO_LIVE);
        let name = create.body["metadata"]["name"].as_str().unwrap().to_owned();
        let created = config_map(&create.body, Some("2026-01-01T00:00:02Z"));
        create.reply(201, &created);
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {CONFIG_MAPS}/{name}"));
        get.refuse(404, "not found");
        testing.await.unwrap().unwrap();
        assert!(server.quiet().await, "nothing else is sent");
    }

    #[tokio::test]
    async fn an_admitted_policy_or_a_missing_stamp_fails_naming_the_webhook() {
        let (client, mut server) = kube_retention_apimock::pair();
        let testing = tokio::spawn(run(client, args()));
        let dry_run = server.next().await.unwrap();
        let admitted = dry_run.body.clone();
        dry_run.reply(201, &admitted);
        let error = format!("{:#}", testing.await.unwrap().unwrap_err());
        assert!(error.contains("ValidatingWebhookConfiguration"), "{error}");
        assert!(
            server.quiet().await,
            "no ConfigMap after a failed admission"
        );

        let (client, mut server) = kube_retention_apimock::pair();
        let testing = tokio::spawn(run(client, args()));
        server
            .next()
            .await
            .unwrap()
            .refuse(400, "spec.match: is not valid CEL");
        let create = server.next().await.unwrap();
        let name = create.body["metadata"]["name"].as_str().unwrap().to_owned();
        let unstamped = config_map(&create.body, None);
        create.reply(201, &unstamped);
        let cleanup = server.next().await.unwrap();
        assert_eq!(cleanup.line(), format!("DELETE {CONFIG_MAPS}/{name}"));
        cleanup.reply(200, &unstamped);
        let error = format!("{:#}", testing.await.unwrap().unwrap_err());
        assert!(error.contains("MutatingWebhookConfiguration"), "{error}");
    }
}
