//! Prints the `retention.dev` CRDs (`make crds` writes them to deploy/crds and charts/kube-retention/crds).

use std::process::ExitCode;

fn main() -> ExitCode {
    match kube_retention_controller::crds::render() {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("rendering the CRDs: {error}");
            ExitCode::FAILURE
        }
    }
}
