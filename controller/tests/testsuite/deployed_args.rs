//! The arguments `deploy/` (and the chart, which renders the same objects) gives the controller
//! parse: a pod that cannot start over a spelling ("Background", as Kubernetes writes it) was
//! first seen on a real node.

use clap::Parser;
use kube_retention_controller::args::{Args, Propagation};

/// The `- --flag` lines of the controller container's `args:` in deploy/'s Deployment.
fn deployed_args() -> Vec<String> {
    let manifest = include_str!("../../../deploy/controller/deployment.yaml");
    let mut lines = manifest.lines().skip_while(|line| line.trim() != "args:");
    lines.next();
    lines
        .map(str::trim)
        .take_while(|line| line.starts_with("- --") || line.starts_with('#'))
        .filter_map(|line| line.strip_prefix("- "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_deployed_arguments_parse() {
    let args = deployed_args();
    assert!(
        args.iter()
            .any(|arg| arg == "--propagation-policy=Background"),
        "deploy/ sets the propagation policy as Kubernetes spells it: {args:?}"
    );
    let parsed =
        Args::try_parse_from(std::iter::once("kube-retention-controller".to_owned()).chain(args));
    match parsed {
        Ok(parsed) => assert_eq!(parsed.propagation_policy, Propagation::Background),
        Err(error) => panic!("deploy/'s controller arguments do not parse: {error}"),
    }
}

#[test]
fn propagation_policies_parse_in_either_case() {
    for (given, expected) in [
        ("Foreground", Propagation::Foreground),
        ("orphan", Propagation::Orphan),
        ("BACKGROUND", Propagation::Background),
    ] {
        let parsed = Args::try_parse_from([
            "kube-retention-controller",
            &format!("--propagation-policy={given}"),
        ]);
        assert_eq!(
            parsed.map(|args| args.propagation_policy).ok(),
            Some(expected),
            "{given}"
        );
    }
}
