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

/// What the controller holds beside tenants' objects and its records — its code, tasks,
/// connections' buffers, policies and Cleaners — with room: 33 MiB idle through the hostile
/// tenant's run, 50 MiB with 100,000 objects tracked (docs/reliability.md,
/// docs/benchmarks/controller.md).
const WORKING_SET_MIB: usize = 40;

/// The `memory:` limit of the container in `manifest` (`limits: {memory: 384Mi}`), in MiB.
fn memory_limit_mib(manifest: &str) -> usize {
    let limit = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("limits: {memory: "))
        .expect("a memory limit");
    let mib = limit.strip_suffix("Mi}").expect("given in Mi");
    mib.parse().expect("a whole number of MiB")
}

/// `key: value` of the `controller:` values, as the chart gives them.
fn chart_value(values: &str, key: &str) -> usize {
    let controller = values
        .split("\ncontroller:\n")
        .nth(1)
        .expect("controller values");
    controller
        .lines()
        .take_while(|line| line.is_empty() || line.starts_with(' ') || line.starts_with('#'))
        .find_map(|line| line.strip_prefix(&format!("  {key}: ")))
        .unwrap_or_else(|| panic!("controller.{key}"))
        .parse()
        .unwrap_or_else(|_| panic!("controller.{key} a number"))
}

/// Every hard bound on what the controller holds, in MiB, with `args`, and what each is.
fn bounds_mib(args: &Args) -> Vec<(&'static str, usize)> {
    const MIB: usize = 1024 * 1024;
    let concurrency = usize::try_from(args.list_concurrency).unwrap();
    vec![
        ("its working set", WORKING_SET_MIB),
        (
            "the tracked records",
            (args.max_tracked_objects * kube_retention_state::RECORD_BYTES).div_ceil(MIB),
        ),
        ("tenants' decoded objects", args.max_object_memory),
        // Each page's text, and its items' text until each is decoded.
        (
            "the pages being read",
            concurrency * args.list_page_memory * 2,
        ),
        (
            "the evaluator process",
            usize::try_from(args.evaluator_memory).unwrap(),
        ),
    ]
}

/// The memory limit deploy/ and the chart give the controller's container holds every bound on
/// what the controller and its evaluator process hold together: a tenant filling them all at
/// once does not take the pod past it. The bounds added up to more than the limit before the
/// budget of decoded objects (`--max-object-memory`) bounded their sum.
#[test]
fn the_deployed_memory_limit_holds_every_bound_on_what_the_controller_holds() {
    let args = Args::try_parse_from(
        std::iter::once("kube-retention-controller".to_owned()).chain(deployed_args()),
    )
    .unwrap();
    let bounds = bounds_mib(&args);
    let total: usize = bounds.iter().map(|(_, mib)| mib).sum();
    let deployed = memory_limit_mib(include_str!("../../../deploy/controller/deployment.yaml"));
    assert!(total <= deployed, "deploy/'s {deployed}Mi holds {bounds:?}");
    let values = include_str!("../../../charts/kube-retention/values.yaml");
    let chart = Args::try_parse_from([
        "kube-retention-controller".to_owned(),
        format!(
            "--max-tracked-objects={}",
            chart_value(values, "maxTrackedObjects")
        ),
        format!(
            "--max-object-memory={}",
            chart_value(values, "maxObjectMemory")
        ),
        format!(
            "--evaluator-memory={}",
            chart_value(values, "evaluatorMemory")
        ),
    ])
    .unwrap();
    let chart_bounds = bounds_mib(&chart);
    let chart_total: usize = chart_bounds.iter().map(|(_, mib)| mib).sum();
    let controller = values.split("\ncontroller:\n").nth(1).unwrap();
    let limit = memory_limit_mib(controller.split("\nwebhook:\n").next().unwrap());
    assert!(
        chart_total <= limit,
        "the chart's {limit}Mi holds {chart_bounds:?}"
    );
    assert_eq!(limit, deployed, "the chart and deploy/ give the same limit");
}
