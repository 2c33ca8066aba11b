//! `kube-retention-controller`: deletes finished objects on time and enforces count limits.
//!
//! `kube-retention-controller evaluate` (not in `--help`) is the CEL evaluator process the
//! controller starts itself and bounds (`kube_retention_evaluator::sandbox`): tenants'
//! expressions run there, never in the controller.

use std::process::ExitCode;

use clap::Parser;
use kube_retention_controller::args::Args;
// The static build's memcpy in place of musl's (see the crate).
use kube_retention_memcpy as _;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args
        .peek()
        .is_some_and(|first| first == kube_retention_controller::EVALUATE)
    {
        return kube_retention_evaluator::sandbox::child::main_from_args(args.skip(1));
    }
    controller()
}

#[tokio::main]
async fn controller() -> ExitCode {
    let args = Args::parse();
    kube_retention_runtime::init_logging(args.log_format);
    kube_retention_runtime::exit_code(kube_retention_controller::NAME, args.run().await)
}
