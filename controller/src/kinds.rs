//! The kinds the controller watches: which are runs (deleted when they expire or exceed a
//! limit), which are parents (they set limits for their runs), how a run names its parent, and
//! which server-side label selector keeps the watch small.

use kube::api::{ApiResource, GroupVersionKind};
use kube_retention_common::annotations::MANAGED_SELECTOR;
use kube_retention_common::kind::{BUILD_CONFIG_ANNOTATION, BUILD_NAME_LABEL};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Deleted when expired or over a limit.
    Run {
        /// How a run names its parent, for limits.
        grouping: Option<Grouping>,
    },
    /// Sets limits for its runs (Shipwright Build, BuildConfig).
    Parent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grouping {
    /// The parent's name is in this label (else in the dotted `fallback` field); limits come
    /// from the parent kind at `parent`.
    Label {
        key: String,
        fallback: Option<&'static str>,
        parent: usize,
    },
    /// The parent's name is in this annotation.
    Annotation { key: String, parent: usize },
    /// Limits configured on the command line, per value of this label.
    FixedLimits {
        label: String,
        succeeded: Option<u32>,
        failed: Option<u32>,
    },
}

#[derive(Debug, Clone)]
pub struct WatchedKind {
    pub resource: ApiResource,
    pub role: Role,
    /// Server-side label selector for the watch; `None` watches every object of the kind.
    pub selector: Option<String>,
    /// Part of the default set: skipped with a note when the cluster does not serve it.
    pub optional: bool,
}

impl WatchedKind {
    /// Watched only where the webhook labelled objects: unlabelled ones need finding too.
    pub fn selects_managed_label(&self) -> bool {
        self.selector.as_deref() == Some(MANAGED_SELECTOR)
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Shipwright Builds and BuildRuns, OpenShift-style BuildConfigs and Builds, and Jobs and Pods
/// the webhook labelled. Indexes matter: runs refer to their parent kind by index.
pub fn defaults() -> Vec<WatchedKind> {
    vec![
        WatchedKind {
            resource: resource("shipwright.io", "v1beta1", "Build", "builds"),
            role: Role::Parent,
            selector: None,
            optional: true,
        },
        WatchedKind {
            resource: resource("shipwright.io", "v1beta1", "BuildRun", "buildruns"),
            role: Role::Run {
                // Shipwright labels its runs; spec.build.name covers runs it has not seen yet.
                grouping: Some(Grouping::Label {
                    key: BUILD_NAME_LABEL.into(),
                    fallback: Some("spec.build.name"),
                    parent: 0,
                }),
            },
            // Every BuildRun: limits count runs whatever their own settings.
            selector: None,
            optional: true,
        },
        WatchedKind {
            resource: resource("build.openshift.io", "v1", "BuildConfig", "buildconfigs"),
            role: Role::Parent,
            selector: None,
            optional: true,
        },
        WatchedKind {
            resource: resource("build.openshift.io", "v1", "Build", "builds"),
            role: Role::Run {
                grouping: Some(Grouping::Annotation {
                    key: BUILD_CONFIG_ANNOTATION.into(),
                    parent: 2,
                }),
            },
            selector: None,
            optional: true,
        },
        WatchedKind {
            resource: resource("batch", "v1", "Job", "jobs"),
            role: Role::Run { grouping: None },
            selector: Some(MANAGED_SELECTOR.into()),
            optional: false,
        },
        WatchedKind {
            resource: resource("", "v1", "Pod", "pods"),
            role: Role::Run { grouping: None },
            selector: Some(MANAGED_SELECTOR.into()),
            optional: false,
        },
    ]
}

/// Parses `--kind GROUP/VERSION/KIND[/PLURAL][:LABEL=SUCCEEDED,FAILED]`, e.g.
/// `tekton.dev/v1/PipelineRun:tekton.dev/pipeline=5,3` (core kinds: `/v1/ConfigMap`).
pub fn parse_extra(spec: &str) -> Result<WatchedKind, String> {
    let usage = "expected GROUP/VERSION/KIND[/PLURAL][:LABEL=SUCCEEDED,FAILED], e.g. tekton.dev/v1/TaskRun:tekton.dev/task=5,3";
    let (gvk, grouping) = match spec.split_once(':') {
        Some((gvk, grouping)) => (gvk, Some(grouping)),
        None => (spec, None),
    };
    let parts: Vec<&str> = gvk.split('/').collect();
    let (group, version, kind, plural) = match parts.as_slice() {
        [group, version, kind] => (
            *group,
            *version,
            *kind,
            format!("{}s", kind.to_ascii_lowercase()),
        ),
        [group, version, kind, plural] => (*group, *version, *kind, (*plural).to_owned()),
        _ => return Err(format!("{spec:?}: {usage}")),
    };
    if version.is_empty() || kind.is_empty() {
        return Err(format!("{spec:?}: {usage}"));
    }
    let grouping = grouping
        .map(|grouping| {
            let (label, limits) = grouping
                .split_once('=')
                .ok_or_else(|| format!("{spec:?}: {usage}"))?;
            let (succeeded, failed) = limits
                .split_once(',')
                .ok_or_else(|| format!("{spec:?}: {usage}"))?;
            let limit = |text: &str| -> Result<Option<u32>, String> {
                if text.is_empty() {
                    return Ok(None);
                }
                match text.parse::<u32>() {
                    Ok(limit @ 1..=100) => Ok(Some(limit)),
                    _ => Err(format!(
                        "{spec:?}: limit {text:?} must be a whole number from 1 to 100"
                    )),
                }
            };
            Ok::<_, String>(Grouping::FixedLimits {
                label: label.to_owned(),
                succeeded: limit(succeeded)?,
                failed: limit(failed)?,
            })
        })
        .transpose()?;
    let selector = match &grouping {
        Some(Grouping::FixedLimits { label, .. }) => Some(label.clone()),
        _ => Some(MANAGED_SELECTOR.to_owned()),
    };
    Ok(WatchedKind {
        resource: resource(group, version, kind, &plural),
        role: Role::Run { grouping },
        selector,
        optional: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_point_runs_at_their_parents() {
        let kinds = defaults();
        for kind in &kinds {
            if let Role::Run {
                grouping: Some(Grouping::Label { parent, .. } | Grouping::Annotation { parent, .. }),
            } = &kind.role
            {
                assert_eq!(kinds[*parent].role, Role::Parent, "{}", kind.resource.kind);
            }
        }
    }

    #[test]
    fn parses_extra_kinds() {
        let plain = parse_extra("/v1/ConfigMap").unwrap();
        assert_eq!(
            (
                plain.resource.api_version.as_str(),
                plain.resource.plural.as_str()
            ),
            ("v1", "configmaps")
        );
        assert_eq!(plain.selector.as_deref(), Some(MANAGED_SELECTOR));
        let grouped = parse_extra("tekton.dev/v1/PipelineRun:tekton.dev/pipeline=5,").unwrap();
        assert_eq!(grouped.resource.api_version, "tekton.dev/v1");
        assert_eq!(
            grouped.role,
            Role::Run {
                grouping: Some(Grouping::FixedLimits {
                    label: "tekton.dev/pipeline".into(),
                    succeeded: Some(5),
                    failed: None
                })
            }
        );
        assert_eq!(grouped.selector.as_deref(), Some("tekton.dev/pipeline"));
        for bad in [
            "ConfigMap",
            "a/b",
            "x/v1/K:label=101,1",
            "x/v1/K:label",
            "x/v1/K:label=a,b",
        ] {
            assert!(parse_extra(bad).is_err(), "{bad}");
        }
    }
}
