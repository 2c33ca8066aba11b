//! `kubectl retention explain KIND NAME`: when the object goes and why — the deciding setting
//! and where it comes from, the deadline, or why it is never deleted (running, kept, no TTL,
//! the controller may not delete it).

use anyhow::Result;
use jiff::Timestamp;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube_retention_common::access::{Request, Subject};
use kube_retention_common::kinds::{Registry, Resource};

use crate::kinds::ControllerLease;
use crate::model::{self, Explanation, Policies};
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    pub kind: String,
    pub name: String,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The user the controller deletes as, whose permission is checked (default: the
    /// controller's service account, kube-retention-controller in --controller-namespace).
    #[arg(long)]
    pub controller: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

pub async fn run(
    client: Client,
    kinds: &Registry,
    controller: &ControllerLease,
    args: ExplainArgs,
) -> Result<()> {
    let user = args
        .controller
        .clone()
        .unwrap_or_else(|| controller.service_account());
    let api_resource = crate::kinds::resolve(&client, &args.kind).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &api_resource);
    let mut object = api.get(&args.name).await?;
    object.types.get_or_insert_with(|| kube::api::TypeMeta {
        api_version: api_resource.api_version.clone(),
        kind: api_resource.kind.clone(),
    });
    let resource = Resource::from(&api_resource);
    let policies = Policies::load(&client).await?;
    let mut explanation = model::explain(kinds, &resource, &object, &policies, Timestamp::now());
    if explanation.deadline.is_some() {
        match controller_may_delete(&client, &user, &api_resource, &namespace, &args.name).await {
            Ok(true) => {}
            Ok(false) => {
                explanation.note = Some(format!(
                    "never deleted while {} may not delete {}: grant it (see deploy/core/controller-rbac.yaml)",
                    user, api_resource.plural
                ));
            }
            Err(error) => {
                eprintln!("warning: could not ask whether the controller may delete it: {error}")
            }
        }
    }
    let rows = vec![row(&explanation)];
    output::print(args.output, &COLUMNS, &rows, &explanation)?;
    if args.output == Format::Table && !explanation.overruled.is_empty() {
        println!("earlier than: {}", explanation.overruled.join(", "));
    }
    Ok(())
}

/// The table's columns, one value each in [`row`].
pub const COLUMNS: [&str; 7] = [
    "NAMESPACE",
    "KIND",
    "NAME",
    "STATE",
    "DEADLINE",
    "SOURCE",
    "NOTE",
];

pub fn row(explanation: &Explanation) -> Vec<String> {
    vec![
        explanation.namespace.clone(),
        explanation.kind.clone(),
        explanation.name.clone(),
        explanation.state.clone(),
        explanation
            .deadline
            .map_or_else(|| "-".to_owned(), |at| at.to_string()),
        explanation.source.clone(),
        explanation.note.clone().unwrap_or_default(),
    ]
}

/// The question `explain` asks: whether the controller's ServiceAccount (with the groups its
/// requests carry, as the webhook asks) may delete the object: its deletions use its own
/// permissions.
pub fn deletion_by(
    user: &str,
    resource: &kube::api::ApiResource,
    namespace: &str,
    name: &str,
) -> SubjectAccessReview {
    Request {
        verb: "delete",
        group: resource.group.clone(),
        resource: resource.plural.clone(),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
    }
    .review_for(&Subject::service_account(user))
}

/// Whether the controller's user may delete the object ([`deletion_by`]).
async fn controller_may_delete(
    client: &Client,
    user: &str,
    resource: &kube::api::ApiResource,
    namespace: &str,
    name: &str,
) -> Result<bool> {
    let review = deletion_by(user, resource, namespace, name);
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|status| status.allowed))
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};

    use super::*;

    #[test]
    fn the_controller_is_asked_about_as_its_service_account_where_it_runs() {
        let lease = ControllerLease {
            namespace: "retention-system".into(),
            name: "kube-retention-controller".into(),
        };
        assert_eq!(
            lease.service_account(),
            "system:serviceaccount:retention-system:kube-retention-controller"
        );
    }

    #[test]
    fn asks_as_the_webhook_asks_with_the_service_accounts_groups() {
        let user = "system:serviceaccount:kube-retention:kube-retention-controller";
        let jobs = ApiResource::from_gvk(&GroupVersionKind::gvk("batch", "v1", "Job"));
        let review = deletion_by(user, &jobs, "team-a", "nightly");
        let subject = Subject::service_account(user);
        assert_eq!(review.spec.user.as_deref(), Some(user));
        assert_eq!(review.spec.groups, Some(subject.groups));
        assert!(
            review
                .spec
                .groups
                .iter()
                .flatten()
                .any(|group| group == "system:serviceaccounts:kube-retention"),
            "{review:?}"
        );
        let attributes = review.spec.resource_attributes.unwrap_or_default();
        assert_eq!(
            (attributes.verb.as_deref(), attributes.resource.as_deref()),
            (Some("delete"), Some("jobs"))
        );
    }
}
