//! The writer policy ([`kube_retention_common::writer_policy`]) is the webhook's writer check:
//! on generated writes — old and new `retention.dev/*` annotation sets (creates, changes,
//! removals; TTLs tightened and loosened, spelled alike and not; kube-retention's stamp and the
//! writer's own `expires-at`; `keep`; snoozes; valid, invalid and overflowing values) — each
//! applied on the real API server by a user who may write Secrets but not delete them and by one
//! who may, with the webhook's registrations removed, the API server's verdict and message are
//! those of the webhook's writer check for the same write (`common::tightening` and the user's
//! permission, as `webhook/src/writers/` asks it), word for word.
//!
//! Secrets, because the controller may not touch them: nothing it does races the writes.
//!
//! One difference is allowed, and counted: a duration past Go's 292 years by less than the
//! policy's margin (about 10 ms), which its floating-point sum cannot tell from one within, and
//! which it therefore reads with CEL's `duration()`, which fails: a write holding one may be
//! refused to a user who may not delete the object where the model would call the value invalid
//! and admit (the webhook's validator refuses a new one from anyone), and its refusal is then
//! CEL's error rather than the webhook's words. The policy never admits what the model refuses,
//! and never refuses a user who may delete.
//!
//! `make test` runs [`SHORT`] writes; `KUBE_RETENTION_WRITER_CASES=N` runs N (`make
//! writer-policy-long`), `KUBE_RETENTION_WRITER_SEED` replays a run's generation (each run says
//! its seed).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_retention_common::annotations::{
    EXPIRES_AT, KEEP, NOTIFY_BEFORE, SNOOZED_UNTIL, STAMPED, TTL, TTL_AFTER_FAILED,
    TTL_AFTER_FINISHED, TTL_AFTER_SUCCEEDED,
};
use kube_retention_common::duration::{self, DurationError, UNITS};
use kube_retention_common::field_error::FieldError;
use kube_retention_common::schema_rules::DURATION_COMPONENT_PATTERN;
use kube_retention_common::tightening::{NOT_YOURS, SET_THEIR_RETENTION, tightenings};
use kube_retention_common::writer_policy::{NAME, RANGE_BOUND};
use kube_retention_common::{Registry, Ttls};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

use super::grant;
use crate::support::TestNamespace;

/// Writes `make test` runs.
const SHORT: usize = 300;
/// Writes in flight at once.
const CONCURRENT: usize = 16;
/// The webhook configurations, removed for the test: the policy alone judges.
const CONFIGURATION: &str = "kube-retention";

type Annotations = BTreeMap<String, String>;

/// One generated write: the annotations before (`None`: a create) and after.
#[derive(Debug, Clone)]
struct Write {
    old: Option<Annotations>,
    new: Annotations,
}

const DURATION_KEYS: [&str; 4] = [
    TTL,
    TTL_AFTER_SUCCEEDED,
    TTL_AFTER_FAILED,
    TTL_AFTER_FINISHED,
];

/// Durations: Go's grammar at its edges (signs on zero, fractions, every unit, repeated units,
/// the same length spelled several ways, the largest and one past it), and what it refuses.
const DURATIONS: &[&str] = &[
    "0",
    "+0",
    "-0",
    "0s",
    "-0s",
    "-.0h",
    "1ns",
    "999ns",
    "1us",
    "1µs",
    "1μs",
    "1000ns",
    "1ms",
    "1s",
    "1.5s",
    ".5s",
    "1.s",
    "1.0000000001s",
    "0.9999999999s",
    "59s",
    "60s",
    "1m",
    "1m0s",
    "30m",
    "0.5h",
    "1h",
    "1h0m0s",
    "60m",
    "3600s",
    "3600000ms",
    "90m",
    "1h30m",
    "1.5h",
    "2h",
    "1h1h",
    "24h",
    "+1h",
    "100h",
    "2562047h47m16.854775807s",
    "2562048h",
    "2562047h47m16.854775808s",
    "9223372036854775808ns",
    "2562047h47m16.863s",
    "2562047h47m16.865s",
    "99999999999999999999h",
    "1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s",
    "1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s",
    "1d",
    "-1h",
    "-1ns",
    "",
    " 1h",
    "1h ",
    "1H",
    "h",
    ".s",
    "1.2.3s",
    "-",
    "+",
    "1hh",
    "soon",
    "∞",
];

/// Times: a few instants, each spelled in several offsets and precisions, the grammar's edges,
/// and what it refuses (a space, lower case, no seconds, 30 February, a leap second, years out
/// of range, an offset of 24 hours).
const TIMES: &[&str] = &[
    "2026-12-01T00:00:00Z",
    "2026-12-01T02:00:00+02:00",
    "2026-11-30T19:00:00-05:00",
    "2026-12-01T00:00:00.000000000Z",
    "2026-12-01T00:00:00.000000001Z",
    "2026-11-30T23:59:59.999999999Z",
    "2026-11-30T23:59:59.999999999-00:00",
    "2026-12-01T00:00:01Z",
    "2026-11-30T23:00:00Z",
    "2027-01-01T00:00:00Z",
    "2000-02-29T00:00:00Z",
    "1000-01-01T00:00:00+23:59",
    "9998-12-31T23:59:59-23:59",
    "2026-12-01 00:00:00Z",
    "2026-12-01t00:00:00z",
    "2026-12-01T00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-12-01T23:59:60Z",
    "0999-12-31T00:00:00Z",
    "9999-01-01T00:00:00Z",
    "2026-12-01T00:00:00+24:00",
    "2026-12-01T00:00:00.1234567891Z",
    "tomorrow",
    "",
];

const KEEPS: &[&str] = &["true", "false", "True", "TRUE", "", "yes", "1"];

fn duration_value() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(DURATIONS).prop_map(str::to_owned),
        1 => "[+-]?([0-9]{0,3}([.][0-9]{0,2})?(ns|us|µs|ms|s|m|h|d)){1,3}",
    ]
    .boxed()
}

fn time_value() -> BoxedStrategy<String> {
    prop_oneof![
        5 => prop::sample::select(TIMES).prop_map(str::to_owned),
        1 => proptest::string::string_regex(
            kube_retention_common::rfc3339::PATTERN
                .trim_start_matches('^')
                .trim_end_matches('$'),
        )
        .unwrap_or_else(|error| unreachable!("{error}")),
    ]
    .boxed()
}

/// One annotation's value: of its grammar mostly, sometimes of another's.
fn value_for(key: &'static str) -> BoxedStrategy<String> {
    let own = match key {
        KEEP => prop_oneof![
            2 => Just("true".to_owned()),
            1 => prop::sample::select(KEEPS).prop_map(str::to_owned),
        ]
        .boxed(),
        EXPIRES_AT | STAMPED | SNOOZED_UNTIL => time_value(),
        _ => duration_value(),
    };
    prop_oneof![9 => own, 1 => "[ -~]{0,12}"].boxed()
}

/// The keys a write may touch: the retention annotations, one the model does not know, one it
/// does not judge, and one of another's.
const KEYS: &[&str] = &[
    TTL,
    TTL_AFTER_SUCCEEDED,
    TTL_AFTER_FAILED,
    TTL_AFTER_FINISHED,
    EXPIRES_AT,
    STAMPED,
    SNOOZED_UNTIL,
    KEEP,
    NOTIFY_BEFORE,
    "retention.dev/unknown",
    "example.com/owner",
];

/// An annotation set: each key present with its own chance; `stamped` often the same as
/// `expires-at`, kube-retention's stamp.
fn annotations() -> BoxedStrategy<Annotations> {
    let entries: Vec<BoxedStrategy<Option<(String, String)>>> = KEYS
        .iter()
        .map(|key| {
            let weight = if KEYS[..8].contains(key) { 0.35 } else { 0.1 };
            prop::option::weighted(weight, value_for(key))
                .prop_map(move |value| value.map(|value| ((*key).to_owned(), value)))
                .boxed()
        })
        .collect();
    (entries, prop::bool::weighted(0.5))
        .prop_map(|(entries, stamp)| {
            let mut set: Annotations = entries.into_iter().flatten().collect();
            if stamp && let Some(expires) = set.get(EXPIRES_AT).cloned() {
                set.insert(STAMPED.to_owned(), expires);
            }
            set
        })
        .boxed()
}

/// A change of one annotation: set to a value of its grammar (or another's), or taken away.
fn edit() -> BoxedStrategy<(String, Option<String>)> {
    prop::sample::select(KEYS)
        .prop_flat_map(|key| {
            prop::option::weighted(0.7, value_for(key))
                .prop_map(move |value| (key.to_owned(), value))
        })
        .boxed()
}

/// A write: a create (a fifth), a few edits of an annotation set (most), or another set.
fn write() -> BoxedStrategy<Write> {
    prop_oneof![
        1 => annotations().prop_map(|new| Write { old: None, new }),
        6 => (annotations(), prop::collection::vec(edit(), 1..4)).prop_map(|(old, edits)| {
            let mut new = old.clone();
            for (key, value) in edits {
                match value {
                    Some(value) => new.insert(key, value),
                    None => new.remove(&key),
                };
            }
            Write { old: Some(old), new }
        }),
        1 => (annotations(), annotations()).prop_map(|(old, new)| Write { old: Some(old), new }),
    ]
    .boxed()
}

fn secret(name: &str, annotations: &Annotations) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": name, "annotations": annotations}})
}

/// The webhook's refusal of `write` to a user who may not delete the object: each tightened
/// annotation once, in the model's order, as `webhook/src/writers/` words it.
fn webhook_refusal(namespace: &str, write: &Write) -> Option<String> {
    let new = secret("s", &write.new);
    let old = write.old.as_ref().map(|old| secret("s", old));
    let entry = Registry::builtin().entry_for(&new);
    let mut refusals: Vec<FieldError> = Vec::new();
    for tightening in tightenings(entry, old.as_ref(), &new, Ttls::default()) {
        if refusals
            .iter()
            .all(|refusal| refusal.path != tightening.path)
        {
            refusals.push(FieldError {
                path: tightening.path,
                value: tightening.value,
                rule: format!(
                    "you may not delete secrets in namespace {namespace}, so you may not \
                     {SET_THEIR_RETENTION}"
                ),
            });
        }
    }
    match refusals.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => Some(format!(
            "{} {NOT_YOURS}: {}",
            many.len(),
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

/// Whether `value` is a duration past Go's largest by less than the policy's margin, which its
/// floating-point sum cannot tell from one within (the sum restated, to classify writes).
fn in_the_margin(value: &str) -> bool {
    if duration::parse(value) != Err(DurationError::Overflow) {
        return false;
    }
    let components =
        regex::Regex::new(DURATION_COMPONENT_PATTERN).unwrap_or_else(|e| unreachable!("{e}"));
    let sum: f64 = components
        .find_iter(value)
        .map(|found| {
            let text = found.as_str();
            let digits = text
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(text.len());
            let (number, unit) = text.split_at(digits);
            let nanos = UNITS
                .iter()
                .find(|(name, _)| *name == unit)
                .map_or(0, |(_, nanos)| *nanos);
            #[allow(clippy::cast_precision_loss)]
            let nanos = nanos as f64;
            number.parse::<f64>().unwrap_or(f64::INFINITY) * nanos
        })
        .sum();
    sum <= RANGE_BOUND
}

/// Whether `write` holds a duration in the margin past Go's 292 years, old or new: there the
/// policy reads it with CEL's `duration()`, which fails, and the failure refuses the write to a
/// user who may not delete the object (the one difference allowed).
fn in_margin(write: &Write) -> bool {
    write
        .old
        .iter()
        .chain([&write.new])
        .flat_map(|set| DURATION_KEYS.iter().filter_map(|key| set.get(*key)))
        .any(|value| in_the_margin(value))
}

/// What the API server answered one write: `None` admitted, else the policy's message.
async fn applied(
    admin: &Client,
    writer: &Client,
    namespace: &str,
    name: &str,
    write: &Write,
) -> Result<Option<String>> {
    let writer_secrets: Api<Secret> = Api::namespaced(writer.clone(), namespace);
    let answer = match &write.old {
        None => {
            let secret: Secret = serde_json::from_value(secret(name, &write.new))?;
            writer_secrets
                .create(&PostParams::default(), &secret)
                .await
                .map(drop)
        }
        Some(old) => {
            let secrets: Api<Secret> = Api::namespaced(admin.clone(), namespace);
            let stored: Secret = serde_json::from_value(secret(name, old))?;
            secrets
                .create(&PostParams::default(), &stored)
                .await
                .with_context(|| format!("the admin storing {old:?}"))?;
            // A merge patch setting the new set and taking away the rest of the old.
            let mut annotations = serde_json::Map::new();
            for key in old.keys() {
                annotations.insert(key.clone(), Value::Null);
            }
            for (key, value) in &write.new {
                annotations.insert(key.clone(), Value::String(value.clone()));
            }
            let patch = json!({"metadata": {"annotations": annotations}});
            writer_secrets
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
        }
    };
    match answer {
        Ok(()) => Ok(None),
        // 403 a refusal, 422 an expression that failed (a duration past 292 years).
        Err(kube::Error::Api(status)) if status.code == 403 || status.code == 422 => {
            let prefix = format!(
                "ValidatingAdmissionPolicy '{NAME}' with binding '{NAME}' denied request: "
            );
            let (_, message) = status
                .message
                .split_once(&prefix)
                .with_context(|| format!("a refusal not the policy's: {}", status.message))?;
            Ok(Some(message.to_owned()))
        }
        Err(error) => bail!("{write:?}: {error}"),
    }
}

/// Writes of values near Kubernetes' 256 KiB of annotations, which the policy must judge within
/// the API server's CEL budget: a duration longer than its bound, times and `keep` of 100,000
/// characters, a refusal naming one (cut as every denial cuts it).
fn large_writes() -> Vec<Write> {
    let large = |unit: &str| unit.repeat(100_000 / unit.len());
    let set = |pairs: &[(&str, String)]| -> Annotations {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect()
    };
    vec![
        Write {
            old: None,
            new: set(&[(TTL, large("1s")), (TTL_AFTER_FINISHED, large("9"))]),
        },
        Write {
            old: None,
            new: set(&[(EXPIRES_AT, large("2")), (SNOOZED_UNTIL, large("x\"\n"))]),
        },
        Write {
            old: Some(set(&[(KEEP, "true".to_owned()), (TTL, "1h".to_owned())])),
            new: set(&[(KEEP, large("\"\\x")), (TTL, "1h".to_owned())]),
        },
        Write {
            old: Some(set(&[(SNOOZED_UNTIL, "2027-01-01T00:00:00Z".to_owned())])),
            new: set(&[(SNOOZED_UNTIL, large("y")), (STAMPED, large("z"))]),
        },
    ]
}

/// How a run's writes were spread, and what came of them.
#[derive(Default)]
struct Tally {
    creates: usize,
    updates: usize,
    present: BTreeMap<String, usize>,
    invalid: BTreeMap<String, usize>,
    refused: BTreeMap<String, usize>,
    stamps: usize,
    overflowing: usize,
    in_margin: usize,
    admitted_both: usize,
    refused_patcher: usize,
    overflow_refusals: usize,
    overflow_messages: usize,
}

impl Tally {
    fn count(&mut self, write: &Write, expected: Option<&str>) {
        if write.old.is_some() {
            self.updates += 1;
        } else {
            self.creates += 1;
        }
        let new = secret("s", &write.new);
        let (_, errors) = kube_retention_common::OwnSettings::read(&new);
        for error in errors {
            *self.invalid.entry(error.path).or_default() += 1;
        }
        for key in write.new.keys() {
            *self.present.entry(key.clone()).or_default() += 1;
        }
        if write.new.contains_key(STAMPED) && write.new.get(STAMPED) == write.new.get(EXPIRES_AT) {
            self.stamps += 1;
        }
        let overflowing = |set: &Annotations| {
            DURATION_KEYS
                .iter()
                .filter_map(|key| set.get(*key))
                .any(|value| duration::parse(value) == Err(DurationError::Overflow))
        };
        if write.old.iter().chain([&write.new]).any(overflowing) {
            self.overflowing += 1;
        }
        if in_margin(write) {
            self.in_margin += 1;
        }
        match expected {
            Some(_) => {
                let old = write.old.as_ref().map(|old| secret("s", old));
                let entry = Registry::builtin().entry_for(&new);
                for tightening in tightenings(entry, old.as_ref(), &new, Ttls::default()) {
                    *self.refused.entry(tightening.path).or_default() += 1;
                }
                self.refused_patcher += 1;
            }
            None => self.admitted_both += 1,
        }
    }

    fn report(&self, seed: &str, cases: usize) -> String {
        let mut text = format!(
            "writer policy vs the webhook's writer check, {cases} generated writes (seed {seed}): \
             {} creates, {} updates; {} with kube-retention's stamp, {} with a duration past 292 \
             years ({} of them within 10 ms of it)\n",
            self.creates, self.updates, self.stamps, self.overflowing, self.in_margin
        );
        let _ = writeln!(text, "  annotations written: {:?}", self.present);
        let _ = writeln!(text, "  invalid values: {:?}", self.invalid);
        let _ = writeln!(text, "  tightenings found by the model: {:?}", self.refused);
        let _ = writeln!(
            text,
            "  the model refuses the patcher {} writes and admits {}; the policy agreed on each, \
             but for {} refusals the model admits and {} messages, of writes holding a duration \
             within 10 ms past 292 years",
            self.refused_patcher,
            self.admitted_both,
            self.overflow_refusals,
            self.overflow_messages
        );
        text
    }
}

/// The seed of this run's generation: `KUBE_RETENTION_WRITER_SEED` (32 hex digits) or a new one.
fn seed() -> Result<u128> {
    let text = match std::env::var("KUBE_RETENTION_WRITER_SEED") {
        Ok(text) => text,
        Err(_) => format!("{:032x}", rand_u128()),
    };
    let number = u128::from_str_radix(text.trim(), 16)
        .with_context(|| format!("KUBE_RETENTION_WRITER_SEED={text}: 32 hex digits"))?;
    Ok(number)
}

fn rand_u128() -> u128 {
    use std::hash::{BuildHasher, RandomState};
    let state = RandomState::new();
    (u128::from(state.hash_one(1u8)) << 64) | u128::from(state.hash_one(2u8))
}

fn cases() -> Result<usize> {
    match std::env::var("KUBE_RETENTION_WRITER_CASES") {
        Ok(text) => text
            .parse()
            .with_context(|| format!("KUBE_RETENTION_WRITER_CASES={text}: a number of writes")),
        Err(_) => Ok(SHORT),
    }
}

pub(super) async fn judged_as_the_webhook_judges(ns: TestNamespace) -> Result<()> {
    let client = ns.env.client.clone();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let saved_validating = validating.get(CONFIGURATION).await?;
    let saved_mutating = mutating.get(CONFIGURATION).await?;
    validating
        .delete(CONFIGURATION, &DeleteParams::default())
        .await?;
    mutating
        .delete(CONFIGURATION, &DeleteParams::default())
        .await?;
    let outcome = differential(&ns).await;
    let created = PostParams::default();
    validating
        .create(&created, &crate::schema::anew(saved_validating))
        .await
        .context("registering the validating webhooks again")?;
    mutating
        .create(&created, &crate::schema::anew(saved_mutating))
        .await
        .context("registering the mutating webhooks again")?;
    kube_retention_e2e::components::wait_for_admission(&ns.env.cluster, Duration::from_secs(30))?;
    outcome
}

async fn differential(ns: &TestNamespace) -> Result<()> {
    let namespace = ns.name.as_str();
    let (patcher, deleter) = (
        format!("patcher-{namespace}"),
        format!("deleter-{namespace}"),
    );
    for (role, user, verbs) in [
        ("patch", &patcher, "get, list, create, update, patch"),
        (
            "delete",
            &deleter,
            "get, list, create, update, patch, delete",
        ),
    ] {
        grant(ns, role, user, "", "secrets", verbs)?;
    }
    let admin = ns.env.impatient_client().await?;
    let writers = [
        (ns.env.client_as(&patcher).await?, false),
        (ns.env.client_as(&deleter).await?, true),
    ];
    for (writer, _) in &writers {
        wait_until_granted(writer, namespace).await?;
    }
    let seed = seed()?;
    let seed_text = format!("{seed:032x}");
    let cases = cases()?;
    // ChaCha takes 32 bytes: the seed's 16, twice.
    let bytes = [seed.to_be_bytes(), seed.to_be_bytes()].concat();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    let strategy = write();
    let mut writes = Vec::with_capacity(cases);
    for _ in 0..cases {
        let tree = strategy
            .new_tree(&mut runner)
            .map_err(|reason| anyhow::anyhow!("generating a write: {reason}"))?;
        writes.push(tree.current());
    }
    writes.extend(large_writes());
    let cases = writes.len();
    let mut tally = Tally::default();
    let answers: Vec<Result<(usize, bool, Option<String>)>> =
        futures::stream::iter(writes.iter().enumerate().flat_map(|(index, write)| {
            let admin = &admin;
            writers.iter().map(move |(writer, may_delete)| {
                let may_delete = *may_delete;
                async move {
                    let name = format!("w{index}-{}", if may_delete { "d" } else { "p" });
                    let answer = applied(admin, writer, namespace, &name, write).await?;
                    Ok((index, may_delete, answer))
                }
            })
        }))
        .buffer_unordered(CONCURRENT)
        .collect()
        .await;
    let mut differences = Vec::new();
    let expected: Vec<Option<String>> = writes
        .iter()
        .map(|write| webhook_refusal(namespace, write))
        .collect();
    for (write, expected) in writes.iter().zip(&expected) {
        tally.count(write, expected.as_deref());
    }
    for answer in answers {
        let (index, may_delete, answer) = answer?;
        let (write, expected) = (&writes[index], &expected[index]);
        match (may_delete, expected, answer) {
            (true, _, None) => {}
            (true, _, Some(said)) => {
                differences.push(format!(
                    "{write:?}: refused to a user who may delete: {said}"
                ));
            }
            (false, Some(expected), Some(said)) if *expected == said => {}
            (false, Some(_), Some(_)) if in_margin(write) => tally.overflow_messages += 1,
            (false, None, None) => {}
            (false, None, Some(_)) if in_margin(write) => tally.overflow_refusals += 1,
            (false, expected, said) => differences.push(format!(
                "{write:?}: the webhook's writer check says {expected:?}, the policy {said:?}"
            )),
        }
    }
    println!("{}", tally.report(&seed_text, cases));
    ensure!(
        differences.is_empty(),
        "{} of {cases} writes judged otherwise (KUBE_RETENTION_WRITER_SEED={seed_text} replays \
         them):\n{}",
        differences.len(),
        differences.join("\n")
    );
    // Not vacuous: the generation reaches both answers, and more than a few of each.
    ensure!(
        tally.refused_patcher * 5 >= cases && tally.admitted_both * 5 >= cases,
        "the generated writes are too one-sided: {} refused, {} admitted",
        tally.refused_patcher,
        tally.admitted_both
    );
    Ok(())
}

/// RBAC is read from a cache: a grant counts once the API server has it.
async fn wait_until_granted(writer: &Client, namespace: &str) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(writer.clone(), namespace);
    crate::workloads::eventually(
        Duration::from_secs(20),
        "the users' grants in force",
        || async { Ok(secrets.list(&Default::default()).await.is_ok()) },
    )
    .await
}
