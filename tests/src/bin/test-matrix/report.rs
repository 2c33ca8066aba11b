//! docs/compatibility.md: one row per minor in each table, the supported range that follows from
//! them, and what differs by minor with what kube-retention does about each. Rows of minors not
//! run this time are kept from the file as they were (each row names its commit and day).

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::probe::{GATES, RESOURCES};
use crate::steps::Row;

const SUITES: &str = "## Suites";
const FEATURES: &str = "## What the API server enables";

/// Rewrites `file` with `rows`, keeping the rows of other `pinned` minors from it.
pub fn write(file: &Path, pinned: &[String], rows: &[Row]) -> Result<()> {
    let existing = std::fs::read_to_string(file).unwrap_or_default();
    let suites: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.minor.clone(), suite_row(r)))
        .collect();
    let features: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.minor.clone(), feature_row(r)))
        .collect();
    let suites = merged(pinned, &suites, &table_rows(&existing, SUITES));
    let features = merged(pinned, &features, &table_rows(&existing, FEATURES));
    std::fs::write(file, render(pinned, &suites, &features))?;
    Ok(())
}

fn suite_row(row: &Row) -> String {
    let shipped = match &row.shipped {
        Some(step) => format!("{} | {}", step.counts(), minutes(step.took)),
        None => "— | —".into(),
    };
    let build = match row.build.succeeded {
        true => minutes(row.build.took),
        false => "failed".into(),
    };
    format!(
        "| {} | {} | {} | {} | {build} | {} | {} | {shipped} | {} |",
        row.minor,
        row.release,
        row.revision,
        row.day,
        row.e2e.counts(),
        minutes(row.e2e.took),
        if row.passed() { "passed" } else { "FAILED" },
    )
}

fn feature_row(row: &Row) -> String {
    let features = &row.features;
    let cells: Vec<&str> = features
        .gates
        .iter()
        .chain(&features.resources)
        .map(String::as_str)
        .collect();
    format!(
        "| {} | {} | {} |",
        row.minor,
        cells.join(" | "),
        features.refused_streamed_lists
    )
}

/// The table rows (lines starting `| 1.`) of the section `heading` in `text`, by minor.
fn table_rows(text: &str, heading: &str) -> Vec<(String, String)> {
    let Some(start) = text.find(heading) else {
        return Vec::new();
    };
    let section = &text[start + heading.len()..];
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter_map(|line| {
            let minor = line.strip_prefix("| ")?.split(' ').next()?;
            minor
                .starts_with("1.")
                .then(|| (minor.to_owned(), line.to_owned()))
        })
        .collect()
}

/// One row per pinned minor: this run's, else the file's, else none.
fn merged(pinned: &[String], new: &[(String, String)], old: &[(String, String)]) -> Vec<String> {
    pinned
        .iter()
        .filter_map(|minor| {
            let pick = |rows: &[(String, String)]| {
                rows.iter()
                    .find(|(m, _)| m == minor)
                    .map(|(_, line)| line.clone())
            };
            pick(new).or_else(|| pick(old))
        })
        .collect()
}

/// The supported range: every pinned minor has a row, and every row passed.
fn supported(pinned: &[String], suites: &[String]) -> String {
    let (Some(oldest), Some(newest)) = (pinned.first(), pinned.last()) else {
        return "Supported: none pinned.".into();
    };
    let missing: Vec<&str> = pinned
        .iter()
        .filter(|minor| {
            !suites
                .iter()
                .any(|row| row.starts_with(&format!("| {minor} |")))
        })
        .map(String::as_str)
        .collect();
    let failed: Vec<&str> = suites
        .iter()
        .filter(|row| !row.trim_end().ends_with("| passed |"))
        .filter_map(|row| row.split(' ').nth(1))
        .collect();
    if missing.is_empty() && failed.is_empty() {
        format!("Supported: Kubernetes {oldest} to {newest}.")
    } else {
        format!(
            "Supported: not established: not run: {}; failed: {}.",
            or_none(&missing),
            or_none(&failed)
        )
    }
}

fn or_none(minors: &[&str]) -> String {
    match minors.is_empty() {
        true => "none".into(),
        false => minors.join(", "),
    }
}

fn render(pinned: &[String], suites: &[String], features: &[String]) -> String {
    let gate_heads: Vec<String> = GATES.iter().map(|gate| format!("{gate} gate")).collect();
    let resource_heads: Vec<String> = RESOURCES
        .iter()
        .map(|(_, plural)| plural.to_string())
        .collect();
    let heads = [gate_heads, resource_heads].concat();
    let rule = vec!["---"; heads.len() + 2].join(" | ");
    format!(
        "# Compatibility\n\n\
         <!-- Written by `make test-matrix` (tests/src/bin/test-matrix/); do not edit by hand. -->\n\n\
         {supported}\n\n\
         Each minor is built from its own pinned Go module (`tests/cluster/kubernetes/1.NN.mod`) and\n\
         runs the whole end-to-end suite (`make e2e KUBERNETES=1.NN`); the oldest and the newest\n\
         also run the as-shipped suite (`make test-shipped KUBERNETES=1.NN`: a real node pulling the\n\
         release's image and chart from a registry). Times are wall time on this machine's two\n\
         cores; a build is a second once a minor's output is stamped as built from its module.\n\n\
         {SUITES}\n\n\
         | minor | release | commit | day | build | e2e | e2e time | as shipped | as-shipped time | verdict |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n\
         {suites}\n\n\
         {FEATURES}\n\n\
         Read from each minor's API server (its `kubernetes_feature_enabled` metric and discovery)\n\
         and from kube-retention's controller started on it (`kube_retention_list_fallbacks_total`).\n\n\
         | minor | {heads} | streamed lists refused at start |\n\
         | {rule} |\n\
         {features}\n\n\
         {DIFFERENCES}",
        supported = supported(pinned, suites),
        suites = suites.join("\n"),
        heads = heads.join(" | "),
        features = features.join("\n"),
    )
}

/// What differs by minor and what kube-retention does about each.
const DIFFERENCES: &str = include_str!("differences.md");

fn minutes(took: Duration) -> String {
    let seconds = took.as_secs();
    format!("{} min {:02} s", seconds / 60, seconds % 60)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{FEATURES, SUITES, merged, render, supported, table_rows};
    use crate::probe::Features;
    use crate::steps::{Row, Step};

    fn row(minor: &str, failed: u32) -> Row {
        let step = |failed| Step {
            took: Duration::from_secs(125),
            passed: 90,
            failed,
            succeeded: failed == 0,
        };
        Row {
            minor: minor.into(),
            release: format!("v{minor}.1"),
            revision: "abc1234".into(),
            day: "2026-11-27".into(),
            build: step(0),
            features: Features {
                gates: vec!["off".into(), "—".into()],
                resources: vec!["served".into(), "served".into(), "not served".into()],
                refused_streamed_lists: 3,
            },
            e2e: step(failed),
            shipped: None,
        }
    }

    #[test]
    fn a_report_keeps_the_rows_of_minors_not_run_and_says_the_range_only_when_all_passed() {
        let pinned: Vec<String> = ["1.33", "1.34"].map(String::from).to_vec();
        let first = [row("1.33", 0)];
        let suites: Vec<String> = first.iter().map(super::suite_row).collect();
        let features: Vec<String> = first.iter().map(super::feature_row).collect();
        let text = render(&pinned, &suites, &features);
        assert!(text.contains("Supported: not established: not run: 1.34; failed: none."));
        assert!(text.contains("| 1.33 | v1.33.1 | abc1234 | 2026-11-27 | 2 min 05 s | 90 passed, 0 failed | 2 min 05 s | — | — | passed |"));
        assert!(text.contains("| 1.33 | off | — | served | served | not served | 3 |"));

        // The second run adds 1.34 and keeps 1.33's rows from the file.
        let new = [("1.34".to_string(), super::suite_row(&row("1.34", 0)))];
        let suites = merged(&pinned, &new, &table_rows(&text, SUITES));
        assert_eq!(suites.len(), 2);
        assert_eq!(
            supported(&pinned, &suites),
            "Supported: Kubernetes 1.33 to 1.34."
        );
        assert_eq!(table_rows(&text, FEATURES).len(), 1);

        let failing = [super::suite_row(&row("1.33", 2)), suites[1].clone()];
        assert_eq!(
            supported(&pinned, &failing),
            "Supported: not established: not run: none; failed: 1.33."
        );
    }
}
