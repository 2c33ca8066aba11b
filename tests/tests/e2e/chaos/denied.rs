//! DELETEs a ValidatingAdmissionPolicy denies: the controller backs off per object (the audit
//! log shows attempts on the backoff schedule, not every few seconds), warns on the object, and
//! every other object still goes on time.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use libtest_mimic::Trial;
use serde_json::json;

use super::{Form, Ledger, Row, report};
use crate::audit;
use crate::support::{Env, TestNamespace};
use crate::workloads::{create_job_in, eventually, finish_job, now_second, sleep_until};

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "chaos_deletes_denied_by_a_validating_admission_policy_back_off",
        denied,
    )]
}

const UNDELETABLE: &str = "chaos.retention.dev/undeletable";

fn admission(kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    let plural = match kind {
        "ValidatingAdmissionPolicy" => "validatingadmissionpolicies".to_owned(),
        _ => format!("{}s", kind.to_lowercase()),
    };
    ApiResource::from_gvk_with_plural(&gvk, &plural)
}

/// A policy and binding denying DELETE of Jobs labelled undeletable in this namespace only.
async fn deny_deletes(ns: &TestNamespace) -> Result<String> {
    let client = &ns.env.client;
    let name = format!("deny-delete-{}", ns.name);
    let policy = json!({"metadata": {"name": name}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
            "operations": ["DELETE"], "resources": ["jobs"]}]},
        "validations": [{"expression": format!("!has(oldObject.metadata.labels) || !('{UNDELETABLE}' in oldObject.metadata.labels)"),
            "message": "chaos: this Job may not be deleted"}]}});
    let binding = json!({"metadata": {"name": name}, "spec": {"policyName": name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}}}}});
    for (kind, body) in [
        ("ValidatingAdmissionPolicy", policy),
        ("ValidatingAdmissionPolicyBinding", binding),
    ] {
        let resource = admission(kind);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let object = crate::support::object(&resource, body)?;
        api.create(&PostParams::default(), &object).await?;
    }
    // The policy takes effect once the API server's informers have it: probe with a dry run.
    create_job_in(client, &ns.name, "probe", json!({})).await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    jobs.patch(
        "probe",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {UNDELETABLE: "true"}}})),
    )
    .await?;
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    eventually(
        Duration::from_secs(20),
        "the policy denies DELETE",
        || async { Ok(jobs.delete("probe", &dry_run).await.is_err()) },
    )
    .await?;
    Ok(name)
}

async fn remove_policy(ns: &TestNamespace, name: &str) {
    for kind in [
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
    ] {
        let api: Api<DynamicObject> = Api::all_with(ns.env.client.clone(), &admission(kind));
        api.delete(name, &DeleteParams::default()).await.ok();
    }
}

async fn denied(ns: TestNamespace) -> Result<()> {
    let policy = deny_deletes(&ns).await?;
    let outcome = run(&ns).await;
    remove_policy(&ns, &policy).await;
    outcome
}

async fn run(ns: &TestNamespace) -> Result<()> {
    let client = &ns.env.client;
    let resource = ApiResource::erase::<Job>(&());
    let ledger = Ledger::start(ns.dynamic(&resource), resource).await;
    let observe = Form::current().pick(20, 70);
    let ttl = json!({"retention.dev/ttl-after-finished": "1s"});
    let undeletable: Vec<String> = (0..3).map(|index| format!("stuck-{index}")).collect();
    let deletable: Vec<String> = (0..10).map(|index| format!("free-{index}")).collect();
    for name in undeletable.iter().chain(&deletable) {
        create_job_in(client, &ns.name, name, ttl.clone()).await?;
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    for name in &undeletable {
        jobs.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {UNDELETABLE: "true"}}})),
        )
        .await?;
    }
    let finished = now_second();
    for name in undeletable.iter().chain(&deletable) {
        finish_job(client, &ns.name, name, true, finished).await?;
    }
    let deadline = finished + SignedDuration::from_secs(1);
    eventually(
        Duration::from_secs(5),
        "the deletable Jobs gone on time",
        || async {
            let left = jobs.list(&ListParams::default()).await?.items;
            Ok(left.iter().all(|job| {
                job.metadata
                    .name
                    .as_ref()
                    .is_some_and(|name| !deletable.contains(name))
            }))
        },
    )
    .await?;
    sleep_until(deadline + SignedDuration::from_secs(observe)).await;
    let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
    let attempts = audit::requests(ns, &user, "delete", "jobs", Some(&ns.name))?;
    // Attempts at 0, 1, 3, 7, 15, 31, 63 s after the deadline: the doubling schedule.
    let schedule = (0..)
        .map(|n: u32| (1_i64 << n) - 1)
        .take_while(|at| *at <= observe)
        .count();
    let mut note = Vec::new();
    let mut most = 0;
    for name in &undeletable {
        let count = attempts
            .iter()
            .filter(|event| event["objectRef"]["name"] == name.as_str())
            .count();
        most = most.max(count);
        if count > schedule + 1 {
            note.push(format!(
                "{name}: {count} DELETE attempts in {observe} s, the schedule allows {schedule}"
            ));
        }
        ensure!(
            count >= 2,
            "{name}: {count} DELETE attempts: retried at all?"
        );
    }
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let warned = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={}", undeletable[0])))
        .await?
        .items
        .into_iter()
        .any(|event| event.reason.as_deref() == Some("RetentionDeleteFailing"));
    if !warned {
        note.push("no RetentionDeleteFailing Warning Event".into());
    }
    let verdict = ledger.verdict(&HashSet::new()).await?;
    let stuck = undeletable.len();
    // The denied ones are overdue by design; anything else overdue is missed.
    let missed: Vec<&String> = verdict
        .missed
        .iter()
        .filter(|name| !undeletable.contains(name))
        .collect();
    report(Row {
        scenario: "DELETE denied by a ValidatingAdmissionPolicy",
        objects: verdict.objects,
        wrong: verdict.wrong.len() + note.len(),
        missed: missed.len(),
        p99_delay: verdict.p99(),
        note: format!(
            "{stuck} undeletable Jobs: at most {most} DELETE attempts each in {observe} s (the doubling schedule allows {schedule}) {}",
            [verdict.wrong.join(", "), note.join("; ")].join(" ")
        ),
    })
}
