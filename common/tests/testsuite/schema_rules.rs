//! The CRDs' rules say what the Rust checks say: on generated strings near each grammar's edges
//! (signs, dots, units, lengths around 63 and 253, reserved words), the patterns the CRDs'
//! `x-kubernetes-validations` match with accept exactly what the check they restate accepts.
//! The API server applies them (e2e `with_the_webhook_configurations_removed_…`).

use kube_retention_common::api::{PolicyRules, ResourceRef};
use kube_retention_common::cleaner;
use kube_retention_common::duration::{self, DurationError};
use kube_retention_common::policies::Rules;
use kube_retention_common::schema_rules::{
    API_VERSION_PATTERN, DURATION_PATTERN, IDENTIFIER_PATTERN, KIND_PATTERN, LABEL_KEY_PATTERN,
    NEGATIVE_ZERO_PATTERN,
};
use kube_retention_common::selector::check_label_key;
use proptest::prelude::*;
use regex::Regex;
use serde_json::json;

fn pattern(source: &str) -> Regex {
    Regex::new(source).unwrap()
}

/// The CRDs' two duration rules: Go's grammar, and no sign `-` but on zero.
fn duration_rules(text: &str) -> bool {
    pattern(DURATION_PATTERN).is_match(text)
        && (!text.starts_with('-') || pattern(NEGATIVE_ZERO_PATTERN).is_match(text))
}

/// Strings near Go's duration grammar: signs, digits, dots, real and unknown units, in runs.
fn duration_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[0-9]{0,3}",
        Just(".".to_owned()),
        "[0-9]{0,2}\\.[0-9]{0,2}",
        prop::sample::select(vec![
            "ns", "us", "µs", "μs", "ms", "s", "m", "h", "d", "w", "x", ""
        ])
        .prop_map(str::to_owned),
        "[0]{1,3}",
        "[0-9]{18,22}",
    ];
    (
        prop::sample::select(vec!["", "", "+", "-", "--", " "]),
        prop::collection::vec(piece, 0..7),
    )
        .prop_map(|(sign, pieces)| format!("{sign}{}", pieces.concat()))
}

/// Label keys near their grammar's edges: prefixes of dotted parts, names around 63.
fn label_key_like() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        "[a-z0-9]{1,3}",
        "[a-z0-9-]{1,4}",
        "[A-Z_.]{1,2}",
        "[a-z]{60,70}"
    ];
    let prefix = prop::collection::vec(part, 1..6).prop_map(|parts| parts.join("."));
    let name = prop_oneof![
        "[A-Za-z0-9]{1,3}",
        "[-A-Za-z0-9_.]{1,6}",
        "[a-z][-a-z0-9_.]{59,63}[a-z]",
        Just(String::new()),
    ];
    (prop::option::of(prefix), name, any::<bool>()).prop_map(|(prefix, name, slashes)| match prefix
    {
        Some(prefix) if slashes => format!("{prefix}/{name}/x"),
        Some(prefix) => format!("{prefix}/{name}"),
        None => name,
    })
}

fn policy(resource: ResourceRef) -> PolicyRules {
    PolicyRules {
        resources: vec![resource],
        ttl: Some("1h".to_owned()),
        ..PolicyRules::default()
    }
}

fn policy_errors_at(resource: ResourceRef, path: &str) -> bool {
    let (_, errors) = Rules::read(&policy(resource), None);
    errors.iter().any(|error| error.path == path)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// A duration matches the pattern exactly when Go's grammar accepts it, non-negative; one
    /// too long for Go's nanoseconds is the webhook's to refuse.
    #[test]
    fn the_duration_pattern_is_the_duration_grammar(text in duration_like()) {
        let matched = duration_rules(&text);
        match duration::parse(&text) {
            Ok(_) => prop_assert!(matched, "{text:?} parses, the pattern refuses it"),
            Err(DurationError::Overflow) => {}
            Err(DurationError::Negative) => prop_assert!(
                pattern(DURATION_PATTERN).is_match(&text) && !matched,
                "{text:?}: the grammar's rule must accept it and the sign's refuse it"
            ),
            Err(error) => prop_assert!(!matched, "{text:?} matches, the parser says {error}"),
        }
    }

    #[test]
    fn the_label_key_pattern_is_the_label_key_check(key in label_key_like()) {
        let prefix_fits = key.find('/').is_none_or(|at| at <= 253);
        let matched = pattern(LABEL_KEY_PATTERN).is_match(&key) && prefix_fits;
        prop_assert_eq!(matched, check_label_key(&key).is_ok(), "{:?}", key);
    }

    #[test]
    fn the_api_version_pattern_is_the_policy_check(
        api_version in "[a-z./]{0,3}(/)?[a-z0-9]{0,3}(/[a-z0-9]{0,2})?",
    ) {
        let matched = pattern(API_VERSION_PATTERN).is_match(&api_version);
        let resource = ResourceRef { api_version, kind: "Job".to_owned() };
        let refused = policy_errors_at(resource.clone(), "spec.resources[0].apiVersion");
        prop_assert_eq!(matched, !refused, "{:?}", resource.api_version);
    }

    #[test]
    fn the_kind_pattern_is_the_policy_check(kind in "[A-Za-z0-9 ._/-]{0,6}") {
        let matched = pattern(KIND_PATTERN).is_match(&kind);
        let resource = ResourceRef { api_version: "batch/v1".to_owned(), kind };
        let refused = policy_errors_at(resource.clone(), "spec.resources[0].kind");
        prop_assert_eq!(matched, !refused, "{:?}", resource.kind);
    }

    /// A target's name: the pattern and the reserved words, against the Cleaner's check.
    #[test]
    fn a_target_name_is_refused_by_the_schema_as_by_the_check(
        name in prop_oneof![
            "[A-Za-z0-9_$-]{0,5}",
            prop::sample::select(cleaner::reserved_names().collect::<Vec<_>>())
                .prop_map(str::to_owned),
        ],
    ) {
        let reserved = cleaner::reserved_names().any(|word| word == name);
        let matched = pattern(IDENTIFIER_PATTERN).is_match(&name) && !reserved;
        let spec = json!({
            "targets": [{"name": name, "reference": {"version": "v1", "kind": "ConfigMap"}}],
            "conditions": ["true"],
        });
        let refused = cleaner::errors(&spec)
            .iter()
            .any(|error| error.path == "spec.targets[0].name");
        prop_assert_eq!(matched, !refused, "{:?}", name);
    }
}

/// The edges the generators may miss, each said once.
#[test]
fn the_duration_pattern_on_go_s_own_examples() {
    let matches = duration_rules;
    for accepted in [
        "0", "-0", "+0", "0s", "-0s", "1h30m", ".5h", "5.h", "1µs", "1μs", "+1s",
    ] {
        assert!(matches(accepted), "{accepted}");
        assert!(duration::parse(accepted).is_ok(), "{accepted}");
    }
    for refused in [
        "", "1", "1d", "-1s", "1h-1m", ".", ".s", "1..5s", " 1s", "1s ", "1hh",
    ] {
        assert!(!matches(refused), "{refused}");
        assert!(duration::parse(refused).is_err(), "{refused}");
    }
}
