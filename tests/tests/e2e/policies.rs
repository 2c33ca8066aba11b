//! RetentionPolicy and ClusterRetentionPolicy on the real cluster: the CRDs generated from the
//! Rust types install, an invalid policy is refused at `kubectl apply` naming each field, a valid
//! one shows its columns in `kubectl get`, policies at work ([`applied`]), a policy rewritten
//! over and over costing the controller one relist per window ([`churn`]), a change that would
//! delete too much at once waiting for approval ([`guard`]), objects on hold until archived
//! ([`hold`]), notices ahead of deadlines and snoozes that push them ([`notice`]), and deletions
//! a sink must acknowledge first ([`archive`]).

use anyhow::{Result, ensure};
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace};

mod applied;
mod archive;
mod churn;
mod guard;
mod hold;
mod notice;

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "a_cluster_policy_with_cel_finish_rules_governs_a_crd_in_selected_namespaces",
            applied::cluster_policy_with_cel,
        ),
        env.trial(
            "a_policy_deletes_unannotated_jobs_and_limits_per_group_by_value",
            applied::jobs_with_limits,
        ),
        env.trial(
            "a_dry_run_policy_deletes_nothing_and_reports_in_status",
            applied::dry_run,
        ),
        env.trial(
            "a_policy_for_an_ungranted_kind_is_not_ready_until_a_role_grants_it",
            applied::ungranted_kind,
        ),
        env.trial(
            "a_policy_change_that_would_delete_150_jobs_at_once_waits_for_approval",
            guard::mass_deletion_waits_for_approval,
        ),
        env.trial(
            "a_job_held_by_hold_while_outlives_its_deadline_and_goes_once_archived",
            hold::held_until_archived,
        ),
        env.trial(
            "a_notice_arrives_at_deadline_less_notify_before_and_a_snooze_pushes_the_deletion",
            notice::notice_and_snooze,
        ),
        env.trial(
            "with_archive_before_delete_a_sink_down_for_30s_holds_every_deletion_and_loses_none",
            archive::nothing_deleted_unannounced,
        ),
        env.trial(
            "a_policy_rewritten_twenty_times_costs_one_relist_of_its_kind_per_window",
            churn::rewritten_policy,
        ),
        env.trial(
            "an_invalid_policy_is_refused_at_apply_naming_each_field",
            invalid_policy,
        ),
        env.trial(
            "a_policy_whose_cel_costs_too_much_is_refused_at_apply_naming_the_field_and_the_limit",
            costly_policy,
        ),
        env.trial(
            "a_valid_policy_is_admitted_and_listed_with_its_columns",
            valid_policy,
        ),
    ]
}

/// `depth` loops over ten items, one inside the other.
pub fn nested_loops(depth: usize) -> String {
    let mut source = String::from("v0 >= 0");
    for level in (0..depth).rev() {
        source = format!("[0,1,2,3,4,5,6,7,8,9].all(v{level}, {source})");
    }
    source
}

/// Six loops deep runs its body a million times on every object: refused, the cost and the
/// limit named; five deep is admitted (the chaos suite's hostile tenant uses it).
async fn costly_policy(ns: TestNamespace) -> Result<()> {
    let policy = |depth: usize| {
        format!(
            "apiVersion: retention.dev/v1alpha1\n\
             kind: RetentionPolicy\n\
             metadata: {{name: costly, namespace: {namespace}}}\n\
             spec:\n  \
               resources: [{{apiVersion: batch/v1, kind: Job}}]\n  \
               match: '{source}'\n  \
               ttlAfterSucceeded: 1h\n",
            namespace = ns.name,
            source = nested_loops(depth),
        )
    };
    let output =
        kube_retention_e2e::output_with_input(ns.kubectl().args(["apply", "-f", "-"]), &policy(6))?;
    let printed = String::from_utf8_lossy(&output.stderr);
    ensure!(!output.status.success(), "admitted: {printed}");
    // Long values are shortened in a denial: the field and the start of the expression, then
    // the estimate and the limit.
    for expected in [
        "spec.match: \"[0,1,2,3,4,5,6,7,8,9].all(v0, [0,1,2,3,4,5,6,7,8,9].all(v1, ",
        "has an estimated cost of 8,999,994, above the limit of 1,000,000: a loop runs its body \
         once per item",
    ] {
        ensure!(
            printed.contains(expected),
            "{expected:?} missing from: {printed}"
        );
    }
    kube_retention_e2e::run_with_input(ns.kubectl().args(["apply", "-f", "-"]), &policy(5))?;
    Ok(())
}

/// Every invalid field named at once, in the webhook's words: those the CRD's schema can check
/// by the API server (before any webhook is called), the CEL expressions by the webhook.
async fn invalid_policy(ns: TestNamespace) -> Result<()> {
    let policy = |fields: &str| {
        format!(
            "apiVersion: retention.dev/v1alpha1\n\
             kind: ClusterRetentionPolicy\n\
             metadata: {{name: {name}}}\n\
             spec:\n  \
               namespaceSelector: {{matchLabels: {{team: a}}}}\n{fields}",
            name = ns.name
        )
    };
    let refused = |policy: &str, fields: &[&str]| -> Result<()> {
        let output =
            kube_retention_e2e::output_with_input(ns.kubectl().args(["apply", "-f", "-"]), policy)?;
        let printed = String::from_utf8_lossy(&output.stderr);
        ensure!(!output.status.success(), "admitted: {printed}");
        for field in fields {
            let field = crate::server::cel_rule_denial(&ns.env, field);
            ensure!(
                printed.contains(&field),
                "{field:?} missing from: {printed}"
            );
        }
        Ok(())
    };
    refused(
        &policy(
            "  resources: [{apiVersion: tekton.dev/v1, kind: PipelineRun}, {apiVersion: a/b/c, kind: X}]\n  \
             ttlAfterSucceeded: 1d\n  \
             succeededLimit: 101\n  \
             groupBy: 'not a key'\n",
        ),
        &[
            "spec.resources[1].apiVersion: Invalid value: \"a/b/c\": is not GROUP/VERSION",
            "spec.ttlAfterSucceeded: Invalid value: \"1d\": is not a duration",
            "spec.succeededLimit: Invalid value: 101: spec.succeededLimit in body should be less than or equal to 100",
            "spec.groupBy: Invalid value: \"not a key\": is not a label key",
        ],
    )?;
    refused(
        &policy(
            "  resources: [{apiVersion: tekton.dev/v1, kind: PipelineRun}]\n  \
             match: 'object.metadata.name.startsWith('\n  \
             finished: {succeeded: 'phase == \"Done\"', at: 'object.status.done == true'}\n  \
             ttlAfterSucceeded: 1h\n",
        ),
        &[
            "spec.match: \"object.metadata.name.startsWith(\" is not valid CEL",
            "spec.finished.succeeded: \"phase == \\\"Done\\\"\" uses `phase`",
            "spec.finished.at: \"object.status.done == true\" gives true or false, not a time",
        ],
    )
}

async fn valid_policy(ns: TestNamespace) -> Result<()> {
    let policy = format!(
        "apiVersion: retention.dev/v1alpha1\n\
         kind: RetentionPolicy\n\
         metadata: {{name: jobs, namespace: {namespace}}}\n\
         spec:\n  \
           resources: [{{apiVersion: batch/v1, kind: Job}}]\n  \
           ttlAfterSucceeded: 1h\n  \
           ttlAfterFailed: 24h\n  \
           dryRun: true\n",
        namespace = ns.name
    );
    kube_retention_e2e::run_with_input(ns.kubectl().args(["apply", "-f", "-"]), &policy)?;
    let listed = kube_retention_e2e::run(ns.kubectl().args(["get", "retentionpolicies"]))?;
    let header: Vec<&str> = listed
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    ensure!(
        header
            == [
                "NAME",
                "KINDS",
                "SUCCEEDED",
                "FAILED",
                "LIMITS",
                "DRY-RUN",
                "READY",
                "AGE"
            ],
        "{listed}"
    );
    ensure!(
        listed.contains("jobs") && listed.contains("1h") && listed.contains("24h"),
        "{listed}"
    );
    Ok(())
}
