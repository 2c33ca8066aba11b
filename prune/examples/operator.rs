//! A whole operator that prunes with kube-retention-prune: every `--interval`, finished Jobs of
//! `--namespace` labelled `--selector` beyond the newest `--keep` by finish time go, except
//! those labelled `audit=hold`, which its hook vetoes. `--once` prunes once and prints what
//! went (as JSON).
//!
//!     cargo run -p kube-retention-prune --example operator -- --namespace ci --keep 3

use std::time::Duration;

use clap::Parser;
use kube::api::{ApiResource, GroupVersionKind};
use kube_retention_prune::{Pruner, Strategy, Target};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    namespace: String,
    #[arg(long, default_value = "app")]
    selector: String,
    #[arg(long, default_value_t = 3)]
    keep: usize,
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    interval: Duration,
    #[arg(long)]
    once: bool,
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = kube_retention_runtime::client(args.kubeconfig.as_deref()).await?;
    let jobs = ApiResource::from_gvk(&GroupVersionKind::gvk("batch", "v1", "Job"));
    let pruner = Pruner::new(client)
        .target(
            Target::new(jobs)
                .in_namespace(&args.namespace)
                .selector(&args.selector),
        )
        .strategy(Strategy::NewestFinished(args.keep))
        .before_delete(|job| {
            let held = job
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get("audit"));
            match held.map(String::as_str) {
                Some("hold") => Err("held for audit".into()),
                _ => Ok(()),
            }
        });
    let mut ticks = tokio::time::interval(args.interval);
    loop {
        ticks.tick().await;
        match pruner.prune().await {
            Ok(pruned) if args.once => {
                println!("{}", serde_json::to_string(&pruned)?);
                return Ok(());
            }
            Ok(pruned) => eprintln!("pruned {:?}", pruned.deleted),
            Err(error) if args.once => return Err(error.into()),
            Err(error) => eprintln!("prune failed ({}): {error}", error.metric_label()),
        }
    }
}
