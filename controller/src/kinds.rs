//! The kinds this controller handles: `common`'s registry as the flags shape it (`--kind` adds
//! entries, `--disable-kind` takes built-in ones out), and each kind's kube [`ApiResource`].

use kube::api::{ApiResource, GroupVersionKind};
use kube_retention_common::kinds::{Entry, Registry, Resource};

use crate::{Error, Result};

pub fn api_resource(resource: &Resource) -> ApiResource {
    let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
    ApiResource::from_gvk_with_plural(&gvk, &resource.plural)
}

/// The built-in kinds without `disabled` (by `Kind.group` name, e.g. `Job.batch`), plus `extra`
/// (`--kind` specs).
pub fn registry(extra: &[String], disabled: &[String]) -> Result<Registry> {
    let mut registry = Registry::builtin().clone();
    for name in disabled {
        registry.remove(name).map_err(Error::DisableKind)?;
    }
    for spec in extra {
        let entry: Entry = spec.parse()?;
        registry.add(entry).map_err(|source| Error::DuplicateKind {
            spec: spec.clone(),
            source,
        })?;
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_add_and_remove_kinds() {
        let registry = registry(&["tekton.dev/v1/PipelineRun".into()], &["pod".into()])
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(registry.find("v1", "Pod").is_none());
        assert!(registry.find("batch/v1", "Job").is_some());
        assert!(registry.find("tekton.dev/v1", "PipelineRun").is_some());
        let duplicate = registry_error(&["batch/v1/Job".into()], &[]);
        assert_eq!(
            duplicate,
            "--kind \"batch/v1/Job\": Job.batch is already known to kube-retention"
        );
        let unknown = registry_error(&[], &["Gadget.example.com".into()]);
        assert_eq!(
            unknown,
            "--disable-kind: Gadget.example.com is not a kind kube-retention knows"
        );
    }

    fn registry_error(extra: &[String], disabled: &[String]) -> String {
        match registry(extra, disabled) {
            Ok(_) => panic!("accepted"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn names_api_resources() {
        let job = api_resource(&Resource::new("batch", "v1", "Job", "jobs"));
        assert_eq!(
            (job.api_version.as_str(), job.plural.as_str()),
            ("batch/v1", "jobs")
        );
        let pod = api_resource(&Resource::new("", "v1", "Pod", "pods"));
        assert_eq!(pod.api_version, "v1");
    }
}
