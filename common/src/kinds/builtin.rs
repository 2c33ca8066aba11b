//! The kinds kube-retention knows out of the box.

use super::{
    Entry, Fields, LimitFields, NameSource, ParentRef, Resource, Role, RunFields, TtlFields,
    TtlUnit, Watch,
};
use crate::limits::{HISTORY_LIMIT_RANGE, LIMIT_RANGE};
use crate::progress::FinishRule;

const SHIPWRIGHT: &str = "shipwright.io";
const OPENSHIFT_BUILD: &str = "build.openshift.io";

/// The label Shipwright puts on a BuildRun naming its Build.
pub const BUILD_NAME_LABEL: &str = "build.shipwright.io/name";
/// The annotation an OpenShift-style Build carries naming its BuildConfig.
pub const BUILD_CONFIG_ANNOTATION: &str = "openshift.io/build-config.name";

/// Shipwright's `retention` block of a Build, at `within`.
const fn shipwright_retention(within: &'static str) -> RunFields {
    RunFields {
        ttls: shipwright_ttls(within),
        limits: LimitFields {
            succeeded: "succeededLimit",
            failed: "failedLimit",
            range: LIMIT_RANGE,
        },
        owned_by_parent: Some("atBuildDeletion"),
    }
}

const fn shipwright_ttls(within: &'static str) -> TtlFields {
    TtlFields {
        within,
        succeeded: "ttlAfterSucceeded",
        failed: "ttlAfterFailed",
        unit: TtlUnit::Duration,
    }
}

const fn ttl_seconds(succeeded: &'static str, failed: &'static str) -> TtlFields {
    TtlFields {
        within: "spec",
        succeeded,
        failed,
        unit: TtlUnit::Seconds,
    }
}

pub(super) fn entries() -> Vec<Entry> {
    vec![
        Entry {
            resource: Resource::new(SHIPWRIGHT, "v1beta1", "Build", "builds"),
            role: Role::Parent,
            finish: FinishRule::NotARun,
            fields: Fields {
                runs: Some(shipwright_retention("spec.retention")),
                ..Fields::default()
            },
            watch: Watch::All,
            optional: true,
        },
        Entry {
            resource: Resource::new(SHIPWRIGHT, "v1beta1", "BuildRun", "buildruns"),
            role: Role::Run {
                // Shipwright labels its runs; spec.build.name covers runs it has not seen yet.
                parent: Some(ParentRef {
                    group: SHIPWRIGHT,
                    kind: "Build",
                    name: &[
                        NameSource::Label(BUILD_NAME_LABEL),
                        NameSource::Field("spec.build.name"),
                    ],
                }),
                limits: None,
            },
            finish: FinishRule::SucceededCondition { required: true },
            fields: Fields {
                own: Some(shipwright_ttls("spec.retention")),
                embedded: Some(shipwright_retention("spec.build.spec.retention")),
                snapshot: Some(shipwright_ttls("status.buildSpec.retention")),
                runs: None,
            },
            // Every BuildRun: limits count runs whatever their own settings.
            watch: Watch::All,
            optional: true,
        },
        Entry {
            resource: Resource::new(OPENSHIFT_BUILD, "v1", "BuildConfig", "buildconfigs"),
            role: Role::Parent,
            finish: FinishRule::NotARun,
            fields: Fields {
                runs: Some(RunFields {
                    ttls: ttl_seconds(
                        "defaultSuccessfulBuildTTLSeconds",
                        "defaultFailedBuildTTLSeconds",
                    ),
                    limits: LimitFields {
                        succeeded: "successfulBuildsHistoryLimit",
                        failed: "failedBuildsHistoryLimit",
                        range: HISTORY_LIMIT_RANGE,
                    },
                    owned_by_parent: None,
                }),
                ..Fields::default()
            },
            watch: Watch::All,
            optional: true,
        },
        Entry {
            resource: Resource::new(OPENSHIFT_BUILD, "v1", "Build", "builds"),
            role: Role::Run {
                parent: Some(ParentRef {
                    group: OPENSHIFT_BUILD,
                    kind: "BuildConfig",
                    name: &[NameSource::Annotation(BUILD_CONFIG_ANNOTATION)],
                }),
                limits: None,
            },
            finish: FinishRule::OpenShiftPhase,
            fields: Fields {
                own: Some(ttl_seconds(
                    "successfulBuildTTLSeconds",
                    "failedBuildTTLSeconds",
                )),
                ..Fields::default()
            },
            watch: Watch::All,
            optional: true,
        },
        Entry {
            finish: FinishRule::JobConditions,
            ..run(Resource::new("batch", "v1", "Job", "jobs"))
        },
        Entry {
            finish: FinishRule::PodPhase,
            ..run(Resource::new("", "v1", "Pod", "pods"))
        },
    ]
}

/// A run of a kind with no parent, watched through the managed label.
fn run(resource: Resource) -> Entry {
    Entry {
        resource,
        role: Role::Run {
            parent: None,
            limits: None,
        },
        finish: FinishRule::NotARun,
        fields: Fields::default(),
        watch: Watch::Managed,
        optional: false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Registry;

    #[test]
    fn runs_point_at_parents_in_the_table() {
        let registry = Registry::builtin();
        for (id, entry) in registry.iter() {
            if let Some(parent) = entry.parent() {
                let found = registry
                    .parent_of(id)
                    .unwrap_or_else(|| panic!("{}", parent.kind));
                assert_eq!(registry.get(found).role, super::Role::Parent);
                assert!(registry.get(found).fields.runs.is_some());
                assert!(registry.runs_of(found).any(|run| run == id));
            }
        }
    }

    #[test]
    fn finds_kinds_by_group_and_kind_in_any_version() {
        let registry = Registry::builtin();
        for (api_version, kind, found) in [
            (
                "shipwright.io/v1alpha1",
                "BuildRun",
                "BuildRun.shipwright.io",
            ),
            ("build.openshift.io/v1", "Build", "Build.build.openshift.io"),
            ("batch/v1", "Job", "Job.batch"),
            ("v1", "Pod", "Pod"),
        ] {
            let id = registry.find(api_version, kind).expect(found);
            assert_eq!(registry.get(id).resource.to_string(), found);
        }
        assert_eq!(registry.find("v1", "ConfigMap"), None);
        assert_eq!(registry.find("example.com/v1", "Pod"), None);
    }
}
