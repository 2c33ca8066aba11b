//! `kube-retention-webhook`: validating and mutating admission for retention settings.
//!
//! Its one background task beside the server, `tls-reload` (the certificate's reload), is
//! supervised ([`kube_retention_runtime::supervise`]): if it ends or panics the webhook names it and
//! exits non-zero, for the kubelet to restart it; SIGTERM still drains and exits 0. Builds with
//! the `fault-injection` feature end it on `KUBE_RETENTION_FAULT=tls-reload` (`:panic` to panic)
//! after `KUBE_RETENTION_FAULT_AFTER_SECONDS`.

use std::process::ExitCode;

use clap::Parser;
use kube_retention_webhook::args::Args;

/// The image's static musl binaries would otherwise allocate through musl's own allocator: one
/// lock for every allocation, a third of mimalloc's admission throughput (docs/benchmarks/webhook.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The static build's memcpy in place of musl's (see the crate).
#[cfg(feature = "memcpy")]
use kube_retention_memcpy as _;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    kube_retention_runtime::init_logging(args.log_format);
    kube_retention_runtime::exit_code("kube-retention-webhook", args.run().await)
}
