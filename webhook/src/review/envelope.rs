//! An AdmissionReview read in two passes over its body, neither of which builds the objects
//! whole. The first reads the review's own fields (uid, kinds, names, operation) and leaves the
//! user, the object and the oldObject as text borrowed from the body (serde_json's `RawValue`:
//! nothing copied); the second decodes from that text only what admission reads of each
//! ([`super::reads`], by the kind the request names), charging a [`Budget`]: the review's own
//! limit and the memory every admission shares ([`crate::memory`]). A review's memory is then
//! its body, while it is read, and its decoded parts, which are a few fields of each object.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{GroupVersionKind, GroupVersionResource, TypeMeta};
use kube_retention_common::Registry;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_json::value::RawValue;

use super::lean::{self, Account, Budget, ENTRY, Exceeded, Keep, NODE, heap};
use super::reads;
use crate::validate;

/// A review as admission reads it: the request as kube has it but for its objects (`about`,
/// whose `object` and `old_object` are always `None`), and as much of the objects as admission
/// reads, their apiVersion and kind filled in from the request, so the model recognises their
/// kind even when a client left them out.
pub struct Request {
    pub about: AdmissionRequest<DynamicObject>,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
}

/// Why a review was not read.
pub enum Unread {
    /// Not an AdmissionReview: what is wrong with it.
    Malformed(String),
    /// What admission reads of it did not fit its budget: the request it was, and why.
    Exceeded {
        about: Box<AdmissionRequest<DynamicObject>>,
        exceeded: Exceeded,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    api_version: String,
    kind: String,
    #[serde(borrow)]
    request: Option<Header<'a>>,
}

/// kube's `AdmissionRequest`, field for field, with the user and the objects left as text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header<'a> {
    uid: String,
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    request_sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    #[serde(borrow)]
    user_info: &'a RawValue,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
    #[serde(default)]
    dry_run: bool,
    /// Never read: read past.
    #[serde(default)]
    #[allow(dead_code)]
    options: Option<IgnoredAny>,
}

/// Reads `body`, keeping at most `limit` bytes of decoded parts, charged to `account` too;
/// the kinds are `kinds`' (a switched-off kind is read for its annotations alone).
pub fn read(
    body: &[u8],
    kinds: &Registry,
    limit: usize,
    account: &mut dyn Account,
) -> Result<Request, Unread> {
    let review: Review<'_> = serde_json::from_slice(body)
        .map_err(|error| Unread::Malformed(format!("malformed AdmissionReview: {error}")))?;
    let Some(header) = review.request else {
        return Err(Unread::Malformed("AdmissionReview has no request".into()));
    };
    let mut about = AdmissionRequest::<DynamicObject> {
        types: TypeMeta {
            api_version: review.api_version,
            kind: review.kind,
        },
        uid: header.uid,
        kind: header.kind,
        resource: header.resource,
        sub_resource: header.sub_resource,
        request_kind: header.request_kind,
        request_resource: header.request_resource,
        request_sub_resource: header.request_sub_resource,
        name: header.name,
        namespace: header.namespace,
        operation: header.operation,
        user_info: UserInfo::default(),
        object: None,
        old_object: None,
        dry_run: header.dry_run,
        options: None,
    };
    let mut budget = Budget::new(limit, account);
    let decoded = (|| {
        let user = lean::decode(header.user_info.get(), &Keep::All, &mut budget)?;
        about.user_info = UserInfo::deserialize(user)?;
        let plan = plan(kinds, &about.kind);
        let object = typed(header.object, &plan, &about.kind, &mut budget)?;
        let old_object = typed(header.old_object, &plan, &about.kind, &mut budget)?;
        Ok::<_, serde_json::Error>((object, old_object))
    })();
    match (decoded, budget.exceeded) {
        (Ok((object, old_object)), _) => Ok(Request {
            about,
            object,
            old_object,
        }),
        (Err(_), Some(exceeded)) => Err(Unread::Exceeded {
            about: Box::new(about),
            exceeded,
        }),
        (Err(error), None) => Err(Unread::Malformed(format!(
            "malformed AdmissionReview: {error}"
        ))),
    }
}

/// The api version a kind is served under, `v1` or `batch/v1`.
pub fn api_version(kind: &GroupVersionKind) -> String {
    if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    }
}

/// What admission reads of an object of `kind`.
fn plan(kinds: &Registry, kind: &GroupVersionKind) -> Keep {
    let types = serde_json::json!({"apiVersion": api_version(kind), "kind": kind.kind});
    if validate::is_policy(&types) || validate::is_cleaner(&types) {
        reads::ours()
    } else {
        reads::object(kinds.entry_for(&types))
    }
}

/// An object decoded by `plan`, with its apiVersion and kind set from `kind`; `None` where
/// there is none.
fn typed(
    text: Option<&RawValue>,
    plan: &Keep,
    kind: &GroupVersionKind,
    budget: &mut Budget<'_>,
) -> Result<Option<Value>, serde_json::Error> {
    let Some(text) = text else {
        return Ok(None);
    };
    let mut object = lean::decode(text.get(), plan, budget)?;
    let Some(fields) = object.as_object_mut() else {
        return Err(serde::de::Error::custom("the object is not a JSON object"));
    };
    let api_version = api_version(kind);
    budget
        .charge(2 * (NODE + ENTRY) + heap(api_version.len()) + heap(kind.kind.len()))
        .map_err(serde::de::Error::custom)?;
    fields.insert("apiVersion".into(), Value::String(api_version));
    fields.insert("kind".into(), Value::String(kind.kind.clone()));
    Ok(Some(object))
}
