//! Prints the writer check's ValidatingAdmissionPolicy (`make admission-policy`): `deploy`, both
//! objects for deploy/admission/writers.yaml; `chart`, the policy's spec for the chart's
//! files/writers-policy.yaml.

use std::process::ExitCode;

use kube_retention_controller::admission_policy;

fn main() -> ExitCode {
    let which = std::env::args().nth(1);
    let rendered = match which.as_deref() {
        Some("deploy") => admission_policy::render_deploy(),
        Some("chart") => admission_policy::render_chart_spec(),
        _ => {
            eprintln!("usage: kube-retention-admission-policy deploy|chart");
            return ExitCode::FAILURE;
        }
    };
    match rendered {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("rendering the admission policy: {error}");
            ExitCode::FAILURE
        }
    }
}
