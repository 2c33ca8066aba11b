//! `kubectl retention snooze KIND/NAME 24h`: keeps an object at least that much longer, by
//! writing `retention.dev/snoozed-until` (now + the duration). The model pushes whatever
//! deadline governs the object to that time, and never brings one forward, so a snooze needs
//! only the permission to patch the object; a snooze already later is left as it is (taking one
//! away or bringing it forward is a tightening, which the webhook admits only from a writer who
//! may delete the object).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use jiff::{RoundMode, SignedDuration, Timestamp, TimestampRound, Unit};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use kube_retention_common::annotations::{self, SNOOZED_UNTIL};
use kube_retention_common::kinds::{Registry, Resource};
use serde::Serialize;
use serde_json::{Value, json};

use crate::model::{self, Policies};
use crate::output::Format;

#[derive(Debug, clap::Args)]
pub struct SnoozeArgs {
    /// KIND/NAME, KIND as kubectl takes it: `job/nightly-1`, `buildruns.shipwright.io/run-1`.
    pub target: String,
    /// How much longer from now (Go duration: `24h`, `90m`).
    #[arg(value_parser = kube_retention_common::duration::parse)]
    pub duration: Duration,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

pub async fn run(client: Client, kinds: &Registry, args: SnoozeArgs) -> Result<()> {
    let Some((kind, name)) = args.target.split_once('/') else {
        bail!(
            "{:?} is not KIND/NAME: write e.g. job/nightly-1 or buildruns.shipwright.io/run-1",
            args.target
        );
    };
    let api_resource = crate::kinds::resolve(&client, kind).await?;
    let namespace = args
        .namespace
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &api_resource);
    let shown = format!("{}/{name} in {namespace}", api_resource.kind.to_lowercase());
    let mut report = Report {
        kind: api_resource.kind.clone(),
        namespace: namespace.clone(),
        name: name.to_owned(),
        ..Report::default()
    };
    match snooze(&api, name, &shown, args.duration, Timestamp::now()).await? {
        Snoozed::Standing(standing) => {
            report.snoozed_until = standing.to_string();
            let said = format!("{shown} is snoozed until {standing} already: left as it is");
            crate::output::say(args.output, &said, &report)
        }
        Snoozed::Written(mut snoozed, until) => {
            report.snoozed_until = until.to_string();
            report.written = true;
            snoozed.types.get_or_insert_with(|| kube::api::TypeMeta {
                api_version: api_resource.api_version.clone(),
                kind: api_resource.kind.clone(),
            });
            let policies = Policies::load(&client).await?;
            let resource = Resource::from(&api_resource);
            let explained = model::explain(kinds, &resource, &snoozed, &policies, Timestamp::now());
            let then = match explained.deadline {
                Some(deadline) => {
                    report.deadline = Some(deadline.to_string());
                    format!("{shown} is deleted at {deadline} at the earliest")
                }
                None => {
                    let note = explained.note.unwrap_or(explained.source);
                    let said = format!("{shown}: {note}");
                    report.note = Some(note);
                    said
                }
            };
            let said = format!("snoozed {shown} until {until}\n{then}");
            crate::output::say(args.output, &said, &report)
        }
    }
}

/// What a snooze did, for `-o json|yaml`.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    kind: String,
    namespace: String,
    name: String,
    /// The snooze the object carries now.
    snoozed_until: String,
    /// Whether this run wrote it (false: a later one stood already).
    written: bool,
    /// When the object is deleted at the earliest, where a deadline governs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline: Option<String>,
    /// Why no deadline governs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// What [`snooze`] found or wrote.
#[derive(Debug)]
pub enum Snoozed {
    /// The object as patched, and the snooze written.
    Written(Box<DynamicObject>, Timestamp),
    /// A snooze at least as late stood already: nothing was written.
    Standing(Timestamp),
}

/// Reads `name` and writes its `snoozed-until` as `now` + `duration`, unless a later snooze
/// stands already.
pub async fn snooze(
    api: &Api<DynamicObject>,
    name: &str,
    shown: &str,
    duration: Duration,
    now: Timestamp,
) -> Result<Snoozed> {
    let object = api
        .get(name)
        .await
        .with_context(|| format!("reading {shown}"))?;
    let until = snoozed_until(now, duration)?;
    let (settings, _) = annotations::parse(object.annotations());
    if let Some(standing) = settings.snoozed_until.filter(|standing| *standing >= until) {
        return Ok(Snoozed::Standing(standing));
    }
    let patch = snooze_patch(until, object.resource_version().as_deref());
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("snoozing {shown} until {until}"))?;
    Ok(Snoozed::Written(Box::new(patched), until))
}

/// `now` + `duration`, rounded up to whole seconds (never less than asked).
fn snoozed_until(now: Timestamp, duration: Duration) -> Result<Timestamp> {
    let duration = SignedDuration::try_from(duration).context("the duration is too long")?;
    let until = now
        .checked_add(duration)
        .context("the duration is too long")?;
    let whole = TimestampRound::new()
        .smallest(Unit::Second)
        .mode(RoundMode::Ceil);
    Ok(until.round(whole)?)
}

/// The merge patch: the annotation, on the version read (a concurrent change is refused, not
/// overwritten).
fn snooze_patch(until: Timestamp, resource_version: Option<&str>) -> Value {
    json!({"metadata": {
        "resourceVersion": resource_version,
        "annotations": {SNOOZED_UNTIL: until.to_string()},
    }})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // fixtures

    use kube::api::ApiResource;

    use super::*;

    fn job(annotations: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "nightly", "namespace": "team-a", "resourceVersion": "7",
                            "annotations": annotations}})
    }

    fn api(client: Client) -> Api<DynamicObject> {
        let jobs = ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&());
        Api::namespaced_with(client, "team-a", &jobs)
    }

    const NOW: &str = "2026-06-01T12:00:00.250Z";
    const PATH: &str = "/apis/batch/v1/namespaces/team-a/jobs/nightly";

    #[tokio::test]
    async fn writes_now_plus_the_duration_on_the_version_read() {
        let (client, mut server) = kube_retention_apimock::pair();
        let snoozing = tokio::spawn(async move {
            let api = api(client);
            snooze(
                &api,
                "nightly",
                "job/nightly",
                Duration::from_secs(86_400),
                NOW.parse().unwrap(),
            )
            .await
        });
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {PATH}"));
        get.reply(200, &job(json!({})));
        let patch = server.next().await.unwrap();
        assert_eq!(patch.line(), format!("PATCH {PATH}"));
        assert_eq!(patch.content_type, "application/merge-patch+json");
        assert_eq!(
            patch.body,
            json!({"metadata": {"resourceVersion": "7",
                   "annotations": {"retention.dev/snoozed-until": "2026-06-02T12:00:01Z"}}})
        );
        patch.reply(
            200,
            &job(json!({"retention.dev/snoozed-until": "2026-06-02T12:00:01Z"})),
        );
        let Snoozed::Written(patched, until) = snoozing.await.unwrap().unwrap() else {
            panic!("not written");
        };
        assert_eq!(patched.annotations()[SNOOZED_UNTIL], "2026-06-02T12:00:01Z");
        assert_eq!(until.to_string(), "2026-06-02T12:00:01Z");
        assert!(server.quiet().await, "nothing else is sent");
    }

    #[tokio::test]
    async fn a_later_snooze_stands_and_a_refusal_names_what_failed() {
        let (client, mut server) = kube_retention_apimock::pair();
        let snoozing = tokio::spawn(async move {
            let api = api(client);
            let now = NOW.parse().unwrap();
            let hour = Duration::from_secs(3600);
            let later = snooze(&api, "nightly", "job/nightly", hour, now).await;
            let refused = snooze(&api, "nightly", "job/nightly", hour, now).await;
            (later, refused)
        });
        server.next().await.unwrap().reply(
            200,
            &job(json!({"retention.dev/snoozed-until": "2026-06-05T00:00:00Z"})),
        );
        server.next().await.unwrap().reply(200, &job(json!({})));
        server
            .next()
            .await
            .unwrap()
            .refuse(403, "jobs.batch \"nightly\" is forbidden: cannot patch");
        let (later, refused) = snoozing.await.unwrap();
        assert!(
            matches!(later.unwrap(), Snoozed::Standing(standing) if standing.to_string() == "2026-06-05T00:00:00Z"),
            "no PATCH for a later snooze"
        );
        let error = format!("{:#}", refused.unwrap_err());
        assert!(
            error.starts_with("snoozing job/nightly until 2026-06-01T13:00:01Z: "),
            "{error}"
        );
        assert!(error.contains("cannot patch"), "{error}");
    }
}
