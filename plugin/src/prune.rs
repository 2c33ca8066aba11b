//! `kubectl retention prune`: the embeddable prune library run once, its plan printed in dry
//! run and its deletions otherwise. `--succeeded-limit`/`--failed-limit` are the controller's
//! count limits (`Strategy::Limits`); `--max-count` is the finish-time rule
//! (`Strategy::NewestFinished`), a different one, and the reasons printed say which decided.

use anyhow::{Result, bail};
use jiff::Timestamp;
use kube::Client;
use kube::api::ApiResource;
use kube_retention_common::kinds::{Registry, Resource};
use kube_retention_common::ledger::Entry;
use kube_retention_common::progress::Outcome;
use kube_retention_prune::{Decision, Planned, Pruned, Pruner, Strategy, Target};

use crate::kinds;
use crate::output::{self, Format};
use crate::scope::Scope;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// The kind: `jobs`, `job`, `buildruns.shipwright.io`, `BuildRun.shipwright.io`...
    pub kind: String,
    #[command(flatten)]
    pub scope: Scope,
    /// A label selector, e.g. `app=nightly`.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Keep the newest N succeeded objects per namespace by creation time: the controller's
    /// rule, as a RetentionPolicy's succeededLimit (running objects never count; those
    /// annotated retention.dev/keep or being deleted are left out of the count).
    #[arg(long, value_name = "N")]
    pub succeeded_limit: Option<u32>,
    /// Keep the newest N failed objects per namespace by creation time: the controller's rule,
    /// as a RetentionPolicy's failedLimit.
    #[arg(long, value_name = "N")]
    pub failed_limit: Option<u32>,
    /// Keep the newest N finished objects per namespace, by finish time, across outcomes; see
    /// --succeeded-limit for the controller's rule.
    #[arg(long, value_name = "N")]
    pub max_count: Option<usize>,
    /// Prune objects finished longer ago than this (e.g. 72h, 30m).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_age: Option<Duration>,
    /// Print the plan; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Announce each deletion to this deletion-ledger sink (an http(s) URL) as the controller
    /// does: a CloudEvent `dev.retention.deleted` with `reason: prune`. The command fails if
    /// any is not delivered (the deletions stand).
    #[arg(long, value_name = "URL")]
    pub ledger_sink: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

pub async fn run(client: Client, registry: &Registry, args: PruneArgs) -> Result<()> {
    let strategies = strategies(&args);
    if strategies.is_empty() {
        bail!(
            "say what to keep: --succeeded-limit N and/or --failed-limit N (the controller's \
             limits: the newest N of each outcome by creation time), --max-count N (the newest N \
             finished by finish time, across outcomes) and/or --max-age DURATION"
        );
    }
    let resource = kinds::resolve(&client, &args.kind).await?;
    if let Some(name) = left_alone(registry, &resource) {
        eprintln!(
            "note: the controller leaves {name} alone (--disable-kind); pruning it as asked, with \
             kube-retention's rules for it"
        );
    }
    let api_version = resource.api_version.clone();
    let mut target = Target::new(resource);
    if !args.scope.all_namespaces {
        let namespace = args
            .scope
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        target = target.in_namespace(namespace);
    }
    if let Some(selector) = &args.selector {
        target = target.selector(selector);
    }
    let pruner = strategies
        .into_iter()
        .fold(Pruner::new(client).target(target), Pruner::strategy);
    let result = if args.dry_run {
        Pruned {
            plan: pruner.plan().await?,
            ..Pruned::default()
        }
    } else {
        pruner.prune().await?
    };
    let verb = if args.dry_run {
        "would prune"
    } else {
        "pruned"
    };
    let now = Timestamp::now();
    let rows: Vec<Vec<String>> = result
        .plan
        .to_prune()
        .filter(|planned| {
            args.dry_run
                || result
                    .deleted
                    .contains(&format!("{}/{}", planned.namespace, planned.name))
        })
        .map(|planned| row(planned, verb, now))
        .collect();
    if args.output == Format::Table && rows.is_empty() {
        println!("nothing to prune");
        return Ok(());
    }
    output::print(
        args.output,
        &["NAMESPACE", "KIND", "NAME", "FINISHED", "ACTION"],
        &rows,
        &result,
    )?;
    if args.output == Format::Table {
        let kept = result.plan.objects.len() - result.plan.to_prune().count();
        println!("{} {verb}, {kept} kept", rows.len());
    }
    match (&args.ledger_sink, args.dry_run) {
        (Some(sink), false) => {
            let entries = ledger_entries(&result, &api_version, now);
            crate::ledger::announce(sink, entries, crate::ledger::delivery()).await
        }
        _ => Ok(()),
    }
}

/// The ledger's entry for each object `result` deleted.
fn ledger_entries(result: &Pruned, api_version: &str, now: Timestamp) -> Vec<Entry> {
    result
        .plan
        .to_prune()
        .filter(|planned| {
            let key = format!("{}/{}", planned.namespace, planned.name);
            result.deleted.contains(&key)
        })
        .map(|planned| Entry {
            api_version: api_version.to_owned(),
            kind: planned.kind.clone(),
            namespace: planned.namespace.clone(),
            name: planned.name.clone(),
            uid: planned.uid.clone(),
            reason: "prune".to_owned(),
            decided_by: "kubectl retention prune".to_owned(),
            setting: Some(why(&planned.decision)),
            deadline: None,
            time: now,
            object: None,
            object_truncated: false,
        })
        .collect()
}

/// The strategies the flags ask for, the controller's limits first.
fn strategies(args: &PruneArgs) -> Vec<Strategy> {
    let mut strategies = Vec::new();
    if args.succeeded_limit.is_some() || args.failed_limit.is_some() {
        strategies.push(Strategy::Limits {
            succeeded: args.succeeded_limit,
            failed: args.failed_limit,
        });
    }
    strategies.extend(args.max_count.map(Strategy::NewestFinished));
    strategies.extend(args.max_age.map(Strategy::MaxAge));
    strategies
}

fn row(planned: &Planned, verb: &str, now: Timestamp) -> Vec<String> {
    let age = planned.finished.map_or_else(
        || "-".to_owned(),
        |at| {
            let ago = now
                .duration_since(at)
                .round(jiff::Unit::Second)
                .unwrap_or_default();
            format!("{ago:#} ago")
        },
    );
    vec![
        planned.namespace.clone(),
        planned.kind.clone(),
        planned.name.clone(),
        age,
        format!("{verb} ({})", why(&planned.decision)),
    ]
}

/// Why an object goes, in words.
fn why(decision: &Decision) -> String {
    match decision {
        Decision::Limits { outcome, limit } => {
            let outcome = match outcome {
                Outcome::Succeeded => "succeeded",
                Outcome::Failed => "failed",
            };
            format!("beyond the newest {limit} {outcome}")
        }
        Decision::NewestFinished { limit } => format!("beyond the newest {limit} finished"),
        Decision::MaxAge { limit } => format!("finished over {limit} ago"),
        Decision::Custom { strategy } => strategy.clone(),
        other => format!("{other:?}"),
    }
}

/// The kind's `Kind.group` name where it is built in but the controller's `registry` left it out.
fn left_alone(registry: &Registry, resource: &ApiResource) -> Option<String> {
    let known = |table: &Registry| {
        table
            .find_group_kind(&resource.group, &resource.kind)
            .is_some()
    };
    (known(Registry::builtin()) && !known(registry)).then(|| Resource::from(resource).to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use kube_retention_common::progress::Outcome;
    use kube_retention_prune::{Decision, Strategy};

    use super::PruneArgs;
    use crate::args::{Args, Command};

    fn parse(flags: &[&str]) -> PruneArgs {
        let args = ["kubectl-retention", "prune", "jobs"].iter().chain(flags);
        match Args::try_parse_from(args).map(|args| args.command) {
            Ok(Command::Prune(args)) => args,
            other => panic!("{flags:?} parsed as {other:?}"),
        }
    }

    fn strategies(flags: &[&str]) -> Vec<String> {
        super::strategies(&parse(flags))
            .iter()
            .map(|strategy| format!("{strategy:?}"))
            .collect()
    }

    #[test]
    fn the_limit_flags_are_the_controllers_limits_and_max_count_the_finish_time_rule() {
        assert_eq!(
            strategies(&["--succeeded-limit", "3", "--failed-limit", "1"]),
            ["Limits { succeeded: Some(3), failed: Some(1) }"]
        );
        assert_eq!(
            strategies(&["--failed-limit", "2", "--max-count", "5", "--max-age", "1h"]),
            [
                "Limits { succeeded: None, failed: Some(2) }",
                "NewestFinished(5)",
                "MaxAge(3600s)"
            ]
        );
        assert!(super::strategies(&parse(&[])).is_empty());
        assert!(matches!(
            super::strategies(&parse(&["--max-count", "0"]))[..],
            [Strategy::NewestFinished(0)]
        ));
    }

    #[test]
    fn the_reasons_say_which_rule() {
        let limits = |outcome| Decision::Limits { outcome, limit: 3 };
        assert_eq!(
            super::why(&limits(Outcome::Succeeded)),
            "beyond the newest 3 succeeded"
        );
        assert_eq!(
            super::why(&limits(Outcome::Failed)),
            "beyond the newest 3 failed"
        );
        assert_eq!(
            super::why(&Decision::NewestFinished { limit: 2 }),
            "beyond the newest 2 finished"
        );
    }
}
