//! What every end-to-end test shares: the private cluster, a kube client, a tokio runtime, and
//! a temporary namespace per test that is deleted afterwards.

use std::future::Future;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use kube_retention_e2e::components::{self, CONTROLLER};
use kube_retention_e2e::{Layout, LocalCluster, Outcome};
use libtest_mimic::{Failed, Trial};

pub struct EnvInner {
    pub cluster: LocalCluster,
    pub client: Client,
    pub runtime: tokio::runtime::Runtime,
    _state: tempfile::TempDir,
}

/// The shared test environment; cheap to clone into each test.
#[derive(Clone)]
pub struct Env(Arc<EnvInner>);

impl std::ops::Deref for Env {
    type Target = EnvInner;
    fn deref(&self) -> &EnvInner {
        &self.0
    }
}

impl Env {
    /// A private cluster with kube-retention as host processes.
    pub fn start() -> Result<Self> {
        Self::start_with(LocalCluster::up)
    }

    /// A private cluster started by `up` in a fresh state folder (the as-shipped suite's has a
    /// node and the chart).
    pub fn start_with(up: impl FnOnce(Layout) -> Result<(LocalCluster, Outcome)>) -> Result<Self> {
        let state = tempfile::Builder::new()
            .prefix("kube-retention-e2e-")
            .tempdir()?;
        let layout = Layout::new(state.path())?;
        let (cluster, outcome) = up(layout)?;
        anyhow::ensure!(
            outcome == Outcome::Started,
            "a fresh state folder starts a cluster"
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let client = runtime.block_on(client_for(&cluster.layout.kubeconfig()))?;
        Ok(Self(Arc::new(EnvInner {
            cluster,
            client,
            runtime,
            _state: state,
        })))
    }

    /// Copies the processes' logs (the control plane's, kube-retention's) out of the temporary
    /// state folder into [`Layout::kept_logs`] of `suite`, replacing an earlier run's, and
    /// says where, or why not: a failure whose cause is in a log outlives the run.
    pub fn keep_logs(&self, suite: &str) {
        match self.cluster.layout.keep_logs(suite) {
            Ok(kept) => println!("the logs of this run's processes: {}", kept.display()),
            Err(error) => eprintln!("keeping the logs of this run's processes: {error:#}"),
        }
    }

    pub fn stop(&self) {
        if let Err(error) = LocalCluster::down(&self.cluster.layout) {
            eprintln!("stopping the local cluster: {error:#}");
        }
    }

    /// A test named `name` that runs `body` in a fresh namespace, deleted when it ends.
    pub fn trial<F, Fut>(&self, name: &str, body: F) -> Trial
    where
        F: FnOnce(TestNamespace) -> Fut + Send + 'static,
        Fut: Future<Output = Result<()>>,
    {
        let env = self.clone();
        let test_name = name.to_owned();
        Trial::test(name, move || {
            env.runtime
                .block_on(async {
                    let namespace = TestNamespace::create(&env, &test_name).await?;
                    let outcome = body(namespace.clone()).await;
                    namespace.delete().await;
                    outcome
                })
                .map_err(|error| {
                    let message = format!("{error:#}");
                    if let Ok(mut failures) = FAILURES.lock() {
                        failures.push((test_name.clone(), message.clone()));
                    }
                    Failed::from(message)
                })
        })
    }

    pub fn kubectl(&self) -> Command {
        self.cluster.kubectl()
    }
}

pub async fn client_for(kubeconfig: &std::path::Path) -> Result<Client> {
    Ok(Client::try_from(config_for(kubeconfig).await?)?)
}

async fn config_for(kubeconfig: &std::path::Path) -> Result<Config> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    Ok(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
}

impl Env {
    /// A client that takes every refusal as it comes: kube's default client retries 429, 503
    /// and 504 answers by itself (honouring `Retry-After`, up to 15 times), as a tenant
    /// flooding the webhook would not, and a test counting refusals must not.
    pub async fn impatient_client(&self) -> Result<Client> {
        let mut config = config_for(&self.cluster.layout.kubeconfig()).await?;
        config.default_retry = false;
        Ok(Client::try_from(config)?)
    }

    /// A client acting as `user` (impersonated by the admin, as kubectl `--as` does), a user
    /// that exists only as RBAC subjects; it takes every refusal as it comes.
    pub async fn client_as(&self, user: &str) -> Result<Client> {
        let mut config = config_for(&self.cluster.layout.kubeconfig()).await?;
        config.auth_info.impersonate = Some(user.to_owned());
        config.default_retry = false;
        Ok(Client::try_from(config)?)
    }
}

/// The trials that failed and why, said again after the reports: a CI log that keeps only its
/// end keeps them.
static FAILURES: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Prints each failed trial's name and error, at most 4,000 characters of it.
pub fn print_failures() {
    let failures = FAILURES.lock().map(|f| f.clone()).unwrap_or_default();
    for (name, message) in failures {
        let end = message
            .char_indices()
            .nth(4_000)
            .map_or(message.len(), |(at, _)| at);
        println!("failed: {name}: {}", &message[..end]);
    }
}

/// A namespace of one test's own.
#[derive(Clone)]
pub struct TestNamespace {
    pub name: String,
    pub env: Env,
}

impl TestNamespace {
    /// A namespace named after `test_name`, with a random suffix.
    pub async fn create(env: &Env, test_name: &str) -> Result<Self> {
        let slug: String = test_name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let name = format!("e2e-{}-{:04x}", slug.trim_matches('-'), rand_suffix());
        let namespaces: Api<Namespace> = Api::all(env.client.clone());
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(name.clone());
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
        // Pods can only be created once the service-account controller made `default`.
        let service_accounts: Api<ServiceAccount> = Api::namespaced(env.client.clone(), &name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while service_accounts.get_opt("default").await?.is_none() {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "no default ServiceAccount in {name}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Self {
            name,
            env: env.clone(),
        })
    }

    pub async fn delete(&self) {
        let namespaces: Api<Namespace> = Api::all(self.env.client.clone());
        namespaces
            .delete(&self.name, &DeleteParams::background())
            .await
            .ok();
    }

    /// The namespaced API of a custom resource kind, e.g. Shipwright's BuildRuns.
    pub fn dynamic(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.env.client.clone(), &self.name, resource)
    }

    /// `kubectl` as admin, in this namespace.
    pub fn kubectl(&self) -> Command {
        let mut command = self.env.kubectl();
        command.arg("--namespace").arg(&self.name);
        command
    }
}

pub fn shipwright(kind: &str) -> ApiResource {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("shipwright.io", "v1beta1", kind),
        &plural,
    )
}

pub fn openshift(kind: &str) -> ApiResource {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("build.openshift.io", "v1", kind),
        &plural,
    )
}

/// Parses a JSON fixture into an object of `resource`'s kind.
pub fn object(resource: &ApiResource, value: serde_json::Value) -> Result<DynamicObject> {
    let mut object: DynamicObject =
        serde_json::from_value(value).context("fixture is an object")?;
    object.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    Ok(object)
}

fn rand_suffix() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    (RandomState::new().hash_one(std::time::SystemTime::now()) & 0xffff) as u16
}

/// Restarts the shared controller with `flags` (none: as the suite runs it) and waits until it
/// is ready, for the disruptive trials that need it otherwise.
/// Waits (at most 5 s) until 127.0.0.1:`port` can be listened on again: the controller killed
/// before it let go of its metrics port, whose next start would otherwise fail to bind it
/// (found in `make test`: the next controller exited, "Address already in use").
fn port_free(port: u16) -> Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(_) => return Ok(()),
            Err(error) if std::time::Instant::now() > deadline => {
                return Err(error).with_context(|| {
                    format!("127.0.0.1:{port} still taken 5 s after the controller was killed")
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

pub fn restart_controller(cluster: &LocalCluster, flags: &[String]) -> Result<()> {
    let state_dir = &cluster.layout.state_dir;
    if let Some(controller) = kube_retention_e2e::process::tracked(state_dir, &[CONTROLLER]).pop() {
        controller.kill()?;
    }
    port_free(cluster.controller_port)?;
    components::start_controller(cluster, CONTROLLER, cluster.controller_port, flags)?;
    components::wait_for_controller(cluster, cluster.controller_port, Duration::from_secs(30))
}
