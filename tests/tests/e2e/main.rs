//! The end-to-end suite: starts a private local cluster (its own state folder and ports, so it
//! never collides with `make up`), runs every test against it in a temporary namespace of its
//! own, and stops the cluster. Run by `make test` (`cargo test -p kube-retention-e2e --features e2e`).

mod foundation;
mod support;

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
    let tests: Vec<Trial> = foundation::tests(&env);
    let conclusion = libtest_mimic::run(&arguments, tests);
    env.stop();
    conclusion.exit_code()
}
