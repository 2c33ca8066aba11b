//! The evaluator process on its own, for the evaluator crate's tests (the controller runs the
//! same as its hidden `evaluate` subcommand).

fn main() -> std::process::ExitCode {
    kube_retention_evaluator::sandbox::child::main_from_args(std::env::args_os().skip(1))
}
