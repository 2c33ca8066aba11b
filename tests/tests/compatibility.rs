//! The Kubernetes minors kube-retention targets are said in four places, which must agree with
//! the minors pinned in tests/cluster/kubernetes: the README, the chart's `kubeVersion`, the
//! controller's start-up check (`kube_retention_common::kubernetes`), and docs/compatibility.md
//! (`make test-matrix`), which must have a passed row for every pinned release and say the range
//! is supported: a newly pinned minor or release, or a minor that failed, is not claimed in the
//! README and the chart without the report to show for it.

use std::path::{Path, PathBuf};

use kube_retention_e2e::layout::{pinned_minors, pinned_release};

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(checkout().join(relative))
        .unwrap_or_else(|error| panic!("reading {relative}: {error}"))
}

#[test]
fn the_targeted_minors_are_said_alike_and_each_pinned_release_passed_in_the_report() {
    let root = checkout();
    let minors = pinned_minors(&root).expect("pinned minors");
    let (oldest, newest) = (
        minors.first().expect("a pinned minor"),
        minors.last().unwrap(),
    );
    let readme = read("README.md");
    assert!(
        readme.contains(&format!("targets **Kubernetes {oldest} to {newest}**")),
        "the README does not state the pinned range ({oldest} to {newest})"
    );
    assert_eq!(
        kube_retention_common::kubernetes::supported_range(),
        format!("{oldest} to {newest}"),
        "common/src/kubernetes.rs's SUPPORTED_MINORS is not the pinned range"
    );
    let chart = read("charts/kube-retention/Chart.yaml");
    let kube_version = format!("kubeVersion: \">={oldest}.0-0\"");
    assert!(
        chart.lines().any(|line| line == kube_version),
        "the chart's kubeVersion is not `{kube_version}`"
    );
    let report = read("docs/compatibility.md");
    let supported = format!("Supported: Kubernetes {oldest} to {newest}.");
    assert!(
        report.lines().any(|line| line == supported),
        "docs/compatibility.md does not say `{supported}`: run `make test-matrix`"
    );
    for minor in &minors {
        let release = pinned_release(&root, minor).expect("the pinned release");
        let row = report
            .lines()
            .find(|line| line.starts_with(&format!("| {minor} | {release} |")))
            .unwrap_or_else(|| {
                panic!("docs/compatibility.md has no row for {release}: run `make test-matrix`")
            });
        assert!(
            row.ends_with("| passed |"),
            "docs/compatibility.md: {release} did not pass: {row}"
        );
        let shipped = row.split(" | ").nth(7).unwrap_or_default();
        let ends = minor == oldest || minor == newest;
        assert!(
            !ends || shipped.ends_with(", 0 failed"),
            "docs/compatibility.md: the as-shipped suite did not pass on {release}: {row}"
        );
    }
}
