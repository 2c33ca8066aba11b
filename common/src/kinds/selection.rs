//! The kinds one deployment handles: the built-in table shaped by the controller's `--kind`
//! (entries added) and `--disable-kind` (built-in ones taken out); the webhook takes the same
//! `--disable-kind`. [`KindSelection::registry`] is the one way from those flags to a
//! [`Registry`]: the controller and the webhook call it on their flags, and `kubectl retention`
//! on the selection the controller publishes on its Lease ([`KINDS_ANNOTATION`]), so
//! `explain`, `upcoming` and `prune` judge with the kinds the controller acts on.

use serde::{Deserialize, Serialize};

use super::{Entry, ExtraKindError, Registry, RegistryError};

/// The annotation of the controller's Lease that holds its [`KindSelection`] as JSON.
pub const KINDS_ANNOTATION: &str = "retention.dev/kinds";

/// `--kind` specs and `--disable-kind` names, as the flags give them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindSelection {
    /// `GROUP/VERSION/KIND[/PLURAL][:LABEL=SUCCEEDED,FAILED]` each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// `Kind.group` names of built-in kinds left alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_kinds: Vec<String>,
}

/// A selection the table refuses, naming the flag and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error(transparent)]
    Extra(#[from] ExtraKindError),
    #[error("--kind {spec:?}: {source}")]
    Duplicate { spec: String, source: RegistryError },
    #[error("--disable-kind: {0}")]
    Disable(#[source] RegistryError),
}

impl KindSelection {
    /// The built-in kinds without the disabled ones, plus the added ones.
    pub fn registry(&self) -> Result<Registry, SelectionError> {
        let mut registry = Registry::builtin().clone();
        for name in &self.disabled_kinds {
            registry.remove(name).map_err(SelectionError::Disable)?;
        }
        for spec in &self.kinds {
            let entry: Entry = spec.parse()?;
            registry
                .add(entry)
                .map_err(|source| SelectionError::Duplicate {
                    spec: spec.clone(),
                    source,
                })?;
        }
        Ok(registry)
    }

    /// The selection as the Lease annotation holds it.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The selection from the Lease annotation's text.
    pub fn from_annotation(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}
