//! The chart's pods on the node: every one Ready, and every container running as the chart
//! says — checked on the node, from the container's own process, not from the pod spec: a
//! non-root user, no privilege escalation (`no_new_privs`), no capabilities, seccomp filtering
//! and a read-only root file system; and every container's image pulled from the registry, at
//! the digest the release's tag names (containerd reports the pulled image's `imageID`).

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube_retention_e2e::cluster::SHIPPED_NAMESPACE;
use kube_retention_e2e::node::Node;
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace};

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "every_chart_pod_is_ready_and_its_containers_run_unprivileged_on_a_read_only_root",
        unprivileged,
    )]
}

/// The chart's pods and, per pod, its containers' ids (the certificate sidecar among them).
pub async fn chart_pods(ns: &TestNamespace) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    Ok(pods.list(&ListParams::default()).await?.items)
}

async fn unprivileged(ns: TestNamespace) -> Result<()> {
    let pods = chart_pods(&ns).await?;
    let image = crate::shipped_image()?;
    let pulled = format!("{}@{}", image.repository, image.digest);
    let mut components: Vec<String> = Vec::new();
    let mut checked = 0;
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let status = pod.status.clone().context("a pod with a status")?;
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|condition| condition.type_ == "Ready" && condition.status == "True");
        ensure!(ready, "{name} is not Ready: {status:?}");
        if let Some(component) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get("app.kubernetes.io/name"))
        {
            components.push(component.clone());
        }
        let containers = status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten());
        for container in containers {
            ensure!(
                container.image_id == pulled,
                "{name}/{} runs {}, not {pulled} pulled from the registry",
                container.name,
                container.image_id
            );
            let id = container
                .container_id
                .as_deref()
                .and_then(|id| id.strip_prefix("containerd://"))
                .with_context(|| format!("{name}/{} has no containerd id", container.name))?;
            let pid = Node::container_pid(&ns.env.cluster, id)?;
            check_process(pid).with_context(|| format!("{name}/{}", container.name))?;
            checked += 1;
        }
    }
    components.sort();
    ensure!(
        components
            == [
                "kube-retention-controller",
                "kube-retention-controller",
                "kube-retention-webhook",
                "kube-retention-webhook"
            ],
        "both controller replicas and both webhook replicas: {components:?}"
    );
    // Two controllers, two webhooks each with its certificate sidecar.
    ensure!(checked == 6, "{checked} containers checked, 6 expected");
    Ok(())
}

/// What `/proc/<pid>` of a container's process says about its privileges.
fn check_process(pid: i32) -> Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<String> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}:")))
            .map(|value| value.split_whitespace().collect::<Vec<_>>().join(" "))
            .with_context(|| format!("no {name} in /proc/{pid}/status"))
    };
    ensure!(
        field("Uid")? == "65532 65532 65532 65532",
        "uids {}",
        field("Uid")?
    );
    ensure!(
        field("Gid")? == "65532 65532 65532 65532",
        "gids {}",
        field("Gid")?
    );
    ensure!(field("NoNewPrivs")? == "1", "privilege escalation possible");
    for capabilities in ["CapEff", "CapPrm", "CapBnd"] {
        ensure!(
            field(capabilities)?.trim_start_matches('0').is_empty(),
            "{capabilities} {}",
            field(capabilities)?
        );
    }
    // 2: a seccomp filter (RuntimeDefault).
    ensure!(
        field("Seccomp")? == "2",
        "seccomp mode {}",
        field("Seccomp")?
    );
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    // The last mount on / is the one the container sees.
    let root = mounts
        .lines()
        .rev()
        .find(|line| line.split(' ').nth(4) == Some("/"))
        .with_context(|| format!("no root mount in /proc/{pid}/mountinfo"))?;
    let options = root.split(' ').nth(5).unwrap_or_default();
    ensure!(
        options.split(',').any(|option| option == "ro"),
        "the root file system is mounted {options}"
    );
    Ok(())
}
