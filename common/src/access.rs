//! A SubjectAccessReview as kube-retention asks it: who ([`Subject`]) may do what ([`Request`]).
//! The webhook asks whether the controller may delete a kind and whether a writer may delete
//! what a setting targets; `kubectl retention explain` asks whether the controller may delete
//! one object. Built here once, so the plugin asks with the same groups the webhook does: a
//! ServiceAccount's permissions often come through its groups (`system:serviceaccounts:NS`), and
//! a review by user name alone answers "no" for them.

use std::collections::BTreeMap;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};

/// Who a SubjectAccessReview asks about: the controller's ServiceAccount, or the writer of an
/// AdmissionRequest (its `userInfo`, extra and uid included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Subject {
    pub user: String,
    pub groups: Vec<String>,
    pub uid: Option<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Subject {
    /// A ServiceAccount by its user name (`system:serviceaccount:NAMESPACE:NAME`), with the
    /// groups its requests carry.
    pub fn service_account(user: &str) -> Self {
        let mut groups = vec![
            "system:serviceaccounts".to_owned(),
            "system:authenticated".to_owned(),
        ];
        if let Some((namespace, _)) = user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
        {
            groups.push(format!("system:serviceaccounts:{namespace}"));
        }
        Self {
            user: user.to_owned(),
            groups,
            ..Self::default()
        }
    }
}

/// What is asked: a verb on a resource of a group, in a namespace (`None`: cluster-wide), on one
/// object by name or (`None`) on all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Request {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Request {
    /// The review asking whether `subject` may do this.
    pub fn review_for(&self, subject: &Subject) -> SubjectAccessReview {
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(subject.user.clone()),
                groups: Some(subject.groups.clone()),
                uid: subject.uid.clone(),
                extra: (!subject.extra.is_empty()).then(|| subject.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(self.group.clone()),
                    resource: Some(self.resource.clone()),
                    verb: Some(self.verb.to_owned()),
                    namespace: self.namespace.clone(),
                    name: self.name.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_asks_with_the_groups_its_requests_carry() {
        let subject = Subject::service_account("system:serviceaccount:kube-retention:controller");
        assert_eq!(
            subject.groups,
            [
                "system:serviceaccounts",
                "system:authenticated",
                "system:serviceaccounts:kube-retention"
            ]
        );
        let request = Request {
            verb: "delete",
            group: "batch".into(),
            resource: "jobs".into(),
            namespace: Some("team-a".into()),
            name: Some("nightly".into()),
        };
        let spec = request.review_for(&subject).spec;
        assert_eq!(spec.groups.as_deref(), Some(&subject.groups[..]));
        assert_eq!(spec.extra, None);
        let attributes = spec.resource_attributes.unwrap_or_default();
        assert_eq!(
            (attributes.verb.as_deref(), attributes.name.as_deref()),
            (Some("delete"), Some("nightly"))
        );
    }
}
