//! The writer policy's CEL ([`kube_retention_common::writer_policy`]) says what the model says
//! ([`kube_retention_common::tightening`]): on generated old and new annotation sets, its
//! verdict for a writer who may and one who may not delete the object, and its refusal, word
//! for word, are the webhook's. Evaluated here with the CEL interpreter the controller uses,
//! every variable in order, on values whose durations and times that interpreter reads as Go
//! does (whole numbers of h, m, s; times in Z or with an offset). Go's own readings (fractions,
//! `µs`, 292 years) are the e2e differential test's, against the real API server.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value as CelValue};
use kube_retention_common::Registry;
use kube_retention_common::Ttls;
use kube_retention_common::annotations::{
    EXPIRES_AT, KEEP, SNOOZED_UNTIL, STAMPED, TTL, TTL_AFTER_FAILED, TTL_AFTER_FINISHED,
    TTL_AFTER_SUCCEEDED,
};
use kube_retention_common::field_error::FieldError;
use kube_retention_common::tightening::{NOT_YOURS, SET_THEIR_RETENTION, tightenings};
use kube_retention_common::writer_policy::{self, OWN_HOOK_GROUPS};
use proptest::prelude::*;
use regex::Regex;
use serde_json::{Value, json};

const NAMESPACE: &str = "team-a";

/// The policy's variables and its validation, compiled once.
struct Compiled {
    variables: Vec<(String, Option<Program>)>,
    validation: Program,
    message: Program,
}

impl Compiled {
    fn new() -> Self {
        let spec = writer_policy::policy_spec();
        let variables = spec
            .variables
            .unwrap_or_default()
            .into_iter()
            .map(|variable| {
                // The authorizer is the API server's: its answer is the test's input.
                let program = (variable.name != "mayDelete").then(|| {
                    Program::compile(&variable.expression)
                        .unwrap_or_else(|error| panic!("{}: {error}", variable.name))
                });
                (variable.name, program)
            })
            .collect();
        let validation = spec.validations.unwrap_or_default().remove(0);
        Self {
            variables,
            validation: Program::compile(&validation.expression).unwrap(),
            message: Program::compile(&validation.message_expression.unwrap()).unwrap(),
        }
    }

    /// The policy's answer to a write of `new` over `old`: `None` admitted, else its message.
    fn refusal(&self, old: Option<&Value>, new: &Value, may_delete: bool) -> Option<String> {
        let mut values: HashMap<Key, CelValue> = HashMap::new();
        let request = json!({
            "name": "c", "namespace": NAMESPACE,
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        });
        let mut root = Context::default().with_all();
        root.add_function("matches", matches);
        let object = kube_cel::cel::to_value(new).unwrap();
        let old_object = old.map_or(CelValue::Null, |old| kube_cel::cel::to_value(old).unwrap());
        let request = kube_cel::cel::to_value(&request).unwrap();
        let context = |values: &HashMap<Key, CelValue>| {
            let mut context = root.new_inner_scope();
            context.add_variable_from_value("object", object.clone());
            context.add_variable_from_value("oldObject", old_object.clone());
            context.add_variable_from_value("request", request.clone());
            context.add_variable_from_value(
                "variables",
                CelValue::Map(Map {
                    map: Arc::new(values.clone()),
                }),
            );
            context
        };
        for (name, program) in &self.variables {
            let value = match program {
                Some(program) => program
                    .execute(&context(&values))
                    .unwrap_or_else(|error| panic!("{name}: {error} ({old:?} → {new})")),
                None => CelValue::Bool(may_delete),
            };
            values.insert(Key::String(Arc::new(name.clone())), value);
        }
        let context = context(&values);
        match self.validation.execute(&context).unwrap() {
            CelValue::Bool(true) => None,
            CelValue::Bool(false) => match self.message.execute(&context).unwrap() {
                CelValue::String(message) => Some(message.to_string()),
                other => panic!("a message of {other:?}"),
            },
            other => panic!("a verdict of {other:?}"),
        }
    }
}

/// CEL's `matches`, each pattern compiled once (as the API server compiles a literal one).
fn matches(This(text): This<Arc<String>>, pattern: Arc<String>) -> bool {
    thread_local! {
        static COMPILED: std::cell::RefCell<HashMap<String, Regex>> = Default::default();
    }
    COMPILED.with(|compiled| {
        compiled
            .borrow_mut()
            .entry(pattern.to_string())
            .or_insert_with(|| Regex::new(&pattern).unwrap())
            .is_match(&text)
    })
}

fn config_map(annotations: &BTreeMap<String, String>) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": NAMESPACE, "annotations": annotations}})
}

/// The webhook's refusal of a write by someone who may not delete the object: each tightened
/// field once, in the model's order.
fn webhook_refusal(old: Option<&Value>, new: &Value) -> Option<String> {
    let entry = Registry::builtin().entry_for(new);
    let mut refusals: Vec<FieldError> = Vec::new();
    for tightening in tightenings(entry, old, new, Ttls::default()) {
        if refusals
            .iter()
            .any(|refusal| refusal.path == tightening.path)
        {
            continue;
        }
        refusals.push(FieldError {
            path: tightening.path,
            value: tightening.value,
            rule: format!(
                "you may not delete configmaps in namespace {NAMESPACE}, so you may not {SET_THEIR_RETENTION}"
            ),
        });
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

/// Durations the interpreter here reads as Go does, some past Go's 292 years or past the
/// annotations' 64 characters, and some no grammar accepts.
fn duration() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "0".to_owned(),
        "-0s".to_owned(),
        "+1h".to_owned(),
        "1s".to_owned(),
        "59s".to_owned(),
        "30m".to_owned(),
        "1h".to_owned(),
        "2h".to_owned(),
        "90m".to_owned(),
        "1h30m".to_owned(),
        "24h".to_owned(),
        "100h".to_owned(),
        "2562048h".to_owned(),
        "99999999999999999999h".to_owned(),
        "1s".repeat(32),
        "1s".repeat(33),
        "1d".to_owned(),
        "soon".to_owned(),
        "-1h".to_owned(),
        String::new(),
        "1h ".to_owned(),
        "h".to_owned(),
    ])
}

/// Times the interpreter here reads as Go does (the same instants spelled differently among
/// them), and some the grammar refuses.
fn time() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "2026-12-01T00:00:00Z",
        "2026-12-01T02:00:00+02:00",
        "2026-11-30T00:00:00Z",
        "2026-11-30T12:00:00.5Z",
        "2027-01-01T00:00:00-01:00",
        "2026-12-01 00:00:00Z",
        "2026-02-30T00:00:00Z",
        "tomorrow",
    ])
    .prop_map(str::to_owned)
}

/// One annotation set: any of the retention annotations, each with a likely value; `stamped`
/// often equal to `expires-at` (kube-retention's stamp).
fn annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
    let keep = prop::sample::select(vec!["true", "false", "yes", "TRUE"]).prop_map(str::to_owned);
    (
        (
            prop::option::weighted(0.4, duration()),
            prop::option::weighted(0.3, duration()),
            prop::option::weighted(0.3, duration()),
            prop::option::weighted(0.4, duration()),
        ),
        (
            prop::option::weighted(0.4, time()),
            prop::option::weighted(0.3, prop_oneof![Just(None), time().prop_map(Some)]),
            prop::option::weighted(0.3, time()),
            prop::option::weighted(0.3, keep),
        ),
    )
        .prop_map(
            |((ttl, succeeded, failed, finished), (expires, stamped, snoozed, keep))| {
                let mut set = BTreeMap::new();
                let mut put = |key: &str, value: Option<String>| {
                    if let Some(value) = value {
                        set.insert(key.to_owned(), value);
                    }
                };
                put(TTL, ttl);
                put(TTL_AFTER_SUCCEEDED, succeeded);
                put(TTL_AFTER_FAILED, failed);
                put(TTL_AFTER_FINISHED, finished);
                // `Some(None)`: the stamp of this expires-at.
                let stamped = stamped.map(|stamped| stamped.or_else(|| expires.clone()));
                put(EXPIRES_AT, expires);
                put(STAMPED, stamped.flatten());
                put(SNOOZED_UNTIL, snoozed);
                put(KEEP, keep);
                set
            },
        )
}

type Annotations = BTreeMap<String, String>;

/// A write: a new annotation set, over none (a create), the same set changed, or another.
fn write() -> impl Strategy<Value = (Option<Annotations>, Annotations)> {
    (prop::option::weighted(0.8, annotations()), annotations()).prop_flat_map(|(old, new)| {
        let changed = old.clone().map(|old| {
            (Just(old.clone()), annotations()).prop_map(|(mut base, other)| {
                // One or two annotations of `other` written over `base`, or taken away.
                for (key, value) in other.into_iter().take(2) {
                    if value.len() % 3 == 0 {
                        base.remove(&key);
                    } else {
                        base.insert(key, value);
                    }
                }
                base
            })
        });
        match changed {
            Some(changed) => prop_oneof![
                (Just(old.clone()), changed).prop_map(|(old, new)| (old, new)),
                Just((old, new)),
            ]
            .boxed(),
            None => Just((None, new)).boxed(),
        }
    })
}

thread_local! {
    static COMPILED: Compiled = Compiled::new();
}

proptest! {
    // 400 writes (about 20 s in a debug build: every variable is a program here); the e2e
    // differential test runs hundreds more against the real API server, thousands in its long
    // form.
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_policy_refuses_what_the_webhook_refuses_in_its_words((old, new) in write()) {
        let new = config_map(&new);
        let old = old.as_ref().map(config_map);
        let expected = webhook_refusal(old.as_ref(), &new);
        COMPILED.with(|compiled| {
            prop_assert_eq!(compiled.refusal(old.as_ref(), &new, false), expected);
            prop_assert_eq!(compiled.refusal(old.as_ref(), &new, true), None);
            Ok(())
        })?;
    }
}

#[test]
fn the_kinds_it_sees_carry_no_retention_fields() {
    // The policy restates the annotations' rule only: every kind with fields has a hook of its
    // own, and `--kind` adds kinds without any.
    for (_, entry) in Registry::builtin().iter() {
        if !OWN_HOOK_GROUPS.contains(&entry.resource.group.as_str()) {
            assert_eq!(
                entry.fields,
                Default::default(),
                "{}: a kind the writer policy sees has retention fields",
                entry.resource
            );
        }
    }
    for spec in [
        "tekton.dev/v1/PipelineRun:tekton.dev/pipeline=5,3",
        "/v1/ConfigMap",
    ] {
        let entry: kube_retention_common::Entry = spec.parse().unwrap();
        assert_eq!(entry.fields, Default::default(), "--kind {spec}");
    }
}

#[test]
fn the_binding_leaves_out_what_the_webhook_never_sees() {
    let binding = writer_policy::binding(&["kube-system", "tenant-free"], &[("batch", "jobs")]);
    let rendered = serde_json::to_value(&binding).unwrap();
    assert_eq!(
        rendered["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["kube-system", "tenant-free"])
    );
    assert_eq!(
        rendered["spec"]["matchResources"]["excludeResourceRules"][0]["resources"],
        json!(["jobs"])
    );
    assert_eq!(rendered["spec"]["validationActions"], json!(["Deny"]));
}

/// A write's old and new annotations, and its refusal to someone who may not delete the object.
type Case = (
    Option<BTreeMap<String, String>>,
    BTreeMap<String, String>,
    Option<String>,
);

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

#[test]
fn listed_writes_are_refused_naming_each_annotation_once() {
    let lacking = format!(
        "you may not delete configmaps in namespace {NAMESPACE}, so you may not set their retention"
    );
    let stamp = "2026-12-01T00:00:00Z";
    let long = format!("{}\"\n", "x".repeat(200));
    let cases: [Case; 10] = [
        (
            None,
            set(&[(TTL, "2s")]),
            Some(format!(
                "metadata.annotations[retention.dev/ttl]: \"2s\" {lacking}"
            )),
        ),
        // Taking the specific TTL away lets the shorter general one apply.
        (
            Some(set(&[
                (TTL_AFTER_SUCCEEDED, "10h"),
                (TTL_AFTER_FINISHED, "1h"),
            ])),
            set(&[(TTL_AFTER_FINISHED, "1h")]),
            Some(format!(
                "metadata.annotations[retention.dev/ttl-after-finished]: \"1h\" {lacking}"
            )),
        ),
        // ttl-after-finished tightens both outcomes: named once.
        (
            Some(set(&[(TTL_AFTER_FINISHED, "10h")])),
            set(&[(TTL_AFTER_FINISHED, "1h")]),
            Some(format!(
                "metadata.annotations[retention.dev/ttl-after-finished]: \"1h\" {lacking}"
            )),
        ),
        (
            Some(set(&[(KEEP, "true"), (TTL, "1h")])),
            set(&[(TTL, "1h")]),
            Some(format!(
                "metadata.annotations[retention.dev/keep]: null {lacking}"
            )),
        ),
        // Without settings of its own, the object is a policy's to delete.
        (Some(set(&[(KEEP, "true")])), set(&[]), None),
        // kube-retention's stamp is not the writer's, however early.
        (None, set(&[(EXPIRES_AT, stamp), (STAMPED, stamp)]), None),
        (
            Some(set(&[(SNOOZED_UNTIL, "2027-01-01T00:00:00Z"), (TTL, "2h")])),
            set(&[(TTL, "1h"), (KEEP, "no \"way\"\n")]),
            Some(format!(
                "2 retention settings are not yours to make: \
                 metadata.annotations[retention.dev/ttl]: \"1h\" {lacking}; \
                 metadata.annotations[retention.dev/snoozed-until]: null {lacking}"
            )),
        ),
        (
            Some(set(&[(KEEP, "true"), (TTL, "1h")])),
            set(&[(TTL, "1h"), (KEEP, "no \"way\"\n")]),
            Some(format!(
                "metadata.annotations[retention.dev/keep]: \"no \\\"way\\\"\\n\" {lacking}"
            )),
        ),
        // A success TTL past Go's 292 years is no setting: the general one applies, and is
        // new (the e2e differential test found the policy once read it as the setting).
        (
            Some(set(&[
                (TTL_AFTER_FAILED, "1ns"),
                (TTL_AFTER_SUCCEEDED, "99999999999999999999h"),
            ])),
            set(&[
                (TTL_AFTER_FAILED, "1ns"),
                (TTL_AFTER_SUCCEEDED, "99999999999999999999h"),
                (TTL_AFTER_FINISHED, "60s"),
            ]),
            Some(format!(
                "metadata.annotations[retention.dev/ttl-after-finished]: \"60s\" {lacking}"
            )),
        ),
        // A long value is cut as every denial cuts it.
        (
            Some(set(&[(KEEP, "true"), (TTL, "1h")])),
            set(&[(TTL, "1h"), (KEEP, &long)]),
            Some(format!(
                "metadata.annotations[retention.dev/keep]: \"{}… {lacking}",
                "x".repeat(79)
            )),
        ),
    ];
    COMPILED.with(|compiled| {
        for (old, new, expected) in cases {
            let (old, new) = (old.as_ref().map(config_map), config_map(&new));
            assert_eq!(
                webhook_refusal(old.as_ref(), &new),
                expected,
                "the webhook, {old:?} → {new}"
            );
            assert_eq!(
                compiled.refusal(old.as_ref(), &new, false),
                expected,
                "the policy, {old:?} → {new}"
            );
            assert_eq!(compiled.refusal(old.as_ref(), &new, true), None);
        }
    });
}
