//! `kubectl retention`: kube-retention from kubectl. Found by kubectl on PATH as
//! `kubectl-retention`; everything is in the library modules, `main` only parses and runs.

use std::process::ExitCode;

use clap::Parser;

mod args;
mod kinds;
mod output;
mod prune;

fn main() -> ExitCode {
    args::Args::parse().run()
}
