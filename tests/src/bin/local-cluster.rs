//! `local-cluster up|down|status`: the local cluster behind `make up` and `make down`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kube_retention_e2e::cluster::ShippedImage;
use kube_retention_e2e::{Layout, LocalCluster, Outcome};

#[derive(Parser)]
#[command(about = "A local Kubernetes control plane for kube-retention, on 127.0.0.1 only")]
struct Args {
    /// Folder for the cluster's certificates, data, kubeconfigs, logs and pid files.
    #[arg(long, default_value = ".local", global = true)]
    state: PathBuf,
    #[command(subcommand)]
    command: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Start the cluster (a no-op when it already runs), install the CRDs and deploy/local.
    Up {
        /// With a node (containerd, kubelet, kube-proxy) running kube-retention as shipped: the
        /// image imported and the chart installed; no kube-retention host process.
        #[arg(long)]
        node: bool,
        /// The OCI archive from `make image`, for --node.
        #[arg(long, default_value = "target/image/kube-retention.oci.tar")]
        image: PathBuf,
    },
    /// Stop every process `up` started, by pid; logs stay.
    Down,
    /// Say whether the cluster runs, and which Kubernetes minor.
    Status,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("local-cluster: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(args.state)?;
    match args.command {
        Action::Up { node, image } => {
            let (cluster, outcome) = if node {
                let image = ShippedImage::in_registry(&image)?;
                let chart = layout.repo_root.join("charts/kube-retention");
                LocalCluster::up_with_node(layout, &image, &chart)?
            } else {
                LocalCluster::up(layout)?
            };
            match outcome {
                Outcome::AlreadyRunning => println!(
                    "local cluster (Kubernetes {}) already up at {}",
                    cluster.layout.kubernetes_release()?,
                    cluster.server()
                ),
                Outcome::Started => println!(
                    "local cluster (Kubernetes {}) up at {} (logs in {})",
                    cluster.layout.kubernetes_release()?,
                    cluster.server(),
                    cluster.layout.state("logs").display()
                ),
            }
            println!(
                "export KUBECONFIG={}",
                cluster.layout.kubeconfig().display()
            );
        }
        Action::Down => {
            let stopped = LocalCluster::down(&layout)?;
            if stopped.is_empty() {
                println!("local cluster was not running");
            } else {
                println!("stopped {}", stopped.join(", "));
            }
        }
        Action::Status => match LocalCluster::running(&layout) {
            Some(cluster) => println!(
                "up at {} (Kubernetes {})",
                cluster.server(),
                LocalCluster::recorded_minor(&layout)
                    .as_deref()
                    .unwrap_or("minor unknown")
            ),
            None => {
                println!("down");
                return Ok(ExitCode::from(3));
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
