//! Uninstalling the webhook's registration before the webhook itself: the chart's pre-delete hook
//! runs `kube-retention-certs remove`, which deletes the Mutating- and
//! ValidatingWebhookConfiguration first, so that no write is refused (`failurePolicy: Fail`)
//! while Helm takes the webhook's Service and pods away, nor for good if the uninstall stops
//! halfway; then the certificate Secret, which holds the CA's key and which Helm does not own
//! (the sidecar wrote it). What is gone already is fine: the hook may run twice.

use anyhow::{Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// What to remove: the configurations' name, and the Secret (none where cert-manager owns it).
pub struct Registration<'a> {
    pub webhook_configuration: &'a str,
    pub namespace: &'a str,
    pub secret: Option<&'a str>,
}

/// Deletes the registration, the configurations first; answers what it deleted, as
/// `Kind namespace/name`, leaving out what was not there.
pub async fn remove(client: &Client, registration: &Registration<'_>) -> Result<Vec<String>> {
    let name = registration.webhook_configuration;
    let mut removed = Vec::new();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    removed.extend(delete(&validating, name, "").await?);
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    removed.extend(delete(&mutating, name, "").await?);
    if let Some(secret) = registration.secret {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), registration.namespace);
        removed.extend(delete(&secrets, secret, registration.namespace).await?);
    }
    Ok(removed)
}

/// Deletes `name`: `Some` of what was deleted, `None` where it was not there.
async fn delete<K>(api: &Api<K>, name: &str, namespace: &str) -> Result<Option<String>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let shown = format!("{} {namespace}/{name}", K::kind(&()));
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(Some(shown)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(error).with_context(|| format!("deleting {shown}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // fixtures

    use serde_json::json;

    use super::*;

    const VALIDATING: &str =
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kube-retention";
    const MUTATING: &str =
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kube-retention";
    const SECRET: &str = "/api/v1/namespaces/tools/secrets/kube-retention-webhook-tls";

    fn registration(secret: Option<&'static str>) -> Registration<'static> {
        Registration {
            webhook_configuration: "kube-retention",
            namespace: "tools",
            secret,
        }
    }

    fn status() -> serde_json::Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})
    }

    #[tokio::test]
    async fn the_configurations_go_first_then_the_secret_and_what_is_gone_is_fine() {
        let (client, mut server) = kube_retention_apimock::pair();
        let removing = tokio::spawn(async move {
            remove(&client, &registration(Some("kube-retention-webhook-tls"))).await
        });
        let first = server.next().await.unwrap();
        assert_eq!(first.line(), format!("DELETE {VALIDATING}"));
        first.reply(200, &status());
        let second = server.next().await.unwrap();
        assert_eq!(second.line(), format!("DELETE {MUTATING}"));
        second.refuse(404, "not found");
        let third = server.next().await.unwrap();
        assert_eq!(third.line(), format!("DELETE {SECRET}"));
        third.reply(200, &status());
        assert_eq!(
            removing.await.unwrap().unwrap(),
            [
                "ValidatingWebhookConfiguration /kube-retention",
                "Secret tools/kube-retention-webhook-tls"
            ]
        );
        assert!(server.quiet().await, "nothing else is sent");
    }

    #[tokio::test]
    async fn without_a_secret_only_the_configurations_and_a_refusal_names_what_failed() {
        let (client, mut server) = kube_retention_apimock::pair();
        let removing = tokio::spawn(async move { remove(&client, &registration(None)).await });
        server.next().await.unwrap().reply(200, &status());
        let refusal = "mutatingwebhookconfigurations.admissionregistration.k8s.io \"kube-retention\" \
                       is forbidden: cannot delete";
        server.next().await.unwrap().refuse(403, refusal);
        let error = format!("{:#}", removing.await.unwrap().unwrap_err());
        assert!(
            error.starts_with("deleting MutatingWebhookConfiguration /kube-retention: "),
            "{error}"
        );
        assert!(server.quiet().await, "no Secret is deleted after a refusal");
    }
}
