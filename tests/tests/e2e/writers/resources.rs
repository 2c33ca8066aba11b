//! RetentionPolicies, ClusterRetentionPolicies and Cleaners from users that exist only as RBAC
//! subjects: admitted only once they may delete (and list) what they name, where it applies.

use anyhow::{Result, ensure};

use super::{admitted_after_grant, apply, bind_editor, grant, kubectl_as, refusal};
use crate::support::TestNamespace;

fn policy(kind: &str, namespace: Option<&str>, name: &str) -> String {
    let scope = match namespace {
        Some(namespace) => {
            format!("kind: RetentionPolicy\nmetadata: {{name: {name}, namespace: {namespace}}}\n")
        }
        None => format!("kind: ClusterRetentionPolicy\nmetadata: {{name: {name}}}\n"),
    };
    // Dry run, and a selector nothing matches: the test's policies never delete anything.
    format!(
        "apiVersion: retention.dev/v1alpha1\n{scope}\
         spec: {{resources: [{{apiVersion: v1, kind: {kind}}}], ttl: 1h, dryRun: true,\n\
         selector: {{matchLabels: {{e2e-matches: nothing}}}}}}\n"
    )
}

pub async fn policy_needs_delete(ns: TestNamespace) -> Result<()> {
    let user = format!("policy-author-{}", ns.name);
    let name = &ns.name;
    bind_editor(&ns, &user)?;
    let secrets = policy("Secret", Some(name), "secrets");
    let stderr = refusal(kubectl_as(&ns, &user).args(["create", "-f", "-"]), &secrets)?;
    let stderr = stderr.ok_or_else(|| anyhow::anyhow!("a policy naming Secrets was admitted"))?;
    for lacking in [
        format!("you may not delete secrets in namespace {name}"),
        format!("you may not list secrets in namespace {name}"),
    ] {
        ensure!(
            stderr.contains(&lacking) && stderr.contains("spec.resources[0]"),
            "{stderr}"
        );
    }
    grant(&ns, "secrets", &user, "", "secrets", "delete, list")?;
    admitted_after_grant(&ns, &user, &["apply", "-f", "-"], &secrets).await?;
    cluster_policy_needs_cluster_wide_delete(&ns, &user).await
}

/// With delete on Secrets in one namespace only, a ClusterRetentionPolicy over Secrets is
/// refused; cluster-wide, it is admitted.
async fn cluster_policy_needs_cluster_wide_delete(ns: &TestNamespace, user: &str) -> Result<()> {
    let name = format!("{}-writers", ns.name);
    let binding = |role: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {name}-{role}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        )
    };
    let cleanup = |ns: &TestNamespace| {
        for object in [
            format!("clusterrolebinding/{name}-cluster-retention-policy-editor"),
            format!("clusterrolebinding/{name}-{name}"),
            format!("clusterrole/{name}"),
            format!("clusterretentionpolicy/{name}"),
        ] {
            let _ = ns
                .kubectl()
                .args(["delete", "--ignore-not-found", &object])
                .output();
        }
    };
    let outcome = async {
        apply(ns, &binding("cluster-retention-policy-editor"))?;
        let cluster = policy("Secret", None, &name);
        let stderr = refusal(kubectl_as(ns, user).args(["create", "-f", "-"]), &cluster)?
            .ok_or_else(|| anyhow::anyhow!("a cluster policy was admitted from a user with namespaced rights"))?;
        ensure!(stderr.contains("you may not delete secrets cluster-wide"), "{stderr}");
        apply(
            ns,
            &format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {name}}}\n\
                 rules: [{{apiGroups: [\"\"], resources: [secrets], verbs: [delete, list]}}]\n---\n{}",
                binding(&name)
            ),
        )?;
        admitted_after_grant(ns, user, &["apply", "-f", "-"], &cluster)
        .await
    }
    .await;
    cleanup(ns);
    outcome
}

pub async fn cleaner_needs_delete(ns: TestNamespace) -> Result<()> {
    // What the CRD's schema checks, the API server refuses first; the conditions, the webhook.
    let invalid = "apiVersion: retention.dev/v1alpha1\nkind: Cleaner\nmetadata: {name: broken}\n\
                   spec: {ttl: 1d, targets: [{name: a-b, reference: {version: v1, kind: Pod}}],\n\
                   conditions: ['a-b.items.size() > 0']}\n";
    let stderr = refusal(ns.kubectl().args(["create", "-f", "-"]), invalid)?
        .ok_or_else(|| anyhow::anyhow!("an invalid Cleaner was admitted"))?;
    for field in ["spec.ttl", "spec.targets[0].name"] {
        ensure!(stderr.contains(field), "{field} not named: {stderr}");
    }
    let invalid = "apiVersion: retention.dev/v1alpha1\nkind: Cleaner\nmetadata: {name: broken}\n\
                   spec: {ttl: 1h, targets: [{name: a, reference: {version: v1, kind: Pod}}],\n\
                   conditions: ['a.items.size() >']}\n";
    let stderr = refusal(ns.kubectl().args(["create", "-f", "-"]), invalid)?
        .ok_or_else(|| anyhow::anyhow!("a Cleaner with invalid CEL was admitted"))?;
    ensure!(
        stderr.contains("spec.conditions[0]"),
        "spec.conditions[0] not named: {stderr}"
    );
    let user = format!("cleaner-author-{}", ns.name);
    let name = &ns.name;
    bind_editor(&ns, &user)?;
    let cleaner = "apiVersion: retention.dev/v1alpha1\nkind: Cleaner\nmetadata: {name: preview}\n\
                   spec: {ttl: 360h, targets: [{name: credentials, delete: true,\n\
                   reference: {version: v1, kind: Secret, name: preview-credentials}}]}\n";
    let stderr = refusal(kubectl_as(&ns, &user).args(["create", "-f", "-"]), cleaner)?
        .ok_or_else(|| anyhow::anyhow!("a Cleaner over Secrets was admitted"))?;
    ensure!(
        stderr.contains(&format!(
            "spec.targets[0]: \"credentials\" you may not delete secrets in namespace {name}"
        )),
        "{stderr}"
    );
    grant(&ns, "secrets", &user, "", "secrets", "delete, list")?;
    admitted_after_grant(&ns, &user, &["apply", "-f", "-"], cleaner).await
}

/// A Helm release's records are Secrets anyone who may write them can forge, listing objects of
/// any kind a Cleaner uninstalls: deleting Secrets is not enough to have one uninstalled, the
/// built-in `edit` role (which may delete every such kind) is.
pub async fn cleaner_helm_needs_delete_on_every_kind(ns: TestNamespace) -> Result<()> {
    let user = format!("helm-author-{}", ns.name);
    let name = &ns.name;
    bind_editor(&ns, &user)?;
    grant(&ns, "secrets", &user, "", "secrets", "delete")?;
    let cleaner = "apiVersion: retention.dev/v1alpha1\nkind: Cleaner\nmetadata: {name: preview}\n\
                   spec: {ttl: 360h, helm: {release: preview, delete: true}}\n";
    let stderr =
        refusal(kubectl_as(&ns, &user).args(["create", "-f", "-"]), cleaner)?.ok_or_else(|| {
            anyhow::anyhow!("a Cleaner uninstalling a release was admitted over Secrets alone")
        })?;
    ensure!(
        stderr.contains(&format!(
            "spec.helm: \"preview\" you may not delete configmaps, services, serviceaccounts, \
             persistentvolumeclaims, pods, deployments.apps, statefulsets.apps, daemonsets.apps, \
             replicasets.apps, jobs.batch, cronjobs.batch and ingresses.networking.k8s.io in \
             namespace {name}, so you may not have a Cleaner uninstall a Helm release"
        )),
        "{stderr}"
    );
    apply(
        &ns,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: edit}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        ),
    )?;
    admitted_after_grant(&ns, &user, &["apply", "-f", "-"], cleaner).await
}
