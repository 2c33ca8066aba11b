//! Pointing webhook configurations at a server: every webhook of a Mutating- or
//! ValidatingWebhookConfiguration gets the caBundle, and optionally a URL in place of its
//! Service (for a webhook that runs outside the cluster, like the local test cluster's).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

const WEBHOOK_CONFIGURATION_KINDS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Rewrites the webhook configurations in `manifests` (one object, or a `List` of them) and
/// returns how many webhooks it changed. With `url_base`, a webhook's Service becomes
/// `url_base` + the Service's path.
pub fn point_webhooks(manifests: &mut Value, ca_bundle_pem: &str, url_base: Option<&str>) -> usize {
    let ca_bundle = STANDARD.encode(ca_bundle_pem);
    let objects: Vec<&mut Value> = match manifests.get_mut("items").and_then(Value::as_array_mut) {
        Some(items) => items.iter_mut().collect(),
        None => vec![manifests],
    };
    let mut changed = 0;
    for object in objects {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !WEBHOOK_CONFIGURATION_KINDS.contains(&kind) {
            continue;
        }
        let Some(webhooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) else {
            continue;
        };
        for webhook in webhooks {
            let client_config = &mut webhook["clientConfig"];
            if let Some(base) = url_base {
                let path = client_config
                    .pointer("/service/path")
                    .and_then(Value::as_str)
                    .unwrap_or("/");
                *client_config = json!({ "url": format!("{}{path}", base.trim_end_matches('/')) });
            }
            client_config["caBundle"] = Value::String(ca_bundle.clone());
            changed += 1;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_ca_bundle_and_url_on_every_webhook() {
        let mut list = json!({"kind": "List", "items": [
            {"kind": "Namespace", "metadata": {"name": "x"}},
            {"kind": "ValidatingWebhookConfiguration", "webhooks": [
                {"name": "a", "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/validate"}}},
                {"name": "b", "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/validate"}}}]},
            {"kind": "MutatingWebhookConfiguration", "webhooks": [
                {"name": "c", "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/mutate"}}}]}]});
        let changed = point_webhooks(&mut list, "PEM", Some("https://127.0.0.1:8443/"));
        assert_eq!(changed, 3);
        assert_eq!(
            list["items"][2]["webhooks"][0]["clientConfig"],
            json!({"url": "https://127.0.0.1:8443/mutate", "caBundle": STANDARD.encode("PEM")})
        );
        assert_eq!(
            list["items"][0],
            json!({"kind": "Namespace", "metadata": {"name": "x"}})
        );
    }

    #[test]
    fn keeps_the_service_without_a_url() {
        let mut config = json!({"kind": "MutatingWebhookConfiguration", "webhooks": [
            {"name": "c", "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/mutate"}}}]});
        assert_eq!(point_webhooks(&mut config, "PEM", None), 1);
        assert_eq!(
            config["webhooks"][0]["clientConfig"]["service"]["name"],
            "s"
        );
        assert_eq!(
            config["webhooks"][0]["clientConfig"]["caBundle"],
            STANDARD.encode("PEM")
        );
    }
}
