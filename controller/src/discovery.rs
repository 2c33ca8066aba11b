//! Annotated objects of any kind: every namespaced kind the cluster serves that the controller
//! may list, watch, patch and delete is watched through the `retention.dev/managed` label the
//! webhook puts on objects with retention settings. Discovery and the controller's own rules
//! (one SelfSubjectRulesReview) are read again periodically, so a new CRD or a newly aggregated
//! ClusterRole is picked up without a restart; a kind that lacks permissions is logged and
//! counted, never silently ignored.

use k8s_openapi::api::authorization::v1::{
    ResourceRule, SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
};
use kube::api::PostParams;
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};
use kube_retention_common::kinds::{CONTROLLER_VERBS as VERBS, Entry, Registry, Resource, Watch};
use kube_retention_runtime::supervise::{self, Supervised};

use crate::Result;

/// Kinds that are never watched this way: Events are written by the controller itself and
/// expire by the API server's own TTL.
const SKIPPED: [(&str, &str); 2] = [("", "events"), ("events.k8s.io", "events")];

/// A served kind the controller may not handle, and the verbs it lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpermitted {
    pub resource: Resource,
    pub missing: Vec<&'static str>,
}

/// The outcome of one scan.
#[derive(Debug, Default)]
pub struct Scan {
    /// Kinds to watch through the managed label, beyond those in the registry.
    pub watchable: Vec<Entry>,
    pub unpermitted: Vec<Unpermitted>,
    /// Every namespaced kind served with the verbs the controller needs, and its rules: what
    /// policies are checked against.
    pub served: Vec<Resource>,
    pub rules: Vec<ResourceRule>,
}

impl Scan {
    /// The served kind of `group` named `kind`.
    pub fn served(&self, group: &str, kind: &str) -> Option<&Resource> {
        self.served
            .iter()
            .find(|resource| resource.group == group && resource.kind == kind)
    }

    /// The verbs the controller lacks on `resource`.
    pub fn missing(&self, resource: &Resource) -> Vec<&'static str> {
        VERBS
            .into_iter()
            .filter(|verb| !allowed(&self.rules, &resource.group, &resource.plural, verb))
            .collect()
    }
}

/// Reads discovery and the controller's rules (as they apply in `namespace`).
pub async fn scan(client: &Client, known: &Registry, namespace: &str) -> Result<Scan> {
    let discovery = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => discovery,
        Err(_) => Discovery::new(client.clone()).run().await?,
    };
    let mut served = Vec::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            let usable = capabilities.scope == Scope::Namespaced
                && VERBS
                    .iter()
                    .all(|verb| capabilities.supports_operation(verb));
            if usable {
                served.push(Resource::new(
                    &resource.group,
                    &resource.version,
                    &resource.kind,
                    &resource.plural,
                ));
            }
        }
    }
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(namespace.to_owned()),
        },
        ..SelfSubjectRulesReview::default()
    };
    let reviews: Api<SelfSubjectRulesReview> = Api::all(client.clone());
    let rules = reviews
        .create(&PostParams::default(), &review)
        .await?
        .status
        .map(|status| status.resource_rules)
        .unwrap_or_default();
    let mut scan = judge(served.clone(), known, &rules);
    scan.served = served;
    scan.rules = rules;
    Ok(scan)
}

/// Splits served kinds not in `known` into those the controller may handle and the rest.
pub fn judge(served: Vec<Resource>, known: &Registry, rules: &[ResourceRule]) -> Scan {
    let mut scan = Scan::default();
    for resource in served {
        let skipped = SKIPPED
            .iter()
            .any(|&(group, plural)| resource.group == group && resource.plural == plural);
        if skipped
            || known
                .find_group_kind(&resource.group, &resource.kind)
                .is_some()
        {
            continue;
        }
        let missing: Vec<&'static str> = VERBS
            .into_iter()
            .filter(|verb| !allowed(rules, &resource.group, &resource.plural, verb))
            .collect();
        if missing.is_empty() {
            scan.watchable.push(Entry {
                watch: Watch::ManagedOnly,
                ..Entry::plain(resource)
            });
        } else {
            scan.unpermitted.push(Unpermitted { resource, missing });
        }
    }
    scan
}

/// Whether `rules` allow `verb` on every object of `group`/`plural` (rules limited to named
/// objects do not count).
pub fn allowed(rules: &[ResourceRule], group: &str, plural: &str, verb: &str) -> bool {
    let matches = |values: &Option<Vec<String>>, wanted: &str| {
        values
            .iter()
            .flatten()
            .any(|value| value == "*" || value == wanted)
    };
    rules.iter().any(|rule| {
        rule.resource_names.as_ref().is_none_or(Vec::is_empty)
            && rule.verbs.iter().any(|value| value == "*" || value == verb)
            && matches(&rule.api_groups, group)
            && matches(&rule.resources, plural)
    })
}

/// Scans every `interval` (never when zero) in the background, for kinds beyond `configured`:
/// the scans, and the task (`discovery`) for a supervisor, which ends once the scans are no
/// longer received.
pub fn spawn_scans(
    client: Client,
    configured: Registry,
    namespace: String,
    interval: std::time::Duration,
) -> (tokio::sync::mpsc::Receiver<Scan>, Option<Supervised>) {
    let (scans, received) = tokio::sync::mpsc::channel(1);
    if interval.is_zero() {
        return (received, None);
    }
    let task = supervise::spawn("discovery", async move {
        loop {
            match scan(&client, &configured, &namespace).await {
                Ok(scan) => {
                    if scans.send(scan).await.is_err() {
                        return;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "scanning for annotated kinds failed; retrying")
                }
            }
            tokio::time::sleep(interval).await;
        }
    });
    (received, Some(task))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> ResourceRule {
        let strings = |values: &[&str]| values.iter().map(|value| (*value).to_owned()).collect();
        ResourceRule {
            api_groups: Some(strings(groups)),
            resources: Some(strings(resources)),
            verbs: strings(verbs),
            resource_names: None,
        }
    }

    #[test]
    fn rules_allow_by_name_or_wildcard_but_not_for_named_objects_only() {
        let rules = [
            rule(&[""], &["configmaps"], &["list", "watch"]),
            rule(&["apps"], &["*"], &["*"]),
            ResourceRule {
                resource_names: Some(vec!["one".into()]),
                ..rule(&[""], &["secrets"], &["*"])
            },
        ];
        assert!(allowed(&rules, "", "configmaps", "watch"));
        assert!(!allowed(&rules, "", "configmaps", "delete"));
        assert!(allowed(&rules, "apps", "deployments", "delete"));
        assert!(!allowed(&rules, "", "secrets", "delete"));
        assert!(!allowed(&rules, "batch", "jobs", "list"));
    }

    #[test]
    fn served_kinds_split_into_watchable_and_missing_verbs() {
        let rules = [
            rule(
                &[""],
                &["configmaps"],
                &["list", "watch", "patch", "delete"],
            ),
            rule(&[""], &["secrets"], &["list", "watch"]),
        ];
        let served = vec![
            Resource::new("", "v1", "ConfigMap", "configmaps"),
            Resource::new("", "v1", "Secret", "secrets"),
            Resource::new("", "v1", "Event", "events"),
            Resource::new("batch", "v1", "Job", "jobs"),
        ];
        let scan = judge(served, Registry::builtin(), &rules);
        let watchable: Vec<String> = scan
            .watchable
            .iter()
            .map(|entry| entry.resource.to_string())
            .collect();
        assert_eq!(watchable, ["ConfigMap"]);
        assert_eq!(scan.watchable[0].watch, Watch::ManagedOnly);
        assert_eq!(
            scan.unpermitted,
            [Unpermitted {
                resource: Resource::new("", "v1", "Secret", "secrets"),
                missing: vec!["patch", "delete"],
            }]
        );
    }
}
