//! Start-up checks: which Kubernetes the API server runs, which watched kinds the cluster
//! serves, and whether this ServiceAccount may do everything the controller needs. Missing
//! permissions stop the controller with a list of what to grant, never a controller that
//! silently does nothing.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use kube_retention_runtime::discovery;

use kube_retention_common::kinds::{CONTROLLER_VERBS, KindId, Registry, Role};
use kube_retention_common::kubernetes::{self, Support};

use crate::{Error, Result};

/// The kinds to watch: served ones; an unserved optional kind is skipped with a note.
pub async fn served_kinds(client: &Client, kinds: &Registry) -> Result<Vec<KindId>> {
    let mut served = Vec::new();
    for (id, entry) in kinds.iter() {
        let resource = &entry.resource;
        // Any failure but "not served" is the API server unable to say, which must not pass for
        // "not served".
        let found = match discovery::served(client, &resource.api_version(), &resource.kind).await {
            Ok(served) => served.is_some_and(|served| served.resource.plural == resource.plural),
            Err(source) => {
                return Err(Error::Discovery {
                    api_version: resource.api_version(),
                    source,
                });
            }
        };
        match (found, entry.optional) {
            (true, _) => served.push(id),
            (false, true) => {
                tracing::info!(kind = %resource, version = %resource.version, "not served by this cluster; not watching it")
            }
            (false, false) => {
                return Err(Error::NotServed(format!(
                    "{} {}",
                    resource.api_version(),
                    resource.kind
                )));
            }
        }
    }
    Ok(served)
}

/// Where the circuit breakers keep their state: the namespace and names of their ConfigMaps,
/// the cluster's and the namespaces'.
#[derive(Debug, Clone, Copy)]
pub struct BreakerStore<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub namespaces_name: &'a str,
}

/// [`check_permissions`], retried every second while permissions are missing, for up to `grace`
/// (ClusterRole aggregation fills the controller's role moments after it is applied).
pub async fn await_permissions(
    client: &Client,
    kinds: &Registry,
    served: &[KindId],
    lease_namespace: Option<&str>,
    breaker: Option<BreakerStore<'_>>,
    grace: std::time::Duration,
) -> Result<()> {
    let started = tokio::time::Instant::now();
    loop {
        match check_permissions(client, kinds, served, lease_namespace, breaker).await {
            Err(Error::MissingPermissions(missing)) if started.elapsed() < grace => {
                tracing::info!(missing = %missing.join("; "), "waiting for RBAC permissions");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            done => return done,
        }
    }
}

/// One permission asked for: a verb on a resource, in a namespace (else all), on one object
/// by name (else any).
struct Needed {
    group: String,
    resource: String,
    verb: &'static str,
    namespace: Option<String>,
    name: Option<String>,
}

impl Needed {
    fn new(group: &str, resource: &str, verb: &'static str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
            verb,
            namespace: None,
            name: None,
        }
    }

    fn in_namespace(self, namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_owned()),
            ..self
        }
    }

    fn named(self, name: &str) -> Self {
        Self {
            name: Some(name.to_owned()),
            ..self
        }
    }

    /// As the errors name it: `delete jobs (batch) in all namespaces`.
    fn permission(&self) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let scope = self
            .namespace
            .as_ref()
            .map_or("all namespaces".to_owned(), |namespace| {
                format!("namespace {namespace}")
            });
        let named = self
            .name
            .as_ref()
            .map(|name| format!(" named {name}"))
            .unwrap_or_default();
        format!(
            "{} {} ({group}){named} in {scope}",
            self.verb, self.resource
        )
    }
}

/// Fails with every missing permission when the controller may not do its work.
pub async fn check_permissions(
    client: &Client,
    kinds: &Registry,
    served: &[KindId],
    lease_namespace: Option<&str>,
    breaker: Option<BreakerStore<'_>>,
) -> Result<()> {
    let mut needed: Vec<Needed> = Vec::new();
    for &id in served {
        let entry = kinds.get(id);
        let resource = &entry.resource;
        let verbs: &[&'static str] = match entry.role {
            Role::Run { .. } | Role::Object => &CONTROLLER_VERBS,
            Role::Parent => &["list", "watch"],
        };
        for verb in verbs {
            needed.push(Needed::new(&resource.group, &resource.plural, verb));
        }
    }
    needed.push(Needed::new("events.k8s.io", "events", "create"));
    if let Some(namespace) = lease_namespace {
        for verb in ["get", "create", "update"] {
            needed.push(Needed::new("coordination.k8s.io", "leases", verb).in_namespace(namespace));
        }
    }
    if let Some(store) = breaker {
        for name in [store.name, store.namespaces_name] {
            for verb in ["get", "list", "watch"] {
                let needs = Needed::new("", "configmaps", verb).in_namespace(store.namespace);
                needed.push(needs.named(name));
            }
        }
        let patch = Needed::new("", "configmaps", "patch").in_namespace(store.namespace);
        needed.push(patch.named(store.namespaces_name));
        needed.push(Needed::new("", "configmaps", "create").in_namespace(store.namespace));
    }
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut missing = Vec::new();
    for needs in needed {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(needs.group.clone()),
                    resource: Some(needs.resource.clone()),
                    verb: Some(needs.verb.to_owned()),
                    namespace: needs.namespace.clone(),
                    name: needs.name.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| Error::AccessReview {
                permission: needs.permission(),
                source,
            })?;
        if !answer.status.is_some_and(|status| status.allowed) {
            missing.push(needs.permission());
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::MissingPermissions(missing))
}

/// Says once, at start, which Kubernetes the API server runs, with a warning outside the
/// supported minors (`kube_retention_common::kubernetes`): what differs by minor and what the
/// controller does about each is in docs/compatibility.md. A server that does not answer
/// `/version` is said too, and is no reason to stop.
pub async fn say_kubernetes_version(client: &Client) -> Support {
    let info = match client.apiserver_version().await {
        Ok(info) => info,
        Err(error) => {
            tracing::warn!(%error, "could not read the API server's version (GET /version)");
            return Support::Unknown;
        }
    };
    let support = kubernetes::support(&info.major, &info.minor);
    let version = info.git_version.as_str();
    let supported = kubernetes::supported_range();
    match support {
        Support::Supported => tracing::info!(version, "API server: Kubernetes {version}"),
        Support::Older => tracing::warn!(
            version,
            "API server: Kubernetes {version}, older than kube-retention supports ({supported}): \
             APIs it uses may be missing (docs/compatibility.md)"
        ),
        Support::Newer => tracing::warn!(
            version,
            "API server: Kubernetes {version}, newer than kube-retention is tested on \
             ({supported}); expected to work (docs/compatibility.md)"
        ),
        Support::Unknown => tracing::warn!(
            version,
            major = info.major,
            minor = info.minor,
            "API server: a version kube-retention cannot place against {supported}"
        ),
    }
    support
}
