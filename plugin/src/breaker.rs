//! `kubectl retention breaker`: the controller's circuit breaker, which stops every deletion once
//! more went within its window than its limit allows. `status` says whether it is open, since
//! when and why; `release` deletes the ConfigMap that keeps it open, and the controller resumes:
//! the deletions it held go first, uncounted, and the count starts afresh. Releasing needs
//! delete on ConfigMaps in the controller's namespace, an admin's permission.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams};
use kube_retention_common::breaker::{MESSAGE, TRIPPED_AT, configmap_name};
use serde::Serialize;

use crate::kinds::ControllerLease;
use crate::output::Format;
use clap::ValueEnum;

#[derive(Debug, clap::Args)]
pub struct BreakerArgs {
    pub action: BreakerAction,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BreakerAction {
    /// Whether it is open, since when and why.
    Status,
    /// Let deletions resume.
    Release,
}

pub async fn run(client: Client, controller: &ControllerLease, args: BreakerArgs) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, &controller.namespace);
    let name = configmap_name(&controller.name);
    let shown = format!("ConfigMap {}/{name}", controller.namespace);
    let stored = api
        .get_opt(&name)
        .await
        .with_context(|| format!("reading the circuit breaker's {shown}"))?;
    let mut state = State {
        config_map: format!("{}/{name}", controller.namespace),
        ..State::default()
    };
    let Some(stored) = stored else {
        let said = format!("the circuit breaker is closed: deletions go ({shown} does not exist)");
        return crate::output::say(args.output, &said, &state);
    };
    let mut data = stored.data.unwrap_or_default();
    state.tripped_at = data.remove(TRIPPED_AT);
    state.message = data.remove(MESSAGE);
    let tripped_at = state.tripped_at.clone().unwrap_or_else(|| "?".into());
    let sentence = match args.action {
        BreakerAction::Status => {
            state.open = true;
            let message = state.message.as_deref().unwrap_or("?");
            format!("the circuit breaker is open since {tripped_at}: {message}")
        }
        BreakerAction::Release => {
            api.delete(&name, &DeleteParams::default())
                .await
                .with_context(|| format!("releasing the circuit breaker: deleting {shown}"))?;
            state.released = true;
            format!(
                "released the circuit breaker (open since {tripped_at}): the controller resumes \
                 deleting, what it held first"
            )
        }
    };
    crate::output::say(args.output, &sentence, &state)
}

/// The breaker as `-o json|yaml` gives it.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct State {
    /// The ConfigMap that keeps it open while it exists.
    config_map: String,
    /// Whether deletions are stopped now.
    open: bool,
    /// Whether this run released it.
    released: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tripped_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PATH: &str =
        "/api/v1/namespaces/kube-retention/configmaps/kube-retention-controller-circuit-breaker";

    fn controller() -> ControllerLease {
        ControllerLease {
            namespace: "kube-retention".into(),
            name: "kube-retention-controller".into(),
        }
    }

    fn stored() -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "kube-retention-controller-circuit-breaker",
                            "namespace": "kube-retention"},
               "data": {"trippedAt": "2026-11-25T10:00:00Z", "message": "more than 200 deletions within 1m"}})
    }

    #[tokio::test]
    async fn release_deletes_the_configmap_it_read() {
        let (client, mut server) = kube_retention_apimock::pair();
        let args = BreakerArgs {
            action: BreakerAction::Release,
            output: crate::output::Format::Table,
        };
        let releasing = tokio::spawn(async move { run(client, &controller(), args).await });
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
        let args = BreakerArgs {
            action: BreakerAction::Release,
            output: crate::output::Format::Table,
        };
        let releasing = tokio::spawn(async move { run(client, &controller(), args).await });
        server.next().await.unwrap().refuse(404, "not found");
        releasing.await.unwrap().unwrap();
        assert!(server.quiet().await, "no DELETE of what is not there");

        let (client, mut server) = kube_retention_apimock::pair();
        let args = BreakerArgs {
            action: BreakerAction::Release,
            output: crate::output::Format::Table,
        };
        let releasing = tokio::spawn(async move { run(client, &controller(), args).await });
        server.next().await.unwrap().reply(200, &stored());
        let refusal = "configmaps is forbidden: User \"dev\" cannot delete resource \"configmaps\"";
        server.next().await.unwrap().refuse(403, refusal);
        let error = format!("{:#}", releasing.await.unwrap().unwrap_err());
        assert!(
            error.starts_with(
                "releasing the circuit breaker: deleting ConfigMap \
                 kube-retention/kube-retention-controller-circuit-breaker: "
            ),
            "{error}"
        );
        assert!(error.contains("cannot delete"), "{error}");
    }
}
