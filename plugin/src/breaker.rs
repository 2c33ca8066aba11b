//! `kubectl retention breaker`: the controller's circuit breakers — each namespace's, which stops
//! that namespace's deletions once more went within its window than its limit allows, and the
//! cluster's, which stops every deletion past the cluster's total. `status` says which are open,
//! since when and why; `release` lets deletions resume: the cluster's (deleting its ConfigMap),
//! one namespace's (`-n`, removing its key from the namespaces' ConfigMap) or every namespace's
//! (`-A`, deleting that ConfigMap). The controller sends what the breaker held first, uncounted
//! by it, and its count starts afresh. Releasing needs delete (the cluster's, `-A`) or patch
//! (`-n`) on those ConfigMaps in the controller's namespace: an admin's permission.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube_retention_common::breaker::{
    MESSAGE, NamespaceTrip, TRIPPED_AT, configmap_name, namespaces_configmap_name,
};
use serde::Serialize;
use serde_json::json;

use crate::kinds::ControllerLease;
use crate::output::Format;
use clap::ValueEnum;

#[derive(Debug, clap::Args)]
pub struct BreakerArgs {
    pub action: BreakerAction,
    /// One namespace's breaker (for `release`; `status` then says only its).
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Every namespace's breaker (for `release`; the cluster's is left as it is).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BreakerAction {
    /// Which breakers are open, since when and why.
    Status,
    /// Let deletions resume: the cluster's, or with -n a namespace's, with -A every namespace's.
    Release,
}

/// Which breaker a command is about.
enum Which<'a> {
    Cluster,
    Namespace(&'a str),
    AllNamespaces,
}

pub async fn run(client: Client, controller: &ControllerLease, args: BreakerArgs) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, &controller.namespace);
    let which = match (&args.namespace, args.all_namespaces) {
        (Some(namespace), _) => Which::Namespace(namespace),
        (None, true) => Which::AllNamespaces,
        (None, false) => Which::Cluster,
    };
    let names = Names::of(controller);
    match args.action {
        BreakerAction::Status => status(&api, &names, &which, args.output).await,
        BreakerAction::Release => match which {
            Which::Cluster => release_cluster(&api, &names, args.output).await,
            Which::Namespace(namespace) => {
                release_namespace(&api, &names, namespace, args.output).await
            }
            Which::AllNamespaces => release_all_namespaces(&api, &names, args.output).await,
        },
    }
}

/// The two ConfigMaps, by name and as messages show them (`ConfigMap ns/name`).
struct Names {
    cluster: String,
    namespaces: String,
    namespace: String,
}

impl Names {
    fn of(controller: &ControllerLease) -> Self {
        Self {
            cluster: configmap_name(&controller.name),
            namespaces: namespaces_configmap_name(&controller.name),
            namespace: controller.namespace.clone(),
        }
    }

    fn shown(&self, name: &str) -> String {
        format!("ConfigMap {}/{name}", self.namespace)
    }

    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }
}

/// The breakers as `-o json|yaml` gives them.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct State {
    /// The ConfigMap that keeps the cluster's breaker open while it exists.
    config_map: String,
    /// Whether every deletion is stopped now.
    open: bool,
    /// Whether this run released the cluster's breaker.
    released: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tripped_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// The ConfigMap naming the namespaces whose breakers are open.
    namespaces_config_map: String,
    /// The namespaces whose breakers are open (after this run's release).
    namespaces: Vec<OpenNamespace>,
    /// The namespaces whose breakers this run released.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    released_namespaces: Vec<String>,
}

/// A namespace whose breaker is open.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct OpenNamespace {
    namespace: String,
    #[serde(flatten)]
    trip: Option<NamespaceTrip>,
}

impl State {
    fn new(names: &Names) -> Self {
        Self {
            config_map: names.path(&names.cluster),
            namespaces_config_map: names.path(&names.namespaces),
            ..Self::default()
        }
    }
}

/// The namespaces a namespaces' ConfigMap names, and their trips as recorded.
fn open_namespaces(config_map: Option<ConfigMap>) -> Vec<OpenNamespace> {
    let data: BTreeMap<String, String> = config_map
        .and_then(|config_map| config_map.data)
        .unwrap_or_default();
    data.into_iter()
        .map(|(namespace, value)| OpenNamespace {
            namespace,
            trip: NamespaceTrip::decode(&value),
        })
        .collect()
}

/// "team-a (since 2026-11-25T10:00:00Z: more than 1000 deletions within 10m)"
fn describe(open: &OpenNamespace) -> String {
    match &open.trip {
        Some(trip) => format!(
            "{} (since {}: more than {} deletions within {})",
            open.namespace, trip.tripped_at, trip.limit, trip.window
        ),
        None => open.namespace.clone(),
    }
}

async fn read(api: &Api<ConfigMap>, names: &Names, name: &str) -> Result<Option<ConfigMap>> {
    let shown = names.shown(name);
    api.get_opt(name)
        .await
        .with_context(|| format!("reading the circuit breakers' {shown}"))
}

async fn status(
    api: &Api<ConfigMap>,
    names: &Names,
    which: &Which<'_>,
    format: Format,
) -> Result<()> {
    let mut state = State::new(names);
    let cluster = read(api, names, &names.cluster).await?;
    let namespaces = read(api, names, &names.namespaces).await?;
    let mut sentences = Vec::new();
    match cluster {
        Some(stored) => {
            let mut data = stored.data.unwrap_or_default();
            state.open = true;
            state.tripped_at = data.remove(TRIPPED_AT);
            state.message = data.remove(MESSAGE);
            let tripped_at = state.tripped_at.as_deref().unwrap_or("?");
            let message = state.message.as_deref().unwrap_or("?");
            sentences.push(format!(
                "the cluster's circuit breaker is open since {tripped_at}: {message}"
            ));
        }
        None => sentences.push(format!(
            "the cluster's circuit breaker is closed: deletions go ({} does not exist)",
            names.shown(&names.cluster)
        )),
    }
    state.namespaces = open_namespaces(namespaces);
    if let Which::Namespace(namespace) = which {
        state.namespaces.retain(|open| open.namespace == *namespace);
        sentences.push(match state.namespaces.first() {
            Some(open) => format!(
                "the circuit breaker of namespace {} is open",
                describe(open)
            ),
            None => format!("the circuit breaker of namespace {namespace} is closed"),
        });
    } else if state.namespaces.is_empty() {
        sentences.push("no namespace's circuit breaker is open".to_owned());
    } else {
        let open: Vec<String> = state.namespaces.iter().map(describe).collect();
        sentences.push(format!(
            "the circuit breakers of {} namespace(s) are open: {}",
            open.len(),
            open.join(", ")
        ));
    }
    crate::output::say(format, &sentences.join("\n"), &state)
}

async fn release_cluster(api: &Api<ConfigMap>, names: &Names, format: Format) -> Result<()> {
    let mut state = State::new(names);
    let shown = names.shown(&names.cluster);
    let Some(stored) = read(api, names, &names.cluster).await? else {
        let said = format!(
            "the cluster's circuit breaker is closed: deletions go ({shown} does not exist)"
        );
        return crate::output::say(format, &said, &state);
    };
    let mut data = stored.data.unwrap_or_default();
    state.tripped_at = data.remove(TRIPPED_AT);
    state.message = data.remove(MESSAGE);
    api.delete(&names.cluster, &DeleteParams::default())
        .await
        .with_context(|| format!("releasing the cluster's circuit breaker: deleting {shown}"))?;
    state.released = true;
    let tripped_at = state.tripped_at.as_deref().unwrap_or("?");
    let sentence = format!(
        "released the cluster's circuit breaker (open since {tripped_at}): the controller \
         resumes deleting, what it held first (namespaces whose own breaker is open stay held)"
    );
    crate::output::say(format, &sentence, &state)
}

async fn release_namespace(
    api: &Api<ConfigMap>,
    names: &Names,
    namespace: &str,
    format: Format,
) -> Result<()> {
    let mut state = State::new(names);
    let shown = names.shown(&names.namespaces);
    state.namespaces = open_namespaces(read(api, names, &names.namespaces).await?);
    let Some(index) = state
        .namespaces
        .iter()
        .position(|open| open.namespace == namespace)
    else {
        let said = format!(
            "the circuit breaker of namespace {namespace} is closed: its deletions go ({shown} \
             does not name it)"
        );
        return crate::output::say(format, &said, &state);
    };
    let open = state.namespaces.remove(index);
    let patch = json!({"data": {namespace: null}});
    api.patch(
        &names.namespaces,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .with_context(|| {
        format!(
            "releasing the circuit breaker of namespace {namespace}: removing its key from \
                 {shown}"
        )
    })?;
    state.released_namespaces.push(namespace.to_owned());
    let sentence = format!(
        "released the circuit breaker of namespace {}: the controller resumes deleting there, \
         what it held first",
        describe(&open)
    );
    crate::output::say(format, &sentence, &state)
}

async fn release_all_namespaces(api: &Api<ConfigMap>, names: &Names, format: Format) -> Result<()> {
    let mut state = State::new(names);
    let shown = names.shown(&names.namespaces);
    let open = open_namespaces(read(api, names, &names.namespaces).await?);
    if open.is_empty() {
        let said = "no namespace's circuit breaker is open".to_owned();
        return crate::output::say(format, &said, &state);
    }
    api.delete(&names.namespaces, &DeleteParams::default())
        .await
        .with_context(|| {
            format!("releasing every namespace's circuit breaker: deleting {shown}")
        })?;
    state.released_namespaces = open.iter().map(|open| open.namespace.clone()).collect();
    let sentence = format!(
        "released the circuit breakers of {} namespace(s): {}",
        open.len(),
        state.released_namespaces.join(", ")
    );
    crate::output::say(format, &sentence, &state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const PATH: &str =
        "/api/v1/namespaces/kube-retention/configmaps/kube-retention-controller-circuit-breaker";
    const NAMESPACES_PATH: &str = "/api/v1/namespaces/kube-retention/configmaps/\
                                   kube-retention-controller-circuit-breaker-namespaces";

    fn controller() -> ControllerLease {
        ControllerLease {
            namespace: "kube-retention".into(),
            name: "kube-retention-controller".into(),
        }
    }

    fn args(action: BreakerAction, namespace: Option<&str>, all_namespaces: bool) -> BreakerArgs {
        BreakerArgs {
            action,
            namespace: namespace.map(str::to_owned),
            all_namespaces,
            output: Format::Table,
        }
    }

    fn stored() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "kube-retention-controller-circuit-breaker",
                            "namespace": "kube-retention"},
               "data": {"trippedAt": "2026-11-25T10:00:00Z", "message": "more than 200 deletions within 1m"}})
    }

    fn namespaces() -> Value {
        let trip = NamespaceTrip {
            tripped_at: "2026-11-25T10:00:00Z".into(),
            limit: 1000,
            window: "10m".into(),
        };
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "kube-retention-controller-circuit-breaker-namespaces",
                            "namespace": "kube-retention"},
               "data": {"team-a": trip.encode(), "team-b": trip.encode()}})
    }

    #[tokio::test]
    async fn release_deletes_the_configmap_it_read() {
        let (client, mut server) = kube_retention_apimock::pair();
        let releasing = tokio::spawn(async move {
            let args = args(BreakerAction::Release, None, false);
            run(client, &controller(), args).await
        });
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {PATH}"));
        get.reply(200, &stored());
        let delete = server.next().await.unwrap();
        assert_eq!(delete.line(), format!("DELETE {PATH}"));
        delete.reply(200, &stored());
        releasing.await.unwrap().unwrap();
        assert!(server.quiet().await, "nothing else is sent");
    }

    #[tokio::test]
    async fn a_closed_breaker_is_left_alone_and_a_refusal_names_what_failed() {
        let (client, mut server) = kube_retention_apimock::pair();
        let releasing = tokio::spawn(async move {
            let args = args(BreakerAction::Release, None, false);
            run(client, &controller(), args).await
        });
        server.next().await.unwrap().refuse(404, "not found");
        releasing.await.unwrap().unwrap();
        assert!(server.quiet().await, "no DELETE of what is not there");

        let (client, mut server) = kube_retention_apimock::pair();
        let releasing = tokio::spawn(async move {
            let args = args(BreakerAction::Release, None, false);
            run(client, &controller(), args).await
        });
        server.next().await.unwrap().reply(200, &stored());
        let refusal = "configmaps is forbidden: User \"dev\" cannot delete resource \"configmaps\"";
        server.next().await.unwrap().refuse(403, refusal);
        let error = format!("{:#}", releasing.await.unwrap().unwrap_err());
        assert!(
            error.starts_with(
                "releasing the cluster's circuit breaker: deleting ConfigMap \
                 kube-retention/kube-retention-controller-circuit-breaker: "
            ),
            "{error}"
        );
        assert!(error.contains("cannot delete"), "{error}");
    }

    #[tokio::test]
    async fn releasing_a_namespace_removes_its_key_only() {
        let (client, mut server) = kube_retention_apimock::pair();
        let releasing = tokio::spawn(async move {
            let args = args(BreakerAction::Release, Some("team-a"), false);
            run(client, &controller(), args).await
        });
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {NAMESPACES_PATH}"));
        get.reply(200, &namespaces());
        let patch = server.next().await.unwrap();
        assert_eq!(patch.line(), format!("PATCH {NAMESPACES_PATH}"));
        assert_eq!(patch.body, json!({"data": {"team-a": null}}));
        patch.reply(200, &namespaces());
        releasing.await.unwrap().unwrap();
        assert!(server.quiet().await, "nothing else is sent");
    }

    #[tokio::test]
    async fn a_namespace_not_held_is_left_alone_and_all_namespaces_delete_their_configmap() {
        let (client, mut server) = kube_retention_apimock::pair();
        let releasing = tokio::spawn(async move {
            let args = args(BreakerAction::Release, Some("team-c"), false);
            run(client, &controller(), args).await
        });
        server.next().await.unwrap().reply(200, &namespaces());
        releasing.await.unwrap().unwrap();
        assert!(server.quiet().await, "no PATCH for a namespace not held");

        let (client, mut server) = kube_retention_apimock::pair();
        let releasing = tokio::spawn(async move {
            let args = args(BreakerAction::Release, None, true);
            run(client, &controller(), args).await
        });
        server.next().await.unwrap().reply(200, &namespaces());
        let delete = server.next().await.unwrap();
        assert_eq!(delete.line(), format!("DELETE {NAMESPACES_PATH}"));
        delete.reply(200, &namespaces());
        releasing.await.unwrap().unwrap();
        assert!(server.quiet().await, "nothing else is sent");
    }

    #[tokio::test]
    async fn status_reads_both_configmaps() {
        let (client, mut server) = kube_retention_apimock::pair();
        let reading = tokio::spawn(async move {
            let args = args(BreakerAction::Status, None, false);
            run(client, &controller(), args).await
        });
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {PATH}"));
        get.refuse(404, "not found");
        let get = server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {NAMESPACES_PATH}"));
        get.reply(200, &namespaces());
        reading.await.unwrap().unwrap();
        assert!(server.quiet().await, "status changes nothing");
        let open = open_namespaces(serde_json::from_value(namespaces()).ok());
        let described: Vec<String> = open.iter().map(describe).collect();
        assert_eq!(
            described,
            [
                "team-a (since 2026-11-25T10:00:00Z: more than 1000 deletions within 10m)",
                "team-b (since 2026-11-25T10:00:00Z: more than 1000 deletions within 10m)"
            ]
        );
    }
}
