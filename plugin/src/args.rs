//! The command line's root: the connection and controller flags every command shares, the
//! commands, and the dispatch to each. Each command's own arguments are in its module, shaped
//! like kubectl's (`-n`, `-A`, `-l`, `-o`).

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::approve::ApproveArgs;
use crate::breaker::BreakerArgs;
use crate::connection::Connection;
use crate::explain::ExplainArgs;
use crate::kinds::ControllerLease;
use crate::prune::PruneArgs;
use crate::snooze::SnoozeArgs;
use crate::upcoming::UpcomingArgs;

#[derive(Debug, Parser)]
#[command(
    name = "kubectl-retention",
    version,
    about = "kube-retention from kubectl: prune finished objects now"
)]
pub struct Args {
    #[command(flatten)]
    pub connection: Connection,
    /// The namespace kube-retention runs in: its controller's Lease there says which kinds it
    /// acts on (its --kind and --disable-kind), and the commands judge with those; `explain`
    /// asks whether the controller's service account there may delete the object.
    #[arg(
        long,
        global = true,
        env = "KUBE_RETENTION_NAMESPACE",
        default_value = "kube-retention"
    )]
    pub controller_namespace: String,
    /// The controller's Lease (its --lease-name).
    #[arg(long, global = true, default_value = "kube-retention-controller")]
    pub controller_lease: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Which rule decides when KIND NAME is deleted and where it comes from (annotation, the
    /// object's fields, its Build, a RetentionPolicy by name), the deadline, or why it never is.
    Explain(ExplainArgs),
    /// The next deletions, soonest first.
    Upcoming(UpcomingArgs),
    /// Prune finished objects of KIND now, for people who want a CronJob instead of a
    /// controller: keep the newest --succeeded-limit succeeded and --failed-limit failed (the
    /// controller's limits), and/or the newest --max-count by finish time, and/or drop those
    /// finished more than --max-age ago. Running objects, objects annotated retention.dev/keep
    /// and objects already being deleted are never pruned.
    Prune(PruneArgs),
    /// Approve a RetentionPolicy's (`policy NAME -n NS`), ClusterRetentionPolicy's
    /// (`clusterpolicy NAME`) or Cleaner's (`cleaner NAME -n NS`) current generation past its
    /// blast-radius guard: what it holds back is deleted. A policy's needs the permissions
    /// writing the policy needs (delete and list on what it governs); a Cleaner's, patch on the
    /// Cleaner.
    Approve(ApproveArgs),
    /// The controller's circuit breakers: each namespace's, which stops that namespace's
    /// deletions once more went within its window than its limit (--circuit-breaker), and the
    /// cluster's, which stops every deletion past the cluster's total
    /// (--cluster-circuit-breaker). `status`, or `release` to resume (what it held goes first):
    /// the cluster's, `-n NAMESPACE` a namespace's, `-A` every namespace's. Releasing needs
    /// delete (patch for `-n`) on ConfigMaps in --controller-namespace.
    Breaker(BreakerArgs),
    /// Keep KIND/NAME at least DURATION longer (e.g. `job/nightly-1 24h`): writes
    /// retention.dev/snoozed-until, which pushes whatever deadline governs it. Needs patch on
    /// the object; a later snooze already there stands.
    Snooze(SnoozeArgs),
    /// Prove kube-retention works here: the webhook refuses an invalid RetentionPolicy (a dry
    /// run), stamps a ConfigMap given a 2s time to live, and the controller deletes it. Needs
    /// create on RetentionPolicies and create, get and delete on ConfigMaps in the namespace.
    Selftest(crate::selftest::SelftestArgs),
    /// A completion script for bash, zsh, fish, elvish or PowerShell, for `kubectl-retention`:
    /// e.g. `kubectl-retention completion bash > /etc/bash_completion.d/kubectl-retention`.
    Completion(CompletionArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    pub shell: clap_complete::Shell,
}

impl Args {
    pub fn run(self) -> ExitCode {
        // A completion script needs no cluster, nor a runtime.
        if let Command::Completion(args) = &self.command {
            use clap::CommandFactory;
            let mut stdout = std::io::stdout();
            clap_complete::generate(
                args.shell,
                &mut Self::command(),
                "kubectl-retention",
                &mut stdout,
            );
            return ExitCode::SUCCESS;
        }
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        };
        let mut server = None;
        let outcome = runtime.block_on(async {
            let config = self.connection.config().await?;
            server = Some(config.cluster_url.to_string());
            let client = kube::Client::try_from(config).context("building the API client")?;
            let lease = ControllerLease {
                namespace: self.controller_namespace,
                name: self.controller_lease,
            };
            // Approving and the breaker do not judge objects: no kinds to read.
            let judging = match self.command {
                Command::Approve(args) => return crate::approve::run(client, args).await,
                Command::Breaker(args) => return crate::breaker::run(client, &lease, args).await,
                Command::Selftest(args) => return crate::selftest::run(client, args).await,
                Command::Explain(_)
                | Command::Upcoming(_)
                | Command::Prune(_)
                | Command::Snooze(_)
                | Command::Completion(_) => self.command,
            };
            let (kinds, note) = crate::kinds::of_controller(&client, &lease).await;
            if let Some(note) = note {
                eprintln!("note: {note}");
            }
            match judging {
                Command::Explain(args) => crate::explain::run(client, &kinds, &lease, args).await,
                Command::Upcoming(args) => crate::upcoming::run(client, &kinds, args).await,
                Command::Prune(args) => crate::prune::run(client, &kinds, args).await,
                Command::Snooze(args) => crate::snooze::run(client, &kinds, args).await,
                Command::Approve(_)
                | Command::Breaker(_)
                | Command::Selftest(_)
                | Command::Completion(_) => Ok(()),
            }
        });
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                if let Some(server) = server.filter(|_| unreachable(&error)) {
                    eprintln!(
                        "note: the API server was {server} (--context, --cluster, --kubeconfig)"
                    );
                }
                ExitCode::FAILURE
            }
        }
    }
}

/// Whether `error` is a failure to reach the API server at all, not an answer from it.
fn unreachable(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<kube::Error>(),
            Some(kube::Error::Service(_) | kube::Error::HyperError(_))
        )
    })
}
