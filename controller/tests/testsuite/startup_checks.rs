//! The start-up checks against a mocked API server (`kube-retention-apimock`): discovery decides which kinds
//! are watched (an optional kind not served is skipped, a required one stops the controller, an
//! API server that cannot answer is an error naming what was asked, not "not served"), and the
//! permission check asks one SelfSubjectAccessReview per verb and lists every one refused.

use kube_retention_common::Registry;
use kube_retention_common::kinds::{Entry, Resource};
use kube_retention_controller::{Error, startup};
use serde_json::{Value, json};

use kube_retention_apimock::{ApiServer, pair as client};

/// A group version's resources, each by plural and kind, with its status subresource.
fn resource_list(group_version: &str, served: &[(&str, &str)]) -> Value {
    let resources: Vec<Value> = served
        .iter()
        .flat_map(|(plural, kind)| {
            [
                json!({"name": format!("{plural}/status"), "singularName": "", "namespaced": true,
                       "kind": kind, "verbs": ["get", "patch"]}),
                json!({"name": plural, "singularName": "", "namespaced": true,
                       "kind": kind, "verbs": ["list"]}),
            ]
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
           "resources": resources})
}

/// Answers discovery: the core and batch groups are served, Shipwright and OpenShift are not
/// (or, with `failing`, that group version's request fails with 503).
async fn discovery(mut server: ApiServer, failing: Option<&'static str>) -> Vec<String> {
    let mut asked = Vec::new();
    while let Some(received) = server.next().await {
        let path = received.path.clone();
        asked.push(path.clone());
        let served = match path.as_str() {
            "/api/v1" => Some(resource_list("v1", &[("pods", "Pod")])),
            "/apis/batch/v1" => Some(resource_list("batch/v1", &[("jobs", "Job")])),
            _ => None,
        };
        match served {
            _ if failing.is_some_and(|failing| path.ends_with(failing)) => {
                received.refuse(503, "etcd is unhappy");
            }
            Some(list) => received.reply(200, &list),
            None => received.refuse(404, "the server could not find the requested resource"),
        }
    }
    asked
}

#[tokio::test]
async fn kinds_the_cluster_does_not_serve_are_skipped_when_optional() {
    let (client, server) = client();
    let answering = tokio::spawn(discovery(server, None));
    let registry = Registry::builtin();
    let served = startup::served_kinds(&client, registry).await.unwrap();
    drop(client);
    let names: Vec<String> = served
        .iter()
        .map(|&id| registry[id].resource.to_string())
        .collect();
    assert_eq!(names, ["Job.batch", "Pod"]);
    let asked = answering.await.unwrap();
    assert!(
        asked.contains(&"/apis/shipwright.io/v1beta1".to_owned()),
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_required_kind_not_served_stops_the_controller_naming_it() {
    let (client, server) = client();
    let answering = tokio::spawn(discovery(server, None));
    // A kind added with --kind is required: the controller was told to watch it.
    let mut required = Registry::builtin().clone();
    let widgets = Resource::new("example.com", "v1", "Widget", "widgets");
    required.add(Entry::plain(widgets)).unwrap();
    let error = startup::served_kinds(&client, &required).await.unwrap_err();
    drop(client);
    answering.await.unwrap();
    assert!(matches!(error, Error::NotServed(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "example.com/v1 Widget is not served by this cluster"
    );
}

#[tokio::test]
async fn an_api_server_that_cannot_answer_discovery_is_an_error_naming_the_group_version() {
    let (client, server) = client();
    let answering = tokio::spawn(discovery(server, Some("/apis/batch/v1")));
    let error = startup::served_kinds(&client, Registry::builtin())
        .await
        .unwrap_err();
    drop(client);
    answering.await.unwrap();
    assert_eq!(error.metric_label(), "discovery", "{error}");
    let said = error.to_string();
    assert!(
        said.contains("batch/v1") && said.contains("etcd is unhappy"),
        "{said}"
    );
}

/// Answers SelfSubjectAccessReviews: allowed unless `refused(verb, resource)`, or failing with
/// 500 for `broken(verb, resource)`; answers what was asked, as `verb resource group namespace`.
async fn access_reviews(
    mut server: ApiServer,
    refused: fn(&str, &str) -> bool,
    broken: fn(&str, &str) -> bool,
) -> Vec<String> {
    let mut asked = Vec::new();
    while let Some(received) = server.next().await {
        assert_eq!(
            received.line(),
            "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        );
        let review = received.body.clone();
        let attributes = &review["spec"]["resourceAttributes"];
        let text = |key: &str| attributes[key].as_str().unwrap_or_default().to_owned();
        let (verb, resource) = (text("verb"), text("resource"));
        asked.push(format!(
            "{verb} {resource} {} {}",
            text("group"),
            text("namespace")
        ));
        if broken(&verb, &resource) {
            received.refuse(500, "webhook authorizer timed out");
            continue;
        }
        let allowed = !refused(&verb, &resource);
        let mut answer = review.clone();
        answer["status"] = json!({"allowed": allowed});
        received.reply(201, &answer);
    }
    asked
}

fn jobs_and_pods(registry: &Registry) -> Vec<kube_retention_common::kinds::KindId> {
    ["Job.batch", "Pod"]
        .iter()
        .map(|name| registry.named(name).unwrap())
        .collect()
}

#[tokio::test]
async fn every_refused_permission_is_listed_at_once() {
    let (client, server) = client();
    let refused = |verb: &str, resource: &str| {
        (verb == "delete" && resource == "jobs") || (verb == "update" && resource == "leases")
    };
    let answering = tokio::spawn(access_reviews(server, refused, |_, _| false));
    let registry = Registry::builtin();
    let served = jobs_and_pods(registry);
    let error =
        startup::check_permissions(&client, registry, &served, Some("kube-retention"), None)
            .await
            .unwrap_err();
    drop(client);
    let asked = answering.await.unwrap();
    match &error {
        Error::MissingPermissions(missing) => assert_eq!(
            missing,
            &[
                "delete jobs (batch) in all namespaces",
                "update leases (coordination.k8s.io) in namespace kube-retention",
            ]
        ),
        other => panic!("{other:?}"),
    }
    // Every verb of both kinds, Events, and the Lease in its namespace.
    for expected in [
        "list jobs batch ",
        "watch pods  ",
        "patch pods  ",
        "create events events.k8s.io ",
        "get leases coordination.k8s.io kube-retention",
    ] {
        assert!(
            asked.contains(&expected.to_owned()),
            "{expected:?} in {asked:?}"
        );
    }
}

#[tokio::test]
async fn an_access_review_the_api_server_cannot_answer_names_the_permission() {
    let (client, server) = client();
    let broken = |verb: &str, resource: &str| verb == "watch" && resource == "pods";
    let answering = tokio::spawn(access_reviews(server, |_, _| false, broken));
    let registry = Registry::builtin();
    let error = startup::check_permissions(&client, registry, &jobs_and_pods(registry), None, None)
        .await
        .unwrap_err();
    drop(client);
    answering.await.unwrap();
    assert_eq!(error.metric_label(), "access_review");
    let said = error.to_string();
    assert!(
        said.contains("may watch pods (core) in all namespaces")
            && said.contains("webhook authorizer timed out"),
        "{said}"
    );
}

#[tokio::test]
async fn a_controller_with_every_permission_passes() {
    let (client, server) = client();
    let answering = tokio::spawn(access_reviews(server, |_, _| false, |_, _| false));
    let registry = Registry::builtin();
    startup::check_permissions(&client, registry, &jobs_and_pods(registry), None, None)
        .await
        .unwrap();
    drop(client);
    let asked = answering.await.unwrap();
    assert!(
        !asked.iter().any(|asked| asked.contains("leases")),
        "no Lease without leader election: {asked:?}"
    );
}

#[tokio::test]
async fn the_circuit_breakers_need_their_configmaps_by_name_and_to_create_them() {
    let (client, server) = client();
    let refused = |verb: &str, resource: &str| verb == "watch" && resource == "configmaps";
    let answering = tokio::spawn(access_reviews(server, refused, |_, _| false));
    let registry = Registry::builtin();
    let store = startup::BreakerStore {
        namespace: "kube-retention",
        name: "kube-retention-controller-circuit-breaker",
        namespaces_name: "kube-retention-controller-circuit-breaker-namespaces",
    };
    let error = startup::check_permissions(
        &client,
        registry,
        &jobs_and_pods(registry),
        None,
        Some(store),
    )
    .await
    .unwrap_err();
    drop(client);
    let asked = answering.await.unwrap();
    assert_eq!(
        error.to_string(),
        "missing RBAC permissions, grant them (see deploy/core/controller-rbac.yaml): watch \
         configmaps (core) named kube-retention-controller-circuit-breaker in namespace \
         kube-retention; watch configmaps (core) named \
         kube-retention-controller-circuit-breaker-namespaces in namespace kube-retention"
    );
    for expected in [
        "get configmaps  kube-retention",
        "list configmaps  kube-retention",
        "patch configmaps  kube-retention",
        "create configmaps  kube-retention",
    ] {
        assert!(
            asked.contains(&expected.to_owned()),
            "{expected:?} in {asked:?}"
        );
    }
}

/// Answers `/version` with `major` and `minor`, or refuses it with 503 when `None`.
async fn version(mut server: ApiServer, answer: Option<(&'static str, &'static str)>) {
    while let Some(received) = server.next().await {
        assert_eq!(received.path, "/version");
        match answer {
            Some((major, minor)) => received.reply(
                200,
                &json!({"major": major, "minor": minor, "gitVersion": format!("v{major}.{minor}.0"),
                        "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
                        "goVersion": "", "compiler": "gc", "platform": "linux/amd64"}),
            ),
            None => received.refuse(503, "etcd is unhappy"),
        }
    }
}

#[tokio::test]
async fn the_api_servers_version_is_placed_against_the_supported_minors() {
    use kube_retention_common::kubernetes::Support;
    for (answer, expected) in [
        (Some(("1", "33+")), Support::Supported),
        (Some(("1", "37")), Support::Supported),
        (Some(("1", "32")), Support::Older),
        (Some(("1", "38")), Support::Newer),
        (None, Support::Unknown),
    ] {
        let (client, server) = client();
        let answering = tokio::spawn(version(server, answer));
        assert_eq!(
            startup::say_kubernetes_version(&client).await,
            expected,
            "{answer:?}"
        );
        drop(client);
        answering.await.unwrap();
    }
}
