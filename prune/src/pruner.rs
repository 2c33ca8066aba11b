//! The pruner against a cluster: lists the targets (kinds, namespaces, label selectors), plans,
//! and deletes what the plan prunes with uid preconditions — an object replaced by a namesake
//! since the list is left alone.

use jiff::Timestamp;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Preconditions, PropagationPolicy,
};

use crate::error::{Error, Result};
use crate::plan::{HookFn, Plan, Settings, Veto, plan};
use crate::rules::FinishRules;
use crate::strategy::Strategy;

/// Objects of one kind: in some namespaces (all when none are named), matching a label selector.
#[derive(Debug, Clone)]
pub struct Target {
    pub resource: ApiResource,
    pub namespaces: Vec<String>,
    pub selector: Option<String>,
}

impl Target {
    pub fn new(resource: ApiResource) -> Self {
        Self {
            resource,
            namespaces: Vec::new(),
            selector: None,
        }
    }

    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespaces.push(namespace.into());
        self
    }

    /// A label selector, e.g. `app=nightly,tier!=prod`.
    pub fn selector(mut self, selector: impl Into<String>) -> Self {
        self.selector = Some(selector.into());
        self
    }
}

/// What a prune did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Pruned {
    pub plan: Plan,
    /// `namespace/name` of each object deleted.
    pub deleted: Vec<String>,
    /// Planned, but gone or replaced by a namesake by the time of the DELETE.
    pub skipped: Vec<String>,
}

/// Prunes finished objects of the targets by the strategies.
#[derive(Clone)]
pub struct Pruner {
    client: Client,
    targets: Vec<Target>,
    settings: Settings,
    propagation: PropagationPolicy,
}

impl Pruner {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            targets: Vec::new(),
            settings: Settings::default(),
            propagation: PropagationPolicy::Background,
        }
    }

    pub fn target(mut self, target: Target) -> Self {
        self.targets.push(target);
        self
    }

    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.settings.strategies.push(strategy);
        self
    }

    /// Replaces the finish rules (start from [`FinishRules::default`] to keep the built-in ones).
    pub fn rules(mut self, rules: FinishRules) -> Self {
        self.settings.rules = rules;
        self
    }

    /// Called for each object about to be pruned; an `Err` keeps it.
    pub fn before_delete(
        mut self,
        hook: impl Fn(&DynamicObject) -> Result<(), Veto> + Send + Sync + 'static,
    ) -> Self {
        let hook: HookFn = std::sync::Arc::new(hook);
        self.settings.hook = Some(hook);
        self
    }

    pub fn propagation(mut self, propagation: PropagationPolicy) -> Self {
        self.propagation = propagation;
        self
    }

    /// Lists the targets and plans; deletes nothing.
    pub async fn plan(&self) -> Result<Plan> {
        let objects = self.list().await?;
        Ok(plan(&objects, &self.settings, Timestamp::now()))
    }

    /// Plans and deletes what the plan prunes.
    pub async fn prune(&self) -> Result<Pruned> {
        if self.settings.strategies.is_empty() {
            return Err(Error::NoStrategy);
        }
        let objects = self.list().await?;
        let plan = plan(&objects, &self.settings, Timestamp::now());
        let mut pruned = Pruned::default();
        for planned in plan.to_prune() {
            let object = objects
                .iter()
                .find(|object| object.metadata.uid.as_deref() == Some(planned.uid.as_str()));
            let Some(resource) = object.and_then(|object| self.resource_of(object)) else {
                continue;
            };
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &planned.namespace, resource);
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(planned.uid.clone()),
                    resource_version: None,
                }),
                propagation_policy: Some(self.propagation.clone()),
                ..DeleteParams::default()
            };
            let name = format!("{}/{}", planned.namespace, planned.name);
            match api.delete(&planned.name, &params).await {
                Ok(_) => pruned.deleted.push(name),
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                    pruned.skipped.push(name)
                }
                Err(source) => {
                    return Err(Error::Delete {
                        kind: planned.kind.clone(),
                        object: name,
                        source,
                    });
                }
            }
        }
        pruned.plan = plan;
        Ok(pruned)
    }

    fn resource_of(&self, object: &DynamicObject) -> Option<&ApiResource> {
        let types = object.types.as_ref()?;
        self.targets
            .iter()
            .map(|target| &target.resource)
            .find(|resource| {
                resource.api_version == types.api_version && resource.kind == types.kind
            })
    }

    async fn list(&self) -> Result<Vec<DynamicObject>> {
        let mut objects = Vec::new();
        for target in &self.targets {
            let mut params = ListParams::default();
            if let Some(selector) = &target.selector {
                params = params.labels(selector);
            }
            let apis: Vec<Api<DynamicObject>> = if target.namespaces.is_empty() {
                vec![Api::all_with(self.client.clone(), &target.resource)]
            } else {
                target
                    .namespaces
                    .iter()
                    .map(|namespace| {
                        Api::namespaced_with(self.client.clone(), namespace, &target.resource)
                    })
                    .collect()
            };
            for api in apis {
                let listed = api.list(&params).await.map_err(|source| Error::List {
                    kind: target.resource.kind.clone(),
                    source,
                })?;
                objects.extend(listed.items.into_iter().map(|mut object| {
                    object.types.get_or_insert_with(|| kube::api::TypeMeta {
                        api_version: target.resource.api_version.clone(),
                        kind: target.resource.kind.clone(),
                    });
                    object
                }));
            }
        }
        Ok(objects)
    }
}
