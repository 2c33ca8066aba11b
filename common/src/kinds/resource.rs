//! Where a kind is served, and the names `kubectl` and `apiVersion` give it.

use std::fmt;

use kube::core::{ApiResource, GroupVersionKind};

/// Where a kind is served: `group` is empty for the core group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
}

impl Resource {
    pub fn new(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The kube [`ApiResource`] for requests to this kind: the one conversion, for the
    /// controller's watches and deletions, the webhook's parent lookups and the plugin.
    pub fn api_resource(&self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(&self.group, &self.version, &self.kind);
        ApiResource::from_gvk_with_plural(&gvk, &self.plural)
    }

    /// Whether `api_version` and `kind` name this resource (in any version).
    pub fn is(&self, api_version: &str, kind: &str) -> bool {
        kind == self.kind && group_of(api_version) == self.group
    }
}

impl From<&ApiResource> for Resource {
    /// A kind as discovery or kube names it.
    fn from(resource: &ApiResource) -> Self {
        Self::new(
            &resource.group,
            &resource.version,
            &resource.kind,
            &resource.plural,
        )
    }
}

impl fmt::Display for Resource {
    /// `Job.batch`, `Pod` — the unambiguous short form `kubectl` uses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&qualified(&self.kind, &self.group))
    }
}

/// A kind or resource name with its group, as `kubectl` writes it: `Job.batch`, `jobs.batch`,
/// and the bare name for the core group (`Pod`, `pods`).
pub fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_owned()
    } else {
        format!("{name}.{group}")
    }
}

/// The group of an `apiVersion` (`batch/v1` → `batch`, `v1` → ``).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}
