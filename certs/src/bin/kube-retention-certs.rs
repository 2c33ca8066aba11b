//! `kube-retention-certs`: the webhook's certificates in a real cluster, without cert-manager.
//!
//! `ensure` keeps a Secret holding a CA and a serving certificate for the webhook Service,
//! renews them before they expire, writes the caBundle into the webhook configurations, and
//! copies the certificate into `--out-dir` for the webhook to serve (it reloads changed files).
//! Run as a sidecar with `--watch`, every webhook replica keeps it current; concurrent writers
//! are settled by resourceVersion preconditions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_retention_certs::removal;
use kube_retention_certs::renewal::{self, Lifetimes, TLS_CERT, TLS_KEY};

#[derive(Parser)]
#[command(
    name = "kube-retention-certs",
    version,
    about = "Certificates for kube-retention's webhook"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make the Secret, the webhook configurations' caBundle and --out-dir current.
    Ensure(Ensure),
    /// Exit 0 once --out-dir holds a certificate and key (a startup probe).
    Ready {
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Unregister the webhook, then delete its certificate Secret (the chart's pre-delete hook):
    /// no write waits on a webhook that is going away.
    Remove(Remove),
}

/// Where the webhook's Secret and configurations are, and how to reach the cluster: the same
/// for `ensure` and `remove`.
#[derive(clap::Args)]
struct Installed {
    /// Namespace of the Secret and the Service.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-retention")]
    namespace: String,
    #[arg(long, default_value = "kube-retention-webhook-tls")]
    secret: String,
    /// Mutating and Validating WebhookConfigurations (same name): their caBundle (`ensure`), or
    /// deleted (`remove`).
    #[arg(long, default_value = "kube-retention")]
    webhook_configuration: String,
    /// Kubeconfig (default: in-cluster, then $KUBECONFIG).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

#[derive(clap::Args)]
struct Remove {
    #[command(flatten)]
    installed: Installed,
    /// Leave the certificate Secret alone (cert-manager's).
    #[arg(long)]
    keep_secret: bool,
}

#[derive(clap::Args)]
struct Ensure {
    #[command(flatten)]
    installed: Installed,
    /// The webhook Service the certificate is for.
    #[arg(long, default_value = "kube-retention-webhook")]
    service: String,
    /// Also write tls.crt and tls.key here, for the webhook to serve.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Keep running, checking this often.
    #[arg(long, value_parser = humantime::parse_duration)]
    watch: Option<Duration>,
    #[arg(long, default_value = "3650days", value_parser = humantime::parse_duration)]
    ca_validity: Duration,
    #[arg(long, default_value = "90days", value_parser = humantime::parse_duration)]
    validity: Duration,
    /// Renew a certificate once less than this is left.
    #[arg(long, default_value = "30days", value_parser = humantime::parse_duration)]
    renew_before: Duration,
}

#[tokio::main]
async fn main() -> ExitCode {
    kube_retention_runtime::init_logging(kube_retention_runtime::LogFormat::Json);
    let outcome = match Args::parse().command {
        Command::Ensure(ensure) => run(ensure).await,
        Command::Ready { out_dir } => ready(&out_dir),
        Command::Remove(remove) => unregister(remove).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = format!("{error:#}"), "kube-retention-certs failed");
            ExitCode::FAILURE
        }
    }
}

fn ready(out_dir: &Path) -> Result<()> {
    for file in [TLS_CERT, TLS_KEY] {
        let path = out_dir.join(file);
        if std::fs::metadata(&path).map(|meta| meta.len()).unwrap_or(0) == 0 {
            bail!("{} is not there yet", path.display());
        }
    }
    Ok(())
}

async fn unregister(args: Remove) -> Result<()> {
    let installed = &args.installed;
    let client = kube_retention_runtime::client(installed.kubeconfig.as_deref()).await?;
    let registration = removal::Registration {
        webhook_configuration: &installed.webhook_configuration,
        namespace: &installed.namespace,
        secret: (!args.keep_secret).then_some(installed.secret.as_str()),
    };
    let removed = removal::remove(&client, &registration).await?;
    tracing::info!(?removed, "removed the webhook's registration");
    Ok(())
}

async fn run(args: Ensure) -> Result<()> {
    let client = kube_retention_runtime::client(args.installed.kubeconfig.as_deref()).await?;
    loop {
        match ensure(&client, &args).await {
            Ok(()) => {}
            Err(error) if args.watch.is_some() => {
                tracing::error!(
                    error = format!("{error:#}"),
                    "certificate check failed; retrying"
                )
            }
            Err(error) => return Err(error),
        }
        match args.watch {
            Some(interval) => tokio::time::sleep(interval).await,
            None => return Ok(()),
        }
    }
}

fn lifetimes(args: &Ensure) -> Result<Lifetimes> {
    let convert =
        |duration: Duration| time::Duration::try_from(duration).context("duration out of range");
    Ok(Lifetimes {
        ca: convert(args.ca_validity)?,
        serving: convert(args.validity)?,
        renew_before: convert(args.renew_before)?,
    })
}

async fn ensure(client: &Client, args: &Ensure) -> Result<()> {
    let names = renewal::service_names(&args.service, &args.installed.namespace);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &args.installed.namespace);
    let mut attempts = 0;
    let data = loop {
        attempts += 1;
        let existing = secrets.get_opt(&args.installed.secret).await?;
        let current = existing.as_ref().map(secret_data).unwrap_or_default();
        let desired = renewal::desired(
            &current,
            &names,
            lifetimes(args)?,
            time::OffsetDateTime::now_utc(),
        )?;
        if desired == current {
            break desired;
        }
        let mut secret = existing.unwrap_or_else(|| Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(args.installed.secret.clone()),
                namespace: Some(args.installed.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/part-of".into(),
                    "kube-retention".into(),
                )])),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            ..Default::default()
        });
        secret.data = Some(
            desired
                .iter()
                .map(|(key, value)| (key.clone(), ByteString(value.clone().into_bytes())))
                .collect(),
        );
        // create fails if someone created it meanwhile; replace carries the resourceVersion we
        // read, so a concurrent renewal by another replica is never overwritten blindly.
        let written = match secret.metadata.resource_version {
            Some(_) => {
                secrets
                    .replace(&args.installed.secret, &PostParams::default(), &secret)
                    .await
            }
            None => secrets.create(&PostParams::default(), &secret).await,
        };
        match written {
            Ok(_) => {
                tracing::info!(secret = %args.installed.secret, "wrote renewed certificates");
                break desired;
            }
            Err(kube::Error::Api(status)) if status.code == 409 && attempts < 5 => continue,
            Err(error) => return Err(error.into()),
        }
    };
    // The caBundle first: a certificate from a new CA is served only once the API server has
    // been told to trust that CA. When the bundle has just changed, the files wait for the next
    // check, giving the API server's webhook configuration informers time to see it (the old
    // certificate stays valid: renewal comes well before expiry). Missing files are written at
    // once: nothing is served yet.
    let bundle = renewal::ca_bundle(&data);
    let name = &args.installed.webhook_configuration;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut bundle_changed = point_at_bundle(&mutating, name, &bundle).await?;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    bundle_changed |= point_at_bundle(&validating, name, &bundle).await?;
    if let Some(dir) = &args.out_dir {
        let serving = dir.join(TLS_CERT).exists() && dir.join(TLS_KEY).exists();
        if bundle_changed && serving && args.watch.is_some() {
            tracing::info!("caBundle changed: the new certificate is served from the next check");
            return Ok(());
        }
        write_if_changed(&dir.join(TLS_KEY), &data[TLS_KEY])?;
        write_if_changed(&dir.join(TLS_CERT), &data[TLS_CERT])?;
    }
    Ok(())
}

fn secret_data(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .iter()
        .flatten()
        .filter_map(|(key, value)| Some((key.clone(), String::from_utf8(value.0.clone()).ok()?)))
        .collect()
}

/// Writes `bundle` into every webhook of the configuration `name`, with the same
/// [`kube_retention_certs::point_webhooks`] the local cluster uses; a JSON patch of only what
/// differs, none when all is current. Answers whether it changed anything.
async fn point_at_bundle<K>(api: &Api<K>, name: &str, bundle: &str) -> Result<bool>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let current = serde_json::to_value(
        api.get(name)
            .await
            .with_context(|| format!("reading webhook configuration {name}"))?,
    )?;
    let mut wanted = current.clone();
    kube_retention_certs::point_webhooks(&mut wanted, bundle, None);
    let patch = json_patch::diff(&current, &wanted);
    if patch.0.is_empty() {
        return Ok(false);
    }
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await?;
    tracing::info!(%name, "wrote the caBundle");
    Ok(true)
}

/// Replaces `path` atomically (write, then rename) so the webhook never reads half a file.
fn write_if_changed(path: &Path, contents: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|current| current == contents) {
        return Ok(());
    }
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, contents)
        .with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, path)?;
    Ok(())
}
