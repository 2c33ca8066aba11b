//! `kubectl retention prune`: the embeddable prune library run once, its plan printed in dry
//! run and its deletions otherwise.

use anyhow::{Result, bail};
use jiff::Timestamp;
use kube::Client;
use kube_retention_prune::{Decision, Planned, Pruned, Pruner, Strategy, Target};

use crate::args::{Format, PruneArgs};
use crate::kinds;
use crate::output;

pub async fn run(client: Client, args: PruneArgs) -> Result<()> {
    if args.max_count.is_none() && args.max_age.is_none() {
        bail!(
            "say what to keep: --max-count N (the newest N per namespace) and/or --max-age DURATION"
        );
    }
    let resource = kinds::resolve(&client, &args.kind).await?;
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
    let mut pruner = Pruner::new(client).target(target);
    if let Some(count) = args.max_count {
        pruner = pruner.strategy(Strategy::MaxCount(count));
    }
    if let Some(age) = args.max_age {
        pruner = pruner.strategy(Strategy::MaxAge(age));
    }
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
    Ok(())
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
    let why = match &planned.decision {
        Decision::MaxCount { limit } => format!("beyond the newest {limit}"),
        Decision::MaxAge { limit } => format!("finished over {limit} ago"),
        Decision::Custom { strategy } => strategy.clone(),
        other => format!("{other:?}"),
    };
    vec![
        planned.namespace.clone(),
        planned.kind.clone(),
        planned.name.clone(),
        age,
        format!("{verb} ({why})"),
    ]
}
