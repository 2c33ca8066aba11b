//! An object as a watch delivered it: what every part of the state judges — its governing
//! setting, its limits group, its record — is read from this one view.

use std::sync::Arc;

use jiff::Timestamp;
use kube::api::DynamicObject;
use kube_retention_common::kinds::KindId;
use serde_json::Value;

use super::evaluation::PolicyAnswers;

/// An object as a watch delivered it, with its JSON form for the model.
pub(super) struct Seen<'a> {
    pub(super) kind: KindId,
    pub(super) namespace: Arc<str>,
    pub(super) name: &'a str,
    pub(super) object: &'a DynamicObject,
    pub(super) value: &'a Value,
    /// Its policies' expressions, evaluated ahead (off the loop); `None` where none has any.
    pub(super) answers: Option<&'a PolicyAnswers>,
}

impl Seen<'_> {
    pub(super) fn created(&self) -> Option<Timestamp> {
        self.object
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|time| time.0)
    }
}
