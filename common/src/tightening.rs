//! Which retention settings a write makes stricter: a TTL added or shortened, an earlier
//! `expires-at`, a snooze taken away or brought forward, `keep` taken away from an object with settings, shorter TTLs or smaller limits for a parent's runs, runs now
//! deleted with their parent. kube-retention's controller deletes with its own power, so whoever
//! writes such a setting must be allowed to delete what it governs; the webhook asks the API
//! server for each [`Tightening`] this finds.
//!
//! Effective values are compared, not single fields: removing `ttl-after-succeeded` so that a
//! shorter `ttl-after-finished` applies is a tightening too. What the writer did not write is
//! not theirs to answer for: kube-retention's own stamp, the TTLs a new run copies from its
//! parent (whose author answered for them), the snapshot another system keeps.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::annotations;
use crate::field_error::render;
use crate::json::field;
use crate::kinds::{Entry, Fields, Resource, TtlFields};
use crate::own_settings::{OwnSettings, Ttls};

/// What a writer who may not delete an object may not do with its settings, in a refusal: "you
/// may not delete configmaps in namespace team-a, so you may not set their retention".
pub const SET_THEIR_RETENTION: &str = "set their retention";

/// The heading of several refusals of one write.
pub const NOT_YOURS: &str = "retention settings are not yours to make";

/// Whose deletion a setting governs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reach {
    /// The object itself.
    Itself,
    /// The runs of the kind's parent role (a Build's BuildRuns) in the object's namespace.
    Runs,
}

/// A setting the write makes stricter: where it is, its new value (JSON), whose deletion it
/// governs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightening {
    pub path: String,
    pub value: String,
    pub reach: Reach,
}

/// The settings `new` makes stricter than `old` (all of them on a create). `entry` is the
/// object's kind (`None`: annotations only); `from_parent` the run TTLs its parent sets, which
/// a new run carries in its own fields without its writer choosing them.
pub fn tightenings(
    entry: Option<&Entry>,
    old: Option<&Value>,
    new: &Value,
    from_parent: Ttls,
) -> Vec<Tightening> {
    let fields = entry.map(|entry| entry.fields).unwrap_or_default();
    let after = Settings::read(&fields, new, from_parent);
    let before = old
        .map(|old| Settings::read(&fields, old, from_parent))
        .unwrap_or_default();
    let mut found = Vec::new();
    let mut report = |path: &str, reach: Reach| {
        found.push(Tightening {
            path: path.to_owned(),
            value: field_or_annotation(new, path),
            reach,
        });
    };
    // Without settings of its own, an object's deletion is a policy's, whose author answered
    // for it: taking `keep` away then needs nothing more.
    if before.keep && !after.keep && after.deletes_itself() {
        report(&annotations::path(annotations::KEEP), Reach::Itself);
    }
    for (old, new, reach) in [
        (&before.ttl, &after.ttl, Reach::Itself),
        (&before.after[0], &after.after[0], Reach::Itself),
        (&before.after[1], &after.after[1], Reach::Itself),
        (&before.runs_after[0], &after.runs_after[0], Reach::Runs),
        (&before.runs_after[1], &after.runs_after[1], Reach::Runs),
    ] {
        if let Some(path) = tighter(old, new) {
            report(path, reach);
        }
    }
    if let Some(path) = tighter(&before.expires_at, &after.expires_at) {
        report(path, Reach::Itself);
    }
    // A snooze only ever pushes a deadline: taking it away or bringing it forward tightens.
    if let Some(before_until) = before.snoozed_until
        && after.snoozed_until.is_none_or(|until| until < before_until)
    {
        report(
            &annotations::path(annotations::SNOOZED_UNTIL),
            Reach::Itself,
        );
    }
    for (old, new) in before.limits.iter().zip(&after.limits) {
        if let Some(path) = tighter(old, new) {
            report(path, Reach::Runs);
        }
    }
    // Set only while true: from unset to set is from false to true.
    if let Some(path) = tighter(&before.owned_by_parent, &after.owned_by_parent) {
        report(path, Reach::Runs);
    }
    found
}

/// Where the writer wrote `new`, if it is stricter than `old` (set where there was none, or
/// smaller) and the writer's at all.
fn tighter<'a, T: Ord>(old: &Option<Setting<T>>, new: &'a Option<Setting<T>>) -> Option<&'a str> {
    let new = new.as_ref()?;
    let stricter = old.as_ref().is_none_or(|old| new.value < old.value);
    new.path.as_deref().filter(|_| stricter)
}

/// A setting's value, and where the writer wrote it (`None`: not the writer's).
#[derive(Debug, Clone)]
struct Setting<T> {
    value: T,
    path: Option<String>,
}

/// The effective settings of one version of an object.
#[derive(Debug, Default)]
struct Settings {
    keep: bool,
    ttl: Option<Setting<Duration>>,
    expires_at: Option<Setting<Timestamp>>,
    snoozed_until: Option<Timestamp>,
    /// After success, after failure.
    after: [Option<Setting<Duration>>; 2],
    runs_after: [Option<Setting<Duration>>; 2],
    limits: [Option<Setting<u32>>; 2],
    owned_by_parent: Option<Setting<bool>>,
}

impl Settings {
    fn deletes_itself(&self) -> bool {
        self.ttl.is_some() || self.expires_at.is_some() || self.after.iter().any(Option::is_some)
    }

    fn read(fields: &Fields, object: &Value, from_parent: Ttls) -> Self {
        // Invalid values are the validator's to deny; only what is certain is compared here.
        let policy = OwnSettings::read_as(
            &reader(Fields {
                snapshot: None,
                ..*fields
            }),
            object,
        )
        .0;
        let snapshot = fields.snapshot.map_or_else(Ttls::default, |snapshot| {
            let only = Fields {
                own: Some(snapshot),
                ..Fields::default()
            };
            OwnSettings::read_as(&reader(only), object).0.own
        });
        let notes = &policy.annotations;
        let finished = setting(
            notes.after_finished,
            Some(annotations::path(annotations::TTL_AFTER_FINISHED)),
        );
        let own = fields.own;
        let embedded = fields.embedded.map(|embedded| embedded.ttls);
        let outcome = |annotation: (&str, Option<Duration>),
                       pick: fn(&Ttls) -> Option<Duration>,
                       path: fn(&TtlFields) -> String| {
            let own_value = pick(&policy.own);
            let chosen = own_value != pick(&from_parent);
            setting(annotation.1, Some(annotations::path(annotation.0)))
                .or_else(|| finished.clone())
                .or_else(|| setting(own_value, own.as_ref().map(path).filter(|_| chosen)))
                .or_else(|| setting(pick(&policy.inherited), embedded.as_ref().map(path)))
                .or_else(|| setting(pick(&snapshot), None))
        };
        let mut settings = Self {
            keep: notes.keep,
            ttl: setting(notes.ttl, Some(annotations::path(annotations::TTL))),
            expires_at: setting(
                notes.own_deadline(),
                Some(annotations::path(annotations::EXPIRES_AT)),
            ),
            snoozed_until: notes.snoozed_until,
            after: [
                outcome(
                    (annotations::TTL_AFTER_SUCCEEDED, notes.after_succeeded),
                    |ttls| ttls.after_succeeded,
                    TtlFields::succeeded_path,
                ),
                outcome(
                    (annotations::TTL_AFTER_FAILED, notes.after_failed),
                    |ttls| ttls.after_failed,
                    TtlFields::failed_path,
                ),
            ],
            ..Self::default()
        };
        if let Some(runs) = fields.runs {
            let at = |name: &str| Some(format!("{}.{name}", runs.ttls.within));
            let ttls = policy.runs.ttls;
            settings.runs_after = [
                setting(ttls.after_succeeded, Some(runs.ttls.succeeded_path())),
                setting(ttls.after_failed, Some(runs.ttls.failed_path())),
            ];
            settings.limits = [
                setting(policy.runs.succeeded_limit, at(runs.limits.succeeded)),
                setting(policy.runs.failed_limit, at(runs.limits.failed)),
            ];
            settings.owned_by_parent = runs
                .owned_by_parent
                .and_then(|name| setting(policy.runs.at_build_deletion.then_some(true), at(name)));
        }
        settings
    }
}

fn setting<T>(value: Option<T>, path: Option<String>) -> Option<Setting<T>> {
    value.map(|value| Setting { value, path })
}

/// An entry that reads just `fields` (and the annotations every kind has).
fn reader(fields: Fields) -> Entry {
    Entry {
        fields,
        ..Entry::plain(Resource::new("", "", "", ""))
    }
}

/// The JSON of the value at `path` (a dotted field path, or `metadata.annotations[KEY]`), cut
/// short as every denial cuts it.
fn field_or_annotation(object: &Value, path: &str) -> String {
    let value = match path
        .strip_prefix("metadata.annotations[")
        .and_then(|rest| rest.strip_suffix(']'))
    {
        Some(key) => object
            .pointer("/metadata/annotations")
            .and_then(|notes| notes.get(key)),
        None => field(object, path),
    };
    value.map_or_else(|| "null".to_owned(), render)
}
