//! What a Cleaner may delete of a Helm release, a rule the webhook and the controller share.
//!
//! Helm's records are Secrets, so whoever may write Secrets in a namespace may forge a release
//! whose manifest lists anything, and a Cleaner with `helm.delete` would have the controller
//! delete it with its own power. Two rules keep that power to what Helm itself installed and
//! what the Cleaner's writer may delete:
//!
//! - **Ownership** ([`ownership`]): an object is deleted only when Helm's annotations give it to
//!   the release — [`RELEASE_NAME`] the release, [`RELEASE_NAMESPACE`] the Cleaner's namespace
//!   (Helm 3.2 and later write both on every object they install). A forger who may write
//!   Secrets but not the object cannot make it the release's.
//! - **The kinds** ([`UNINSTALLABLE_KINDS`]): a Cleaner uninstalls only objects of these kinds,
//!   and admission asks that its writer may delete every one of them in the namespace (one
//!   SubjectAccessReview a kind, cached). The list is what the default install lets the
//!   controller delete and a chart installs (`deploy/core/controller-rbac.yaml`, Secrets from
//!   `deploy/optional/cleaner-helm.yaml`; a test keeps it in step). It is a constant rather than
//!   the controller's RBAC read at admission because that RBAC grows by aggregation: an admin
//!   who lets the controller delete RoleBindings for annotated objects would otherwise let a
//!   forged record reach them too, unchecked for Cleaners admitted before; and reading it at
//!   run time would cost a discovery walk and one review per kind the cluster serves, each
//!   admission. A release holding another kind is refused whole, before anything is deleted:
//!   `helm uninstall` is for it.

use std::collections::BTreeMap;

use crate::kinds::group_of;

/// The annotation naming the release an object belongs to.
pub const RELEASE_NAME: &str = "meta.helm.sh/release-name";
/// The annotation naming the namespace of the release an object belongs to.
pub const RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";

/// A kind a Cleaner uninstalls from a Helm release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uninstallable {
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

const fn kind(group: &'static str, kind: &'static str, plural: &'static str) -> Uninstallable {
    Uninstallable {
        group,
        kind,
        plural,
    }
}

/// The kinds of a release a Cleaner deletes; see the module's documentation for why these.
pub const UNINSTALLABLE_KINDS: [Uninstallable; 13] = [
    kind("", "Secret", "secrets"),
    kind("", "ConfigMap", "configmaps"),
    kind("", "Service", "services"),
    kind("", "ServiceAccount", "serviceaccounts"),
    kind("", "PersistentVolumeClaim", "persistentvolumeclaims"),
    kind("", "Pod", "pods"),
    kind("apps", "Deployment", "deployments"),
    kind("apps", "StatefulSet", "statefulsets"),
    kind("apps", "DaemonSet", "daemonsets"),
    kind("apps", "ReplicaSet", "replicasets"),
    kind("batch", "Job", "jobs"),
    kind("batch", "CronJob", "cronjobs"),
    kind("networking.k8s.io", "Ingress", "ingresses"),
];

/// Whether a Cleaner uninstalls objects of `kind` of `api_version` (`apps/v1`, `v1`).
pub fn uninstallable(api_version: &str, kind: &str) -> bool {
    let group = group_of(api_version);
    UNINSTALLABLE_KINDS
        .iter()
        .any(|known| known.group == group && known.kind == kind)
}

/// Why Helm's annotations do not give an object to a release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOwned {
    #[error("it has no {annotation} annotation: Helm did not install it")]
    Unannotated { annotation: &'static str },
    #[error("its {annotation} is {found:?}, not {expected:?}: it is another release's")]
    Elsewhere {
        annotation: &'static str,
        found: String,
        expected: String,
    },
}

/// Whether `annotations` give their object to `release`, stored in `namespace`.
pub fn ownership(
    annotations: Option<&BTreeMap<String, String>>,
    release: &str,
    namespace: &str,
) -> Result<(), NotOwned> {
    for (annotation, expected) in [(RELEASE_NAME, release), (RELEASE_NAMESPACE, namespace)] {
        match annotations.and_then(|annotations| annotations.get(annotation)) {
            None => return Err(NotOwned::Unannotated { annotation }),
            Some(found) if found != expected => {
                return Err(NotOwned::Elsewhere {
                    annotation,
                    found: found.clone(),
                    expected: expected.to_owned(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}
