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

use crate::args::{BreakerAction, BreakerArgs};
use crate::kinds::ControllerLease;

pub async fn run(client: Client, controller: &ControllerLease, args: BreakerArgs) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, &controller.namespace);
    let name = configmap_name(&controller.name);
    let shown = format!("ConfigMap {}/{name}", controller.namespace);
    let stored = api
        .get_opt(&name)
        .await
        .with_context(|| format!("reading the circuit breaker's {shown}"))?;
    let Some(stored) = stored else {
        println!("the circuit breaker is closed: deletions go ({shown} does not exist)");
        return Ok(());
    };
    let data = stored.data.unwrap_or_default();
    let said = |key: &str| data.get(key).cloned().unwrap_or_else(|| "?".into());
    match args.action {
        BreakerAction::Status => {
            println!(
                "the circuit breaker is open since {}: {}",
                said(TRIPPED_AT),
                said(MESSAGE)
            );
        }
        BreakerAction::Release => {
            api.delete(&name, &DeleteParams::default())
                .await
                .with_context(|| format!("releasing the circuit breaker: deleting {shown}"))?;
            println!(
                "released the circuit breaker (open since {}): the controller resumes deleting, \
                 what it held first",
                said(TRIPPED_AT)
            );
        }
    }
    Ok(())
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
        };
        let releasing = tokio::spawn(async move { run(client, &controller(), args).await });
        server.next().await.unwrap().refuse(404, "not found");
        releasing.await.unwrap().unwrap();
        assert!(server.quiet().await, "no DELETE of what is not there");

        let (client, mut server) = kube_retention_apimock::pair();
        let args = BreakerArgs {
            action: BreakerAction::Release,
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
