//! The one table of kinds kube-retention knows: per kind its group, version, kind and plural,
//! its role (a run, a parent that sets TTLs and limits for its runs, or a plain object), how it
//! says it finished, where its retention fields live and how a run names its parent. Built-in
//! kinds ([`Registry::builtin`]) and kinds added at run time (`--kind`, policies) are entries of
//! the same table; the webhook, the controller and the policies all read it.
//!
//! Entries are found by group and kind (any version: the fields kube-retention reads are the
//! same across the versions it supports) and referred to by a [`KindId`] the table hands out.

use std::sync::LazyLock;

use serde_json::Value;

use crate::progress::{FinishRule, Progress};

mod builtin;
mod extra;
mod fields;
mod resource;
mod selection;

pub use builtin::{BUILD_CONFIG_ANNOTATION, BUILD_NAME_LABEL};
pub use extra::ExtraKindError;
pub use fields::{Fields, LimitFields, RunFields, TtlFields, TtlUnit};
pub use resource::{Resource, group_of, qualified};
pub use selection::{KINDS_ANNOTATION, KindSelection, SelectionError};

/// A kind's place in a [`Registry`]; stable for the registry's life (entries are never removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindId(u16);

/// What the controller needs on a kind to delete objects of it (and stamp or label them).
pub const CONTROLLER_VERBS: [&str; 4] = ["list", "watch", "patch", "delete"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Run to completion; deleted once expired or over a limit.
    Run {
        /// The kind that starts it and sets its TTLs and limits.
        parent: Option<ParentRef>,
        /// Limits per value of a label, fixed by configuration.
        limits: Option<LabelLimits>,
    },
    /// Sets TTLs and limits for the runs it starts (Shipwright Build, BuildConfig).
    Parent,
    /// Anything else: deleted once its `retention.dev/ttl` or `expires-at` has passed.
    Object,
}

/// How a run names its parent: the first source present wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRef {
    pub group: &'static str,
    pub kind: &'static str,
    pub name: &'static [NameSource],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameSource {
    Label(&'static str),
    Annotation(&'static str),
    /// A dotted field path.
    Field(&'static str),
}

impl ParentRef {
    /// The parent's name as `object` gives it.
    pub fn name_in<'a>(&self, object: &'a Value) -> Option<&'a str> {
        self.name.iter().find_map(|source| match source {
            NameSource::Label(key) => crate::json::metadata_entry(object, "labels", key),
            NameSource::Annotation(key) => crate::json::metadata_entry(object, "annotations", key),
            NameSource::Field(path) => crate::json::text(object, path),
        })
    }
}

/// Count limits per value of a label, for kinds without a parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelLimits {
    pub label: String,
    pub succeeded: Option<u32>,
    pub failed: Option<u32>,
}

/// Which objects of a kind the controller watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    /// Every object (runs counted by their parent's limits whatever their own settings).
    All,
    /// Objects carrying `retention.dev/managed`, plus a metadata-only watch of the rest.
    Managed,
    /// Objects carrying `retention.dev/managed` only: for kinds found by discovery, where an
    /// unfiltered watch of everything would cost too much. The webhook labels what it admits.
    ManagedOnly,
    /// Objects carrying this label (limits per its value).
    Labelled(String),
}

impl Watch {
    /// The server-side label selector, if any.
    pub fn selector(&self) -> Option<&str> {
        match self {
            Self::All => None,
            Self::Managed | Self::ManagedOnly => Some(crate::annotations::MANAGED_SELECTOR),
            Self::Labelled(label) => Some(label),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub resource: Resource,
    pub role: Role,
    pub finish: FinishRule,
    pub fields: Fields,
    pub watch: Watch,
    /// Built in: skipped with a note when the cluster does not serve it.
    pub optional: bool,
}

impl Entry {
    /// A kind known only by name: annotations and a Knative-style `Succeeded` condition apply.
    pub fn plain(resource: Resource) -> Self {
        Self {
            resource,
            role: Role::Object,
            finish: FinishRule::SucceededCondition { required: false },
            fields: Fields::default(),
            watch: Watch::Managed,
            optional: false,
        }
    }

    pub fn parent(&self) -> Option<&ParentRef> {
        match &self.role {
            Role::Run { parent, .. } => parent.as_ref(),
            Role::Parent | Role::Object => None,
        }
    }
}

/// The table. Lookups by name are linear: it holds tens of kinds, not thousands.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: Vec<Entry>,
}

/// Kinds a registry refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("{0} is already known to kube-retention")]
    Duplicate(Resource),
    #[error("{0} is not a kind kube-retention knows")]
    Unknown(String),
    #[error("more than {} kinds", u16::MAX)]
    Full,
}

/// What a table says of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// A kind of the table, with its entry.
    Listed(&'a Entry),
    /// A kind no table knows: governed only by its annotations and policies, as a plain kind.
    Unlisted,
    /// A built-in kind switched off here (`--disable-kind`): left alone entirely.
    SwitchedOff,
}

static BUILTIN: LazyLock<Registry> = LazyLock::new(|| Registry {
    entries: builtin::entries(),
});
static PLAIN: LazyLock<Entry> = LazyLock::new(|| Entry::plain(Resource::new("", "", "", "")));

impl Registry {
    /// Shipwright Builds and BuildRuns, OpenShift-style BuildConfigs and Builds, Jobs and Pods.
    pub fn builtin() -> &'static Registry {
        &BUILTIN
    }

    /// The entry that governs `object` by the built-in table: its own, else a plain one.
    pub fn entry_of(object: &Value) -> &'static Entry {
        Self::builtin().entry_for(object).unwrap_or(&PLAIN)
    }

    /// The progress of a JSON object (apiVersion, kind, metadata, status) by its kind's
    /// built-in finish rule.
    pub fn progress_of(object: &Value) -> Progress {
        Self::entry_of(object).finish.progress(object)
    }

    /// The entry that governs `object` in this table: its own, a plain one for a kind no table
    /// knows, `None` for a built-in kind switched off here (left alone entirely).
    pub fn entry_for(&self, object: &Value) -> Option<&Entry> {
        match self.lookup(object) {
            Lookup::Listed(entry) => Some(entry),
            Lookup::Unlisted => Some(&PLAIN),
            Lookup::SwitchedOff => None,
        }
    }

    /// What this table says of `object`'s kind (by its apiVersion and kind).
    pub fn lookup(&self, object: &Value) -> Lookup<'_> {
        let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        if let Some(id) = self.find(api_version, kind) {
            return Lookup::Listed(self.get(id));
        }
        match Self::builtin().find(api_version, kind) {
            Some(_) => Lookup::SwitchedOff,
            None => Lookup::Unlisted,
        }
    }

    pub fn add(&mut self, entry: Entry) -> Result<KindId, RegistryError> {
        if let Some(id) = self.find_group_kind(&entry.resource.group, &entry.resource.kind) {
            return Err(RegistryError::Duplicate(self.get(id).resource.clone()));
        }
        let id = KindId(u16::try_from(self.entries.len()).map_err(|_| RegistryError::Full)?);
        self.entries.push(entry);
        Ok(id)
    }

    /// Takes a kind out of the table by its `Kind.group` name (`Job.batch`, `Pod`), so neither
    /// the webhook nor the controller handles it.
    pub fn remove(&mut self, name: &str) -> Result<Entry, RegistryError> {
        let id = self
            .named(name)
            .ok_or_else(|| RegistryError::Unknown(name.to_owned()))?;
        Ok(self.entries.remove(usize::from(id.0)))
    }

    /// The kind called `name` in `Kind.group` form (`Job.batch`, `pod`), case-insensitively.
    pub fn named(&self, name: &str) -> Option<KindId> {
        self.iter()
            .find(|(_, entry)| entry.resource.to_string().eq_ignore_ascii_case(name))
            .map(|(id, _)| id)
    }

    pub fn find(&self, api_version: &str, kind: &str) -> Option<KindId> {
        self.find_group_kind(group_of(api_version), kind)
    }

    pub fn find_group_kind(&self, group: &str, kind: &str) -> Option<KindId> {
        self.iter()
            .find(|(_, entry)| entry.resource.group == group && entry.resource.kind == kind)
            .map(|(id, _)| id)
    }

    /// # Panics
    /// For an id of another registry.
    pub fn get(&self, id: KindId) -> &Entry {
        &self.entries[usize::from(id.0)]
    }

    pub fn iter(&self) -> impl Iterator<Item = (KindId, &Entry)> {
        (0u16..)
            .zip(&self.entries)
            .map(|(id, entry)| (KindId(id), entry))
    }

    /// The kind that sets `run`'s TTLs and limits, if it is in the table.
    pub fn parent_of(&self, run: KindId) -> Option<KindId> {
        let parent = self.get(run).parent()?;
        self.find_group_kind(parent.group, parent.kind)
    }

    /// The kinds whose parent is `parent`.
    pub fn runs_of(&self, parent: KindId) -> impl Iterator<Item = KindId> + '_ {
        self.iter()
            .map(|(id, _)| id)
            .filter(move |&run| self.parent_of(run) == Some(parent))
    }
}

impl std::ops::Index<KindId> for Registry {
    type Output = Entry;

    fn index(&self, id: KindId) -> &Entry {
        self.get(id)
    }
}
