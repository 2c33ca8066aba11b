//! No confused deputy, on the real cluster: users that exist only as RBAC subjects (kubectl
//! `--as`, impersonated from the admin kubeconfig) may give objects retention settings, and name
//! kinds in policies, only where they may delete them themselves. A refusal names what they lack;
//! once granted, the same request is admitted (within the webhook's few seconds of caching).
//! The check for annotated objects is the API server's own too (the ValidatingAdmissionPolicy
//! `kube-retention-writers`): with the webhook stopped it still refuses (`writers/policy.rs`),
//! and on generated writes it answers as the webhook's check does (`writers/differential.rs`).

use std::process::Command;
use std::time::Duration;

use anyhow::{Result, ensure};
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace};

mod differential;
mod policy;
mod resources;

/// How long a permission granted takes to count: the webhook caches answers for 5 s.
const GRANTED_WITHIN: Duration = Duration::from_secs(20);

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "a_user_who_may_patch_but_not_delete_cannot_give_a_ttl_until_granted_delete",
            ttl_needs_delete,
        ),
        env.trial(
            "a_retention_policy_needs_delete_and_list_on_what_it_names",
            resources::policy_needs_delete,
        ),
        env.trial(
            "a_build_governs_its_runs_only_from_a_user_who_may_delete_them",
            build_needs_delete_on_runs,
        ),
        env.trial(
            "a_cleaner_is_refused_when_invalid_or_over_a_kind_its_writer_may_not_delete",
            resources::cleaner_needs_delete,
        ),
        env.trial(
            "a_cleaner_uninstalling_a_helm_release_needs_delete_on_every_kind_a_release_may_hold",
            resources::cleaner_helm_needs_delete_on_every_kind,
        ),
    ]
}

/// Trials that stop the webhook or remove its registrations: run after all others, one at a time.
pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "with_the_webhook_stopped_the_api_server_refuses_a_ttl_from_a_user_who_may_not_delete",
            policy::refused_with_the_webhook_stopped,
        ),
        env.trial(
            "the_writer_policy_judges_generated_writes_as_the_webhooks_writer_check",
            differential::judged_as_the_webhook_judges,
        ),
    ]
}

/// `kubectl` impersonating `user` in the test's namespace.
pub fn kubectl_as(ns: &TestNamespace, user: &str) -> Command {
    let mut command = ns.kubectl();
    command.arg(format!("--as={user}"));
    command
}

/// Runs `command` with `input` on stdin; answers its stderr if it failed, `None` if it succeeded.
pub fn refusal(command: &mut Command, input: &str) -> Result<Option<String>> {
    let output = kube_retention_e2e::output_with_input(command, input)?;
    Ok((!output.status.success()).then(|| String::from_utf8_lossy(&output.stderr).into_owned()))
}

pub fn apply(ns: &TestNamespace, yaml: &str) -> Result<()> {
    kube_retention_e2e::run_with_input(ns.kubectl().args(["apply", "-f", "-"]), yaml)?;
    Ok(())
}

/// A Role in the namespace granting `verbs` on `resources` of `group`, bound to `user`.
pub fn grant(
    ns: &TestNamespace,
    name: &str,
    user: &str,
    group: &str,
    resources: &str,
    verbs: &str,
) -> Result<()> {
    apply(
        ns,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}}}\n\
             rules: [{{apiGroups: [\"{group}\"], resources: [{resources}], verbs: [{verbs}]}}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        ),
    )
}

/// Binds the shipped `retention-policy-editor` ClusterRole to `user` in the namespace.
pub fn bind_editor(ns: &TestNamespace, user: &str) -> Result<()> {
    apply(
        ns,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: editor}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: retention-policy-editor}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        ),
    )
}

/// Retries kubectl `args` as `user` until it succeeds: a grant counts once the webhook's cached refusal expires.
pub async fn admitted_after_grant(
    ns: &TestNamespace,
    user: &str,
    args: &[&str],
    input: &str,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + GRANTED_WITHIN;
    loop {
        match refusal(kubectl_as(ns, user).args(args), input)? {
            None => return Ok(()),
            Some(stderr) if tokio::time::Instant::now() >= deadline => {
                anyhow::bail!("still refused {GRANTED_WITHIN:?} after the grant: {stderr}")
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn ttl_needs_delete(ns: TestNamespace) -> Result<()> {
    let user = format!("patcher-{}", ns.name);
    let name = &ns.name;
    apply(
        &ns,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: worker}\n\
         spec: {containers: [{name: c, image: example.invalid/worker}]}\n",
    )?;
    // The subject may read and patch ConfigMaps and Pods, not delete them.
    grant(
        &ns,
        "patch",
        &user,
        "",
        "configmaps, pods",
        "get, list, patch, update",
    )?;
    for (resource, plural) in [("configmap/settings", "configmaps"), ("pod/worker", "pods")] {
        let stderr = refusal(
            kubectl_as(&ns, &user).args(["annotate", resource, "retention.dev/ttl=1h"]),
            "",
        )?
        .ok_or_else(|| {
            anyhow::anyhow!("{resource}: a TTL was admitted from a user who may not delete it")
        })?;
        let expected = format!(
            "metadata.annotations[retention.dev/ttl]: \"1h\" you may not delete {plural} in namespace {name}, so you may not set their retention"
        );
        ensure!(stderr.contains(&expected), "{resource}: {stderr}");
    }
    // Lengthening or removing a TTL needs nothing more than the patch itself.
    kube_retention_e2e::run(ns.kubectl().args([
        "annotate",
        "configmap/settings",
        "retention.dev/ttl=1h",
    ]))?;
    kube_retention_e2e::run(kubectl_as(&ns, &user).args([
        "annotate",
        "--overwrite",
        "configmap/settings",
        "retention.dev/ttl=2h",
    ]))?;
    kube_retention_e2e::run(kubectl_as(&ns, &user).args([
        "annotate",
        "configmap/settings",
        "retention.dev/ttl-",
    ]))?;
    grant(&ns, "delete", &user, "", "configmaps, pods", "delete")?;
    for resource in ["configmap/settings", "pod/worker"] {
        admitted_after_grant(
            &ns,
            &user,
            &["annotate", "--overwrite", resource, "retention.dev/ttl=1h"],
            "",
        )
        .await?;
    }
    Ok(())
}

async fn build_needs_delete_on_runs(ns: TestNamespace) -> Result<()> {
    let user = format!("build-author-{}", ns.name);
    let name = &ns.name;
    let build = "apiVersion: shipwright.io/v1beta1\nkind: Build\nmetadata: {name: app}\n\
                 spec: {source: {type: Git, git: {url: https://example.invalid/app}}, strategy: {name: s},\n\
                 output: {image: example.invalid/app}, retention: {ttlAfterSucceeded: 1h, succeededLimit: 3}}\n";
    grant(
        &ns,
        "builds",
        &user,
        "shipwright.io",
        "builds",
        "get, list, create, update, patch",
    )?;
    let stderr = refusal(kubectl_as(&ns, &user).args(["create", "-f", "-"]), build)?
        .ok_or_else(|| anyhow::anyhow!("a Build governing runs was admitted"))?;
    for field in [
        "spec.retention.ttlAfterSucceeded",
        "spec.retention.succeededLimit",
    ] {
        ensure!(stderr.contains(field), "{field} not named: {stderr}");
    }
    ensure!(
        stderr.contains(&format!("you may not delete buildruns.shipwright.io in namespace {name}, so you may not set the retention of the runs it governs")),
        "{stderr}"
    );
    grant(
        &ns,
        "buildruns",
        &user,
        "shipwright.io",
        "buildruns",
        "delete",
    )?;
    admitted_after_grant(&ns, &user, &["apply", "-f", "-"], build).await
}
