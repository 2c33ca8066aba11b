//! `kube-retention-controller`: deletes finished objects on time and enforces count limits.

use std::process::ExitCode;

use clap::Parser;
use kube_retention_controller::args::Args;
// The static build's memcpy in place of musl's (see the crate).
use kube_retention_memcpy as _;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    kube_retention_runtime::init_logging(args.log_format);
    kube_retention_runtime::exit_code(kube_retention_controller::NAME, args.run().await)
}
