//! `kubectl retention explain KIND NAME`: when the object goes and why — the deciding setting
//! and where it comes from, the deadline, or why it is never deleted (running, kept, no TTL,
//! the controller may not delete it).

use anyhow::Result;
use jiff::Timestamp;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube_retention_common::kinds::Resource;

use crate::args::{ExplainArgs, Format};
use crate::model::{self, Explanation, Policies};
use crate::{kinds, output};

pub async fn run(client: Client, args: ExplainArgs) -> Result<()> {
    let api_resource = kinds::resolve(&client, &args.kind).await?;
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
    let resource = Resource::new(
        &api_resource.group,
        &api_resource.version,
        &api_resource.kind,
        &api_resource.plural,
    );
    let policies = Policies::load(&client).await?;
    let mut explanation = model::explain(&resource, &object, &policies, Timestamp::now());
    if explanation.deadline.is_some() {
        match controller_may_delete(
            &client,
            &args.controller,
            &api_resource,
            &namespace,
            &args.name,
        )
        .await
        {
            Ok(true) => {}
            Ok(false) => {
                explanation.note = Some(format!(
                    "never deleted while {} may not delete {}: grant it (see deploy/core/controller-rbac.yaml)",
                    args.controller, api_resource.plural
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

/// Whether the controller's user may delete the object: its deletions use its own permissions.
async fn controller_may_delete(
    client: &Client,
    user: &str,
    resource: &kube::api::ApiResource,
    namespace: &str,
    name: &str,
) -> Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("delete".into()),
                group: Some(resource.group.clone()),
                resource: Some(resource.plural.clone()),
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|status| status.allowed))
}
