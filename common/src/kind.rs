//! The kinds kube-retention knows by name, and where their retention fields live.

use serde_json::Value;

/// A kind whose retention fields or finish rules kube-retention knows. Anything else is
/// [`Kind::Other`] and is governed by annotations alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `shipwright.io` Build: TTLs and limits for its BuildRuns.
    Build,
    /// `shipwright.io` BuildRun.
    BuildRun,
    /// `build.openshift.io/v1` Build.
    OpenShiftBuild,
    /// `build.openshift.io/v1` BuildConfig: default TTLs and history limits for its Builds.
    BuildConfig,
    /// `batch/v1` Job.
    Job,
    /// `v1` Pod.
    Pod,
    Other,
}

pub const SHIPWRIGHT_GROUP: &str = "shipwright.io";
pub const OPENSHIFT_BUILD_GROUP: &str = "build.openshift.io";

/// The label Shipwright puts on a BuildRun naming its Build.
pub const BUILD_NAME_LABEL: &str = "build.shipwright.io/name";
/// The annotation an OpenShift-style Build carries naming its BuildConfig.
pub const BUILD_CONFIG_ANNOTATION: &str = "openshift.io/build-config.name";

impl Kind {
    pub fn of(api_version: &str, kind: &str) -> Self {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        match (group, kind) {
            (SHIPWRIGHT_GROUP, "Build") => Self::Build,
            (SHIPWRIGHT_GROUP, "BuildRun") => Self::BuildRun,
            (OPENSHIFT_BUILD_GROUP, "Build") => Self::OpenShiftBuild,
            (OPENSHIFT_BUILD_GROUP, "BuildConfig") => Self::BuildConfig,
            ("batch", "Job") => Self::Job,
            ("", "Pod") => Self::Pod,
            _ => Self::Other,
        }
    }

    /// The kind of a JSON object from its `apiVersion` and `kind`.
    pub fn of_object(object: &Value) -> Self {
        let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
        Self::of(text("apiVersion"), text("kind"))
    }
}

/// Looks up a dotted path (`spec.retention.ttlAfterFailed`) in a JSON object.
pub fn field<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(object, |value, key| value.get(key))
        .filter(|value| !value.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn knows_kinds_by_group_and_kind() {
        assert_eq!(Kind::of("shipwright.io/v1beta1", "Build"), Kind::Build);
        assert_eq!(
            Kind::of("shipwright.io/v1alpha1", "BuildRun"),
            Kind::BuildRun
        );
        assert_eq!(
            Kind::of("build.openshift.io/v1", "Build"),
            Kind::OpenShiftBuild
        );
        assert_eq!(
            Kind::of("build.openshift.io/v1", "BuildConfig"),
            Kind::BuildConfig
        );
        assert_eq!(Kind::of("batch/v1", "Job"), Kind::Job);
        assert_eq!(Kind::of("v1", "Pod"), Kind::Pod);
        assert_eq!(Kind::of("v1", "ConfigMap"), Kind::Other);
        assert_eq!(Kind::of("example.com/v1", "Pod"), Kind::Other);
    }

    #[test]
    fn finds_dotted_fields_and_treats_null_as_absent() {
        let object = json!({"spec": {"retention": {"ttlAfterFailed": "1h", "failedLimit": null}}});
        assert_eq!(
            field(&object, "spec.retention.ttlAfterFailed"),
            Some(&json!("1h"))
        );
        assert_eq!(field(&object, "spec.retention.failedLimit"), None);
        assert_eq!(field(&object, "spec.nothing.here"), None);
    }
}
