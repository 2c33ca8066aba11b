//! The end-to-end suite: starts a private local cluster (its own state folder and ports, so it
//! never collides with `make up`), runs every test against it in a temporary namespace of its
//! own, and stops the cluster. Run by `make test` (`cargo test -p kube-retention-e2e --features e2e`).
//!
//! Who writes: tests act as the cluster's admin (group `system:masters`), who may delete anything,
//! so the webhook's writer check admits their retention settings; kube-retention's processes run
//! as their ServiceAccounts with the RBAC of deploy/. [`writers`] tests the check with users that
//! exist only as RBAC subjects.

mod admission;
mod audit;
mod breaker;
mod certs;
mod chaos;
mod chart;
mod cleaners;
mod controller;
mod foundation;
mod intent;
mod kinds;
mod lifecycle;
mod listeners;
mod lists;
mod plugin;
mod policies;
mod room;
mod schema;
mod server;
mod support;
mod workloads;
mod writers;

use std::process::ExitCode;

use libtest_mimic::{Arguments, Trial};
use support::Env;

/// Which trials run: `KUBE_RETENTION_E2E=all` (the default) or `core`, what `make e2e-oldest` runs
/// on the oldest pinned Kubernetes minor (`make e2e-core` on any): the foundation, every seed system,
/// admission and its denials, the controller, intent, policies with CEL and the guard, the writer
/// check and Cleaners with Helm; of the trials that stop processes, the breaker, the lists'
/// fallbacks, the schema and the writer policy without the webhook. Left out: the chart, the
/// plugin, the chaos suite's short form, and the other restarts (webhook and certificate
/// rotation, lifecycle).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Set {
    All,
    Core,
}

impl Set {
    fn from_env() -> Result<Self, String> {
        match std::env::var("KUBE_RETENTION_E2E").as_deref() {
            Err(_) | Ok("" | "all") => Ok(Self::All),
            Ok("core") => Ok(Self::Core),
            Ok(other) => Err(format!(
                "KUBE_RETENTION_E2E={other}: the sets are `all` (the default) and `core`"
            )),
        }
    }
}

fn main() -> ExitCode {
    let arguments = Arguments::from_args();
    let set = match Set::from_env() {
        Ok(set) => set,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let env = match Env::start() {
        Ok(env) => env,
        Err(error) => {
            eprintln!("could not start the local cluster: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let mut tests: Vec<Trial> = foundation::tests(&env);
    tests.extend(admission::tests(&env));
    tests.extend(controller::tests(&env));
    tests.extend(intent::tests(&env));
    tests.extend(kinds::tests(&env));
    tests.extend(policies::tests(&env));
    tests.extend(writers::tests(&env));
    tests.extend(cleaners::tests(&env));
    if set == Set::All {
        tests.extend(chart::tests(&env));
        tests.extend(plugin::tests(&env));
        tests.extend(chaos::tests(&env));
    }
    let mut conclusion = libtest_mimic::run(&arguments, tests);
    // Trials that stop kube-retention's processes run last, one at a time.
    let serial = Arguments {
        test_threads: Some(1),
        ..arguments.clone()
    };
    // In the order they always ran; `true` marks the core set's.
    let disruptive_groups = [
        (admission::disruptive_tests(&env), false),
        (certs::disruptive_tests(&env), false),
        (lifecycle::disruptive_tests(&env), false),
        (lists::disruptive_tests(&env), true),
        (breaker::disruptive_tests(&env), true),
        (room::disruptive_tests(&env), true),
        (intent::disruptive_tests(&env), false),
        (cleaners::disruptive_tests(&env), false),
        (schema::disruptive_tests(&env), true),
        (writers::disruptive_tests(&env), true),
        (chaos::disruptive_tests(&env), false),
    ];
    let disruptive_tests: Vec<Trial> = disruptive_groups
        .into_iter()
        .filter(|(_, core)| *core || set == Set::All)
        .flat_map(|(trials, _)| trials)
        .collect();
    let disruptive = libtest_mimic::run(&serial, disruptive_tests);
    let release = env.cluster.layout.kubernetes_release();
    if let Err(error) = release.and_then(|release| chaos::write_report(&release)) {
        eprintln!("writing the chaos report: {error:#}");
    }
    if conclusion.num_failed + disruptive.num_failed > 0 {
        env.keep_logs("e2e");
    }
    env.stop();
    conclusion.num_passed += disruptive.num_passed;
    conclusion.num_failed += disruptive.num_failed;
    conclusion.num_filtered_out += disruptive.num_filtered_out;
    conclusion.num_ignored += disruptive.num_ignored;
    support::print_failures();
    println!(
        "e2e: {} passed, {} failed",
        conclusion.num_passed, conclusion.num_failed
    );
    conclusion.exit_code()
}
