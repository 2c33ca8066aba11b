//! `served`: the one lookup of whether the cluster serves a kind, against a mocked API server.

use kube_retention_runtime::discovery::served;
use serde_json::json;

#[tokio::test]
async fn a_kind_is_found_by_kind_past_its_subresources_and_not_served_is_not_an_error() {
    let (client, mut server) = kube_retention_apimock::pair();
    let asking = tokio::spawn(async move {
        let jobs = served(&client, "batch/v1", "Job").await;
        let pods = served(&client, "v1", "Pod").await;
        let builds = served(&client, "shipwright.io/v1beta1", "Build").await;
        let broken = served(&client, "tekton.dev/v1", "PipelineRun").await;
        (jobs, pods, builds, broken)
    });
    let list = |group_version: &str, resources: serde_json::Value| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
               "resources": resources})
    };
    let received = server.next().await.expect("batch/v1 discovery");
    assert_eq!(received.line(), "GET /apis/batch/v1");
    received.reply(
        200,
        &list(
            "batch/v1",
            json!([{"name": "jobs/status", "singularName": "", "namespaced": true, "kind": "Job",
                    "verbs": ["get"]},
                   {"name": "jobs", "singularName": "job", "namespaced": true, "kind": "Job",
                    "verbs": ["list"]}]),
        ),
    );
    let received = server.next().await.expect("core discovery");
    assert_eq!(received.line(), "GET /api/v1");
    received.reply(200, &list("v1", json!([])));
    let received = server.next().await.expect("shipwright discovery");
    received.refuse(404, "the server could not find the requested resource");
    let received = server.next().await.expect("tekton discovery");
    received.refuse(503, "etcd is unhappy");

    let (jobs, pods, builds, broken) = asking.await.expect("the lookups ran");
    let jobs = jobs.expect("answered").expect("served");
    assert_eq!(
        (
            jobs.resource.api_version.as_str(),
            jobs.resource.plural.as_str(),
            jobs.namespaced
        ),
        ("batch/v1", "jobs", true)
    );
    assert!(pods.expect("answered").is_none(), "a list without the kind");
    assert!(
        builds.expect("answered").is_none(),
        "a group version not served"
    );
    assert!(
        broken.is_err(),
        "an API server that cannot say is an error, not 'not served'"
    );
}
