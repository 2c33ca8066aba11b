//! How the plugin reaches the cluster: kubectl's own connection flags (`--kubeconfig`,
//! `--context`, `--cluster`, `--user`, `--as`, `--as-group`, `--request-timeout`), read as
//! kubectl reads them, so `kubectl retention` acts as the same user on the same cluster as the
//! `kubectl` beside it. kube's `Config` does the work; this only carries the flags to it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

#[derive(Debug, Default, clap::Args)]
pub struct Connection {
    /// Kubeconfig (default: $KUBECONFIG, then ~/.kube/config; in a pod, its service account).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig cluster to use (default: the context's).
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// The kubeconfig user to use (default: the context's).
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// Act as this user: the API server judges every request as theirs (impersonation, which
    /// your own user must be allowed).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Act as a member of this group too (repeat it for several; needs --as).
    #[arg(
        long = "as-group",
        global = true,
        value_name = "GROUP",
        requires = "as_user"
    )]
    pub as_groups: Vec<String>,
    /// How long to wait for each request to the API server: seconds (`30`) or a duration with
    /// its unit (`30s`, `1m`); 0 waits as long as it takes.
    #[arg(long, global = true, value_name = "DURATION", value_parser = request_timeout, default_value = "0")]
    pub request_timeout: RequestTimeout,
}

/// `--request-timeout`: none, or a limit on each request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestTimeout(pub Option<Duration>);

/// Reads `--request-timeout` as kubectl does: whole seconds, or a Go duration.
pub fn request_timeout(text: &str) -> Result<RequestTimeout, String> {
    let duration = match text.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => kube_retention_common::duration::parse(text).map_err(|error| {
            format!("{text:?} {error}, or whole seconds (30); 0 waits as long as it takes")
        })?,
    };
    Ok(RequestTimeout((!duration.is_zero()).then_some(duration)))
}

impl Connection {
    /// The client configuration these flags say.
    pub async fn config(&self) -> Result<Config> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        };
        let named =
            options.context.is_some() || options.cluster.is_some() || options.user.is_some();
        let mut config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
                Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("loading {}", path.display()))?
            }
            None if named => Config::from_kubeconfig(&options)
                .await
                .context("loading the kubeconfig ($KUBECONFIG, then ~/.kube/config)")?,
            None => Config::infer()
                .await
                .context("finding a kubeconfig or an in-cluster service account")?,
        };
        if let Some(user) = &self.as_user {
            config.auth_info.impersonate = Some(user.clone());
            config.auth_info.impersonate_groups =
                (!self.as_groups.is_empty()).then(|| self.as_groups.clone());
        }
        if let RequestTimeout(Some(timeout)) = self.request_timeout {
            config.connect_timeout = Some(timeout);
            config.read_timeout = Some(timeout);
            config.write_timeout = Some(timeout);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncurrent-context: one\n\
        clusters:\n- name: one\n  cluster: {server: 'https://one.example:6443'}\n\
        - name: two\n  cluster: {server: 'https://two.example:6443'}\n\
        users:\n- name: alice\n  user: {token: a}\n- name: bob\n  user: {token: b}\n\
        contexts:\n- name: one\n  context: {cluster: one, user: alice, namespace: team-a}\n\
        - name: two\n  context: {cluster: two, user: bob, namespace: team-b}\n";

    fn kubeconfig() -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), KUBECONFIG).unwrap();
        file
    }

    #[tokio::test]
    async fn a_context_picks_its_cluster_user_and_namespace() {
        let file = kubeconfig();
        let connection = |context: Option<&str>| Connection {
            kubeconfig: Some(file.path().to_owned()),
            context: context.map(str::to_owned),
            ..Connection::default()
        };
        let current = connection(None).config().await.unwrap();
        assert_eq!(current.cluster_url.host(), Some("one.example"));
        assert_eq!(current.default_namespace, "team-a");
        let two = connection(Some("two")).config().await.unwrap();
        assert_eq!(two.cluster_url.host(), Some("two.example"));
        assert_eq!(two.default_namespace, "team-b");
        let error = connection(Some("three")).config().await.unwrap_err();
        assert!(format!("{error:#}").contains("three"), "{error:#}");
    }

    #[tokio::test]
    async fn as_and_as_group_impersonate_and_a_timeout_bounds_each_request() {
        let file = kubeconfig();
        let connection = Connection {
            kubeconfig: Some(file.path().to_owned()),
            as_user: Some("jane".into()),
            as_groups: vec!["ops".into(), "dev".into()],
            request_timeout: request_timeout("5s").unwrap(),
            ..Connection::default()
        };
        let config = connection.config().await.unwrap();
        assert_eq!(config.auth_info.impersonate.as_deref(), Some("jane"));
        assert_eq!(
            config.auth_info.impersonate_groups,
            Some(vec!["ops".to_owned(), "dev".to_owned()])
        );
        let five = Some(Duration::from_secs(5));
        assert_eq!(
            (
                config.connect_timeout,
                config.read_timeout,
                config.write_timeout
            ),
            (five, five, five)
        );
    }

    #[test]
    fn request_timeouts_read_as_kubectl_reads_them() {
        assert_eq!(request_timeout("0"), Ok(RequestTimeout(None)));
        assert_eq!(request_timeout("0s"), Ok(RequestTimeout(None)));
        assert_eq!(
            request_timeout("30"),
            Ok(RequestTimeout(Some(Duration::from_secs(30))))
        );
        assert_eq!(
            request_timeout("1m30s"),
            Ok(RequestTimeout(Some(Duration::from_secs(90))))
        );
        let error = request_timeout("1d").unwrap_err();
        assert!(error.starts_with("\"1d\" is not a duration"), "{error}");
    }
}
