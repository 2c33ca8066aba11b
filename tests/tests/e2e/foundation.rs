//! The foundation: the cluster runs the pinned release, Shipwright's CRDs work through the real
//! API server (status subresource included), and kube-retention's ServiceAccounts get exactly the
//! RBAC that `deploy/` grants (the sink policy's reads of the cluster's insides included: the
//! API server's EndpointSlices in `default` only).

use anyhow::{Result, ensure};
use kube::api::{Patch, PatchParams, PostParams};
use kube_retention_e2e::cluster::{CONTROLLER_SERVICE_ACCOUNT, WEBHOOK_SERVICE_ACCOUNT};
use kube_retention_e2e::{LocalCluster, run};
use libtest_mimic::Trial;
use serde_json::json;

use crate::support::{Env, TestNamespace, client_for, object, shipwright};

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "cluster_serves_the_pinned_kubernetes_release",
            pinned_release,
        ),
        env.trial(
            "build_and_buildrun_round_trip_with_status_subresource",
            build_and_buildrun,
        ),
        env.trial(
            "service_accounts_get_exactly_the_deploy_rbac",
            service_account_rbac,
        ),
        env.trial(
            "service_account_kubeconfigs_act_with_the_deploy_rbac",
            service_account_kubeconfigs,
        ),
    ]
}

async fn pinned_release(ns: TestNamespace) -> Result<()> {
    let pinned = ns.env.cluster.layout.kubernetes_release()?;
    let version: serde_json::Value =
        serde_json::from_str(&run(ns.kubectl().args(["version", "--output=json"]))?)?;
    ensure!(
        version["serverVersion"]["gitVersion"] == pinned,
        "server version {version}"
    );
    ensure!(
        version["clientVersion"]["gitVersion"] == pinned,
        "kubectl version {version}"
    );
    Ok(())
}

async fn build_and_buildrun(ns: TestNamespace) -> Result<()> {
    let builds = ns.dynamic(&shipwright("Build"));
    let buildruns = ns.dynamic(&shipwright("BuildRun"));
    let build = object(
        &shipwright("Build"),
        json!({
            "metadata": { "name": "hello" },
            "spec": {
                "source": { "type": "Git", "git": { "url": "https://github.com/shipwright-io/sample-go" } },
                "strategy": { "kind": "ClusterBuildStrategy", "name": "buildkit" },
                "output": { "image": "registry.example/hello:latest" },
                "retention": { "ttlAfterSucceeded": "1h", "succeededLimit": 3 },
            },
        }),
    )?;
    builds.create(&PostParams::default(), &build).await?;
    let buildrun = object(
        &shipwright("BuildRun"),
        json!({
            "metadata": { "name": "hello-1" },
            "spec": { "build": { "name": "hello" } },
        }),
    )?;
    buildruns.create(&PostParams::default(), &buildrun).await?;

    // Finished now: the run inherits the Build's one-hour TTL, so it stays for this test.
    let finished = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())?.to_string();
    let status = json!({
        "status": {
            "conditions": [{
                "type": "Succeeded",
                "status": "True",
                "reason": "Succeeded",
                "message": "All Steps have completed executing",
                "lastTransitionTime": finished,
            }],
            "completionTime": finished,
        },
        // Ignored: a status update never changes the spec.
        "spec": { "build": { "name": "someone-else" } },
    });
    buildruns
        .patch_status("hello-1", &PatchParams::default(), &Patch::Merge(&status))
        .await?;

    let read_back = buildruns.get("hello-1").await?;
    ensure!(
        read_back.data["status"]["conditions"][0]["status"] == "True",
        "{read_back:?}"
    );
    ensure!(read_back.data["status"]["completionTime"] == finished.as_str());
    ensure!(
        read_back.data["spec"]["build"]["name"] == "hello",
        "spec untouched by /status"
    );
    let build = builds.get("hello").await?;
    ensure!(
        build.data["spec"]["retention"]["ttlAfterSucceeded"] == "1h",
        "{build:?}"
    );
    ensure!(build.data["spec"]["retention"]["succeededLimit"] == 3);

    // And the other way round: the main resource ignores status changes.
    let reset = json!({ "status": { "completionTime": "2030-01-01T00:00:00Z" } });
    buildruns
        .patch("hello-1", &PatchParams::default(), &Patch::Merge(&reset))
        .await?;
    let read_back = buildruns.get("hello-1").await?;
    ensure!(read_back.data["status"]["completionTime"] == finished.as_str());
    Ok(())
}

async fn service_account_rbac(ns: TestNamespace) -> Result<()> {
    // In `namespace`, or in all of them for "".
    let can_i_in = |service_account: &str, verb: &str, resource: &str, namespace: &str| {
        let scope = match namespace {
            "" => "--all-namespaces".to_owned(),
            namespace => format!("--namespace={namespace}"),
        };
        let output = ns
            .kubectl()
            .args(["auth", "can-i", verb, resource, &scope, "--as"])
            .arg(LocalCluster::service_account_user(service_account))
            .output()?;
        // `can-i` answers on stdout and exits 1 for "no".
        anyhow::Ok(String::from_utf8(output.stdout)?.trim() == "yes")
    };
    let can_i = |service_account: &str, verb: &str, resource: &str| {
        can_i_in(service_account, verb, resource, "")
    };
    let controller = CONTROLLER_SERVICE_ACCOUNT;
    for (verb, resource) in [
        ("delete", "buildruns.shipwright.io"),
        ("patch", "buildruns.shipwright.io"),
        ("watch", "builds.shipwright.io"),
        ("delete", "jobs.batch"),
        ("delete", "pods"),
        ("create", "events.events.k8s.io"),
    ] {
        ensure!(
            can_i(controller, verb, resource)?,
            "controller may {verb} {resource}"
        );
    }
    for (verb, resource) in [
        ("create", "buildruns.shipwright.io"),
        ("update", "jobs.batch"),
        ("delete", "builds.shipwright.io"),
        ("get", "secrets"),
        ("delete", "namespaces"),
    ] {
        ensure!(
            !can_i(controller, verb, resource)?,
            "controller may not {verb} {resource}"
        );
    }
    // The sink policy reads the cluster's insides: nodes and ServiceCIDRs anywhere, the API
    // server's EndpointSlices in `default` only, nothing more of them.
    for (verb, resource, namespace) in [
        ("list", "nodes", ""),
        ("watch", "nodes", ""),
        ("list", "servicecidrs.networking.k8s.io", ""),
        ("watch", "servicecidrs.networking.k8s.io", ""),
        ("list", "endpointslices.discovery.k8s.io", "default"),
        ("watch", "endpointslices.discovery.k8s.io", "default"),
    ] {
        ensure!(
            can_i_in(controller, verb, resource, namespace)?,
            "controller may {verb} {resource} in {namespace:?}"
        );
    }
    for (verb, resource, namespace) in [
        ("get", "nodes", ""),
        ("patch", "nodes", ""),
        ("create", "servicecidrs.networking.k8s.io", ""),
        ("list", "endpointslices.discovery.k8s.io", ""),
        ("list", "endpointslices.discovery.k8s.io", ns.name.as_str()),
        ("update", "endpointslices.discovery.k8s.io", "default"),
    ] {
        ensure!(
            !can_i_in(controller, verb, resource, namespace)?,
            "controller may not {verb} {resource} in {namespace:?}"
        );
    }
    ensure!(!can_i(WEBHOOK_SERVICE_ACCOUNT, "list", "nodes")?);
    ensure!(can_i(
        WEBHOOK_SERVICE_ACCOUNT,
        "get",
        "builds.shipwright.io"
    )?);
    for (verb, resource) in [
        ("list", "builds.shipwright.io"),
        ("delete", "buildruns.shipwright.io"),
        ("get", "secrets"),
    ] {
        ensure!(
            !can_i(WEBHOOK_SERVICE_ACCOUNT, verb, resource)?,
            "webhook may not {verb} {resource}"
        );
    }
    Ok(())
}

async fn service_account_kubeconfigs(ns: TestNamespace) -> Result<()> {
    let kubeconfig = ns
        .env
        .cluster
        .service_account_kubeconfig(CONTROLLER_SERVICE_ACCOUNT);
    let client = client_for(&kubeconfig).await?;
    let buildruns: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), &ns.name, &shipwright("BuildRun"));
    buildruns.list(&Default::default()).await?;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client, &ns.name);
    match secrets.list(&Default::default()).await {
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
        other => {
            anyhow::bail!("listing secrets as the controller must be forbidden, got {other:?}")
        }
    }
}
