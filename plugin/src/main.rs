//! `kubectl retention`: kube-retention from kubectl. Found by kubectl on PATH as
//! `kubectl-retention`; everything is in the library modules, `main` only parses and runs.

use std::process::ExitCode;

use clap::Parser;

mod approve;
mod args;
mod breaker;
mod connection;
mod explain;
mod kinds;
mod ledger;
mod model;
mod output;
mod prune;
mod scope;
mod selftest;
mod snooze;
mod upcoming;

fn main() -> ExitCode {
    args::Args::parse().run()
}
