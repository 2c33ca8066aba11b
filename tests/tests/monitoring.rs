//! deploy/monitoring without a cluster: the alerts and the dashboard ask only for metrics the
//! controller and the webhook export, and the PrometheusRule and the chart's copies are those
//! `make monitoring` writes from the rule file. (`promtool check rules` and `promtool test rules`,
//! from the real promtool, run in `make test` beside this.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

const MONITORING: &str = "deploy/monitoring";
const RULES: &str = "kube-retention.rules.yaml";
const DASHBOARD: &str = "kube-retention.dashboard.json";
const CHART_FILES: &str = "charts/kube-retention/files";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// The sample names an exposition can hold, from its `# TYPE` lines: a counter's `_total`, a
/// histogram's `_bucket`, `_sum` and `_count`, a gauge's own name.
fn exported(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
    }
    names
}

/// Every `kube_retention_…` name a text mentions.
fn mentioned(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("kube_retention_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The controller's exposition with one series in each family: a family is encoded only once it
/// has one.
fn controller_exposition() -> String {
    use kube_retention_cleaners::metrics::{KindLabels as TargetKind, OutcomeLabels};
    use kube_retention_controller::metrics::{
        DeletionLabels, ErrorLabels, KindLabels, Metrics, UnpermittedLabels,
    };
    let metrics = Metrics::default();
    let kind = || KindLabels {
        kind: "Job.batch".into(),
    };
    metrics
        .deletions
        .get_or_create(&DeletionLabels {
            kind: "Job.batch".into(),
            reason: "ttl",
        })
        .inc();
    metrics
        .errors
        .get_or_create(&ErrorLabels {
            kind: "Job.batch".into(),
            operation: "delete",
        })
        .inc();
    metrics.conflicts.get_or_create(&kind()).inc();
    metrics.stamps.get_or_create(&kind()).inc();
    metrics.tracked.get_or_create(&kind()).set(1);
    metrics.lists.get_or_create(&kind()).inc();
    metrics
        .unpermitted_kinds
        .get_or_create(&UnpermittedLabels {
            kind: "Gadget.example.com".into(),
            missing: "delete".into(),
        })
        .set(1);
    metrics
        .cleaners
        .evaluations
        .get_or_create(&OutcomeLabels { outcome: "clean" })
        .inc();
    metrics.cleaners.deleted("object");
    let cluster = kube_retention_sinks::ledger::SinkLabels { sink: "cluster" };
    for family in [
        &metrics.ledger.delivered,
        &metrics.ledger.dropped,
        &metrics.ledger.undelivered,
    ] {
        family.get_or_create(&cluster).inc();
    }
    metrics
        .cleaners
        .lists
        .get_or_create(&TargetKind {
            kind: "ConfigMap".into(),
        })
        .inc();
    metrics.encode()
}

fn webhook_exposition() -> String {
    use kube_retention_webhook::metrics::{AdmissionOutcome, Metrics};
    use kube_retention_webhook::review::Hook;
    let metrics = Metrics::default();
    for hook in [Hook::Validate, Hook::Mutate] {
        let started = std::time::Instant::now();
        metrics.observe(
            hook,
            "BuildRun",
            "CREATE",
            AdmissionOutcome::Allowed,
            started,
        );
    }
    metrics.encode()
}

#[test]
fn alerts_and_dashboard_ask_only_for_exported_metrics() {
    let mut exported = exported(&controller_exposition());
    exported.extend(self::exported(&webhook_exposition()));
    assert!(
        exported.contains("kube_retention_overdue_objects")
            && exported.contains("kube_retention_webhook_admission_requests_total"),
        "both expositions were read: {exported:?}"
    );
    for file in [RULES, DASHBOARD] {
        let text = read(&format!("{MONITORING}/{file}"));
        let asked = mentioned(&text);
        assert!(asked.len() > 5, "{file} names {asked:?}");
        let unknown: Vec<&String> = asked.difference(&exported).collect();
        assert!(
            unknown.is_empty(),
            "{file} asks for metrics nobody exports: {unknown:?}"
        );
    }
}

#[test]
fn the_prometheus_rule_and_the_charts_copies_are_what_make_monitoring_writes() {
    let rules: Value = serde_norway::from_str(&read(&format!("{MONITORING}/{RULES}"))).unwrap();
    let wrapped: Value =
        serde_norway::from_str(&read(&format!("{MONITORING}/prometheusrule.yaml"))).unwrap();
    assert_eq!(wrapped["kind"], "PrometheusRule");
    assert!(
        wrapped["spec"] == rules,
        "{MONITORING}/prometheusrule.yaml is stale: run `make monitoring`"
    );
    for file in [RULES, DASHBOARD] {
        assert!(
            read(&format!("{MONITORING}/{file}")) == read(&format!("{CHART_FILES}/{file}")),
            "{CHART_FILES}/{file} is stale: run `make monitoring`"
        );
    }
}

#[test]
fn every_dashboard_panel_is_described_and_queries_the_chosen_data_source() {
    let dashboard: Value = serde_json::from_str(&read(&format!("{MONITORING}/{DASHBOARD}")))
        .unwrap_or_else(|error| panic!("{DASHBOARD} is not JSON: {error}"));
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().expect("a title");
        assert!(ids.insert(panel["id"].as_u64()), "{title}: a repeated id");
        if panel["type"] == "row" {
            continue;
        }
        assert!(
            panel["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{title}: no description"
        );
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            assert!(
                target["expr"].as_str().is_some_and(|e| !e.is_empty()),
                "{title}: an empty query"
            );
        }
    }
    assert!(ids.len() >= 20, "{} panels", ids.len());
}

/// Where each alert's `runbook_url` points: its page in docs/runbooks, on the default branch.
const RUNBOOKS: &str = "docs/runbooks";
const RUNBOOK_BASE: &str = "https://github.com/kube-retention/kube-retention/blob/main/";

#[test]
fn every_alert_links_its_runbook_page_and_the_page_answers_what_where_and_how() {
    let rules: Value = serde_norway::from_str(&read(&format!("{MONITORING}/{RULES}"))).unwrap();
    let index = read(&format!("{RUNBOOKS}/README.md"));
    let mut alerts = BTreeSet::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let alert = rule["alert"].as_str().expect("an alert's name");
            alerts.insert(alert.to_owned());
            let page = format!("{RUNBOOKS}/{alert}.md");
            assert_eq!(
                rule["annotations"]["runbook_url"],
                format!("{RUNBOOK_BASE}{page}"),
                "{alert}'s runbook_url"
            );
            let text = read(&page);
            assert!(text.starts_with(&format!("# {alert}\n")), "{page}'s title");
            for heading in ["## What it means", "## What to check", "## What to do"] {
                assert!(text.contains(heading), "{page} has no {heading:?}");
            }
            assert!(
                index.contains(&format!("]({alert}.md)")),
                "{RUNBOOKS}/README.md does not link {alert}"
            );
        }
    }
    assert_eq!(alerts.len(), 17, "{alerts:?}");
    let pages: BTreeSet<String> = std::fs::read_dir(root().join(RUNBOOKS))
        .unwrap()
        .filter_map(|entry| {
            entry
                .ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".md")
                .map(str::to_owned)
        })
        .filter(|name| name != "README")
        .collect();
    assert_eq!(pages, alerts, "a runbook page for each alert, and no other");
}
