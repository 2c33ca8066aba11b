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
mod schema;
mod support;
mod workloads;
mod writers;

use std::process::ExitCode;

use libtest_mimic::{Arguments, Trial};
use support::Env;

fn main() -> ExitCode {
    let arguments = Arguments::from_args();
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
    tests.extend(chart::tests(&env));
    tests.extend(plugin::tests(&env));
    tests.extend(chaos::tests(&env));
    let mut conclusion = libtest_mimic::run(&arguments, tests);
    // Trials that stop kube-retention's processes run last, one at a time.
    let serial = Arguments {
        test_threads: Some(1),
        ..arguments.clone()
    };
    let mut disruptive_tests = admission::disruptive_tests(&env);
    disruptive_tests.extend(certs::disruptive_tests(&env));
    disruptive_tests.extend(lifecycle::disruptive_tests(&env));
    disruptive_tests.extend(lists::disruptive_tests(&env));
    disruptive_tests.extend(breaker::disruptive_tests(&env));
    disruptive_tests.extend(intent::disruptive_tests(&env));
    disruptive_tests.extend(cleaners::disruptive_tests(&env));
    disruptive_tests.extend(schema::disruptive_tests(&env));
    disruptive_tests.extend(chaos::disruptive_tests(&env));
    let disruptive = libtest_mimic::run(&serial, disruptive_tests);
    if let Err(error) = chaos::write_report("v1.35.4") {
        eprintln!("writing the chaos report: {error:#}");
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
