//! The webhook put together behind [`Args::run`]: the client, the kinds (`--disable-kind`), the
//! sink policy, the access and writer checks, the bounds on admission work, the TLS
//! configuration (clients verified with `--client-ca-file`) with its supervised reload
//! (`tls-reload`), the plain probes and metrics server (`--metrics-address`, supervised as
//! `metrics-server`), and the server within its connections' bounds until SIGTERM, draining
//! after the endpoints catch up.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube_retention_common::kinds::KindSelection;
use kube_retention_runtime::supervise::{self, Supervisor};

use crate::access::Reviews;
use crate::args::Args;
use crate::connections::Connections;
use crate::limits::Limits;
use crate::parents::ApiParents;
use crate::tls::{CertificateFiles, client_verifier, server_config};
use crate::{Context, Error, Result, router, server};

impl Args {
    /// What every admission is answered with, as these flags say, asking the API server
    /// through `client`: the webhook's own, and the campaign's in-process oracle
    /// (`tests/testsuite/campaign.rs`).
    pub fn context(&self, client: kube::Client) -> Result<Context> {
        let kinds = KindSelection {
            disabled_kinds: self.disabled_kinds.clone(),
            ..KindSelection::default()
        }
        .registry()?;
        let sink_policy = self.sink_policy.policy()?;
        let limits = Limits::new(self.admission_timeout.into(), self.max_admissions_in_flight)
            .decoding_at_most(self.max_decoded_bytes);
        let mut context = Context::new(Arc::new(ApiParents::new(client.clone())))
            .with_kinds(kinds)
            .with_sink_policy(sink_policy)
            .with_limits(limits, self.compile_limits())
            .with_memory(self.max_admission_memory);
        let reviews = Arc::new(Reviews::new(client, &self.controller_user));
        if !self.controller_user.is_empty() {
            context = context.with_access(reviews.clone());
        }
        if self.check_writers {
            context = context.with_writers(reviews, &self.controller_user);
        }
        Ok(context)
    }

    /// Serves admission until SIGTERM, or until the certificate's reload ends
    /// ([`Error::TaskEnded`]).
    pub async fn run(self) -> Result<()> {
        let args = self;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = kube_retention_runtime::client(args.kubeconfig.as_deref()).await?;
        let context = args.context(client)?;
        let context = Arc::new(context);
        let mut supervisor = Supervisor::default();
        let clients = args
            .client_ca_file
            .as_deref()
            .map(client_verifier)
            .transpose()?;
        let verifying = clients.is_some();
        let connection_bounds = args.connection_bounds();
        let (tls, reloading) = server_config(
            CertificateFiles {
                cert: args.tls_cert,
                key: args.tls_key,
            },
            args.cert_reload_interval,
            clients,
        )?;
        supervisor.add(reloading);
        if let Some(address) = args.metrics_address {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|source| Error::Bind {
                    what: "metrics",
                    address,
                    source,
                })?;
            tracing::info!(%address, "serving probes and metrics");
            let probes = router::probes(context.clone());
            let server = async move { axum::serve(listener, probes).await };
            supervisor.add(supervise::spawn("metrics-server", server));
        }
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|source| Error::Bind {
                what: "admission",
                address: args.listen,
                source,
            })?;
        let address = listener.local_addr().map_err(|source| Error::Bind {
            what: "admission",
            address: args.listen,
            source,
        })?;
        tracing::info!(%address, verifying_clients = verifying, "serving admission webhook");
        let router = router::router(context.clone(), args.max_body_bytes);
        let connections = Arc::new(Connections::new(connection_bounds, context.metrics.clone()));
        let shutdown = async move {
            kube_retention_runtime::shutdown_signal().await;
            context.draining.store(true, Ordering::Relaxed);
            tracing::info!(delay = ?args.shutdown_delay, "not ready; serving until the endpoints catch up");
            tokio::time::sleep(args.shutdown_delay).await;
            tracing::info!("draining in-flight requests");
        };
        supervisor
            .watch(server::serve(
                listener,
                tls,
                router,
                connections,
                args.max_streams_per_connection,
                shutdown,
            ))
            .await?
            .map_err(Error::Serve)?;
        tracing::info!("stopped");
        Ok(())
    }
}
