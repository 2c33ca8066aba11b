//! CloudEvents from the controller pod: a Cleaner delivers to an http sink and to an https sink
//! (test servers on the host, reached across the node's link). The https sink's certificate comes
//! from a test CA the chart is told to trust (`controller.sinkTrustedCAs`); the static image has
//! no CA certificates of its own, which once kept every sink, http included, from working.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube_retention_certs::CertificateAuthority;
use kube_retention_e2e::cluster::SHIPPED_NAMESPACE;
use kube_retention_e2e::node::HOST_SERVICE_IP;
use libtest_mimic::Trial;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

use crate::sink::{Sink, apply_announcing_cleaner};
use crate::support::{Env, TestNamespace};
use crate::workloads::eventually;

/// The ConfigMap the chart mounts for `controller.sinkTrustedCAs`.
const TRUSTED_CAS: &str = "sink-cas";

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "a_cleaner_in_the_controller_pod_delivers_its_cloudevent_over_http_and_https",
        http_and_https,
    )]
}

async fn http_and_https(ns: TestNamespace) -> Result<()> {
    let ca = CertificateAuthority::generate("shipped-sink-ca", time::Duration::days(1))?;
    let serving = ca.issue_serving(&[HOST_SERVICE_IP], time::Duration::days(1))?;
    let certificates = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())?;
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certificates, key)?;
    let http = Sink::start_on(HOST_SERVICE_IP, None).await?;
    let https = Sink::start_on(
        HOST_SERVICE_IP,
        Some(tokio_rustls::TlsAcceptor::from(Arc::new(tls))),
    )
    .await?;

    let config_maps: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    let trusted: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": TRUSTED_CAS},
        "data": {"ca.crt": ca.certified().cert_pem}
    }))?;
    config_maps.create(&PostParams::default(), &trusted).await?;
    let cluster = &ns.env.cluster;
    let chart = cluster.layout.repo_root.join("charts/kube-retention");
    let image = crate::shipped_image()?;
    let trust = format!("controller.sinkTrustedCAs.configMap={TRUSTED_CAS}");
    cluster.helm_install(&chart, &image, &["--set", &trust])?;

    let delivered = async {
        for (name, sink) in [("plain", &http), ("secure", &https)] {
            apply_announcing_cleaner(&ns, name, &sink.url).await?;
        }
        for (name, sink) in [("plain", &http), ("secure", &https)] {
            eventually(
                Duration::from_secs(30),
                &format!("{} receives the CloudEvent", sink.url),
                || async { Ok(!sink.received().is_empty()) },
            )
            .await?;
            let event = sink.received().remove(0);
            ensure!(
                event.headers.get("ce-type").map(String::as_str)
                    == Some("dev.retention.cleaner.deleted")
                    && event.body["deleted"] == json!([format!("ConfigMap/{name}")]),
                "{}: {event:?}",
                sink.url
            );
        }
        Ok(())
    }
    .await;
    // The chart's defaults again, for the tests after this one.
    cluster.helm_install(&chart, &image, &[])?;
    config_maps
        .delete(TRUSTED_CAS, &DeleteParams::default())
        .await?;
    delivered
}
