//! The writer check for annotated objects, made by the API server itself: a
//! ValidatingAdmissionPolicy whose CEL restates [`crate::tightening`] for the `retention.dev/*`
//! annotations and asks the API server's own authorizer whether the requester may `delete` the
//! object, so that a webhook that is down, shed or killed (its hook for these objects has
//! `failurePolicy: Ignore`, for every workload's sake) no longer admits a TTL unchecked.
//!
//! The rule is said once. The annotations' names come from [`crate::annotations`], their
//! grammars from [`crate::schema_rules`] (Go's durations, no sign but on zero) and
//! [`crate::rfc3339`], the wording of a refusal from [`crate::tightening`]; `make
//! admission-policy` writes this module's objects to deploy/ and the chart, and a test fails while
//! the checked-in YAML is stale. What counts as tightening, on the annotations alone (the kinds
//! this policy sees carry no retention fields: the ones that do are Shipwright's and
//! OpenShift-style builds, left to their own hook, which fails closed; `--kind` adds kinds
//! without fields):
//!
//! - a TTL (`ttl`; `ttl-after-succeeded`, else `ttl-after-finished`; `ttl-after-failed`, else
//!   `ttl-after-finished`) set where none was, or shorter, compared as effective values;
//! - an `expires-at` of the writer's own (not kube-retention's stamp, an `expires-at` equal to
//!   `stamped`), new or earlier;
//! - a `snoozed-until` taken away or brought forward;
//! - `keep: "true"` taken away from an object that then deletes itself.
//!
//! Invalid values are the validator's to deny: like the model, the policy reads a value only
//! when its grammar's pattern matches (a duration of at most
//! [`crate::annotations::DURATION_CHARS`] characters, a time of [`crate::rfc3339::PATTERN`]),
//! and otherwise as absent, so a parse error never decides; and a duration past Go's 292 years,
//! which the model calls invalid and CEL's `duration()` fails on, reads as absent too, told by
//! a floating-point sum of its components ([`RANGE_BOUND`]). One difference is left: a duration
//! past Go's largest by less than that sum's margin (a part in 10^12, about 10 ms) is read with
//! `duration()`, which fails, and the failure refuses the write (`failurePolicy: Fail`) from a
//! writer who may not delete the object, where the model would call the value invalid (and the
//! webhook's validator refuses a new one from anyone). It fails closed: an error in any
//! expression the verdict needs refuses, and a writer who may delete is admitted all the same
//! (`!tightened || mayDelete` holds with the authorizer's yes whatever `tightened` is).
//!
//! The `retention.dev/managed` label is not checked: it sets nothing. The controller deletes an
//! object on its settings or a policy's, never because of the label; the label only lets it see
//! the settings (the kinds discovery adds are watched through it alone, which is why the
//! reproduction added it with the TTL). Every setting is checked when it is written, so the
//! label can only bring the controller settings a writer who may delete the object wrote, and
//! taking it away only hides them. What no check sees is a setting written where neither the
//! webhook nor this policy looks: the namespaces both leave out (`kube-system` and
//! kube-retention's own, and `webhook.excludedNamespaces`), which the binding mirrors.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use crate::annotations::DURATION_CHARS;
use crate::annotations::{
    EXPIRES_AT, KEEP, PREFIX, SNOOZED_UNTIL, STAMPED, TTL, TTL_AFTER_FAILED, TTL_AFTER_FINISHED,
    TTL_AFTER_SUCCEEDED, path,
};
use crate::duration::{MAX_NANOS, UNITS};
use crate::rfc3339;
use crate::schema_rules::{
    DURATION_COMPONENT_PATTERN, DURATION_PATTERN, NEGATIVE_ZERO_PATTERN, matches,
};
use crate::tightening::{NOT_YOURS, SET_THEIR_RETENTION};

/// The policy's name, and its binding's.
pub const NAME: &str = "kube-retention-writers";

/// The API groups whose kinds carry retention fields, each sent to a hook of its own that fails
/// closed (Shipwright's and OpenShift-style builds, kube-retention's own policies and Cleaners):
/// the annotated objects' hook and this policy leave them out.
pub const OWN_HOOK_GROUPS: [&str; 3] = ["shipwright.io", "build.openshift.io", "retention.dev"];

/// The label every namespace carries its name in, for excluding namespaces by name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The duration annotations, then the times, each with the stem of its variables' names.
const DURATIONS: [(&str, &str); 4] = [
    (TTL, "Ttl"),
    (TTL_AFTER_SUCCEEDED, "TtlAfterSucceeded"),
    (TTL_AFTER_FAILED, "TtlAfterFailed"),
    (TTL_AFTER_FINISHED, "TtlAfterFinished"),
];
const TIMES: [(&str, &str); 3] = [
    (EXPIRES_AT, "ExpiresAt"),
    (STAMPED, "Stamped"),
    (SNOOZED_UNTIL, "SnoozedUntil"),
];

/// The version of an object a variable reads.
#[derive(Debug, Clone, Copy)]
enum Side {
    New,
    Old,
}

impl Side {
    const BOTH: [Self; 2] = [Self::New, Self::Old];

    fn name(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Old => "old",
        }
    }

    /// `variables.newTtl`, `variables.oldKeep`.
    fn var(self, stem: &str) -> String {
        format!("variables.{}{stem}", self.name())
    }
}

/// The ValidatingAdmissionPolicy, cluster-scoped, named [`NAME`].
pub fn policy() -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(policy_spec()),
        status: None,
    }
}

/// The policy's spec: what it matches, its variables, its one validation.
pub fn policy_spec() -> ValidatingAdmissionPolicySpec {
    ValidatingAdmissionPolicySpec {
        // An expression that cannot be evaluated refuses: the check must not fail open.
        failure_policy: Some("Fail".to_owned()),
        match_constraints: Some(MatchResources {
            resource_rules: Some(vec![NamedRuleWithOperations {
                api_groups: Some(vec!["*".to_owned()]),
                api_versions: Some(vec!["*".to_owned()]),
                resources: Some(vec!["*".to_owned()]),
                operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
                scope: Some("*".to_owned()),
                ..NamedRuleWithOperations::default()
            }]),
            ..MatchResources::default()
        }),
        match_conditions: Some(match_conditions()),
        variables: Some(variables()),
        validations: Some(vec![Validation {
            expression: "!variables.tightened || variables.mayDelete".to_owned(),
            message_expression: Some("variables.refusal".to_owned()),
            message: Some(format!(
                "{NOT_YOURS}: you may not delete this object, so you may not give it a shorter \
                 TTL or an earlier expires-at, nor take its keep or snoozed-until away"
            )),
            reason: Some("Forbidden".to_owned()),
        }]),
        ..ValidatingAdmissionPolicySpec::default()
    }
}

/// The policy's binding: every namespace but `excluded_namespaces`, every resource but
/// `disabled` (group, plural) pairs, refusals denied.
pub fn binding(
    excluded_namespaces: &[&str],
    disabled: &[(&str, &str)],
) -> ValidatingAdmissionPolicyBinding {
    let excluded = (!disabled.is_empty()).then(|| {
        disabled
            .iter()
            .map(|(group, resource)| NamedRuleWithOperations {
                api_groups: Some(vec![(*group).to_owned()]),
                api_versions: Some(vec!["*".to_owned()]),
                resources: Some(vec![(*resource).to_owned()]),
                operations: Some(vec!["*".to_owned()]),
                scope: Some("*".to_owned()),
                ..NamedRuleWithOperations::default()
            })
            .collect()
    });
    ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(NAME.to_owned()),
            validation_actions: Some(vec!["Deny".to_owned()]),
            match_resources: Some(MatchResources {
                namespace_selector: Some(LabelSelector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: NAMESPACE_NAME_LABEL.to_owned(),
                        operator: "NotIn".to_owned(),
                        values: Some(
                            excluded_namespaces
                                .iter()
                                .map(|name| (*name).to_owned())
                                .collect(),
                        ),
                    }]),
                    match_labels: None,
                }),
                exclude_resource_rules: excluded,
                ..MatchResources::default()
            }),
            param_ref: None,
        }),
    }
}

/// The annotated objects' hook's conditions: not a kind with a hook of its own, and a
/// `retention.dev/` annotation on the new or the old version (taking `keep` or a snooze away is
/// a tightening too).
pub fn match_conditions() -> Vec<MatchCondition> {
    let groups: Vec<String> = OWN_HOOK_GROUPS
        .iter()
        .map(|group| format!("'{group}'"))
        .collect();
    let prefixed = |object: &str| {
        format!(
            "has({object}.metadata.annotations) &&\n\
             {object}.metadata.annotations.exists(k, k.startsWith('{PREFIX}'))"
        )
    };
    vec![
        MatchCondition {
            name: "not-a-retention-kind".to_owned(),
            expression: format!("!(request.resource.group in [{}])", groups.join(", ")),
        },
        MatchCondition {
            name: "has-retention-annotations".to_owned(),
            expression: format!(
                "({}) ||\n(oldObject != null && {})",
                prefixed("object"),
                prefixed("oldObject")
            ),
        },
    ]
}

/// Every variable, each using only those before it. The API server evaluates a variable when
/// an expression first needs it: the authorizer is asked only about a write that tightens.
fn variables() -> Vec<Variable> {
    let mut variables = Vec::new();
    let mut add = |name: String, expression: String| {
        variables.push(Variable { name, expression });
    };
    add(
        "newAnnotations".to_owned(),
        "has(object.metadata.annotations) ? object.metadata.annotations : {}".to_owned(),
    );
    add(
        "oldAnnotations".to_owned(),
        "oldObject != null && has(oldObject.metadata.annotations)\n\
         ? oldObject.metadata.annotations : {}"
            .to_owned(),
    );
    for side in Side::BOTH {
        for (key, stem) in DURATIONS {
            let written = format!("{stem}Written");
            add(
                format!("{}{written}", side.name()),
                read(side, key, DURATION_CHARS, &duration_valid),
            );
            add(
                format!("{}{stem}", side.name()),
                in_range(&side.var(&written)),
            );
        }
        for (key, stem) in TIMES {
            add(
                format!("{}{stem}", side.name()),
                read(side, key, rfc3339::MAX_CHARS, &time_valid),
            );
        }
        let annotations = side.var("Annotations");
        add(
            format!("{}Keep", side.name()),
            format!("'{KEEP}' in {annotations} && {annotations}['{KEEP}'] == 'true'"),
        );
    }
    for side in Side::BOTH {
        for (outcome, specific) in [
            ("Succeeded", "TtlAfterSucceeded"),
            ("Failed", "TtlAfterFailed"),
        ] {
            let specific = side.var(specific);
            add(
                format!("{}{outcome}", side.name()),
                format!(
                    "{specific} != '' ? {specific} : {}",
                    side.var("TtlAfterFinished")
                ),
            );
        }
        let (expires, stamped) = (side.var("ExpiresAt"), side.var("Stamped"));
        add(
            format!("{}OwnExpiresAt", side.name()),
            format!(
                "{expires} != '' && !({stamped} != '' &&\n\
                 ({stamped} == {expires} || timestamp({stamped}) == timestamp({expires})))\n\
                 ? {expires} : ''"
            ),
        );
    }
    for (name, expression) in tightenings() {
        add(name.to_owned(), expression);
    }
    add(
        "mayDelete".to_owned(),
        "authorizer.group(request.resource.group).resource(request.resource.resource)\n\
         .namespace(request.namespace).name(request.name).check('delete').allowed()"
            .to_owned(),
    );
    add("lacking".to_owned(), lacking());
    add("quoted".to_owned(), quoted());
    add("rendered".to_owned(), rendered());
    add("refusals".to_owned(), refusals());
    add(
        "refusal".to_owned(),
        format!(
            "size(variables.refusals) == 1 ? variables.refusals[0]\n\
             : string(size(variables.refusals)) + ' {NOT_YOURS}: ' + variables.refusals.join('; ')"
        ),
    );
    variables
}

/// The annotation `key` of `side` where it has at most `chars` characters and `valid` says its
/// value is of its grammar, else `''` (which no grammar accepts: absent and invalid read alike,
/// as in the model). The length is asked first: a pattern costs the API server in proportion
/// to the string it reads, and annotations may hold 256 KiB.
fn read(side: Side, key: &str, chars: usize, valid: &dyn Fn(&str) -> String) -> String {
    let value = format!("{}['{key}']", side.var("Annotations"));
    format!(
        "'{key}' in {annotations} && size({value}) <= {chars} &&\n{}\n? {value} : ''",
        valid(&value),
        annotations = side.var("Annotations"),
    )
}

/// A duration of Go's grammar in `written`, where it is within Go's 292 years, else `''`: the
/// model calls a longer one invalid, and CEL's `duration()` fails on it. Its length is summed
/// in floating point first, one component at a time (in nanoseconds, to within a part in 10^14
/// for the 64 characters a duration may have); past [`RANGE_BOUND`] it is out of range without
/// asking `duration()`. Within it `duration()` is asked, and fails only for a duration less
/// than a part in 10^12 (10 ms) past Go's largest, where the failure refuses the write
/// (`failurePolicy: Fail`) from a writer who may not delete the object.
fn in_range(written: &str) -> String {
    let units: Vec<String> = UNITS
        .iter()
        .map(|(unit, nanos)| format!("'{unit}': {nanos}.0"))
        .collect();
    format!(
        "{written} != '' &&\n\
         ([0.0] + {written}.findAll(r'{DURATION_COMPONENT_PATTERN}')\n\
         .map(c, double(c.find(r'{NUMBER}')) *\n\
         {{{units}}}[c.substring(size(c.find(r'{NUMBER}')))])).sum() <= {RANGE_BOUND:e} &&\n\
         duration({written}) >= duration('0s')\n\
         ? {written} : ''",
        units = units.join(", "),
    )
}

/// The number that begins a duration's component.
const NUMBER: &str = r"^[0-9]*(\.[0-9]*)?";

/// Go's largest duration, in nanoseconds, and a part in 10^12 more: a floating-point sum of a
/// duration's components past it is past Go's largest.
#[allow(clippy::cast_precision_loss)] // 2^63 - 1 as the nearest double, then a margin
pub const RANGE_BOUND: f64 = MAX_NANOS as f64 * (1.0 + 1e-12);

/// Go's duration grammar, and no sign `-` but on zero ([`crate::duration::parse`]).
fn duration_valid(value: &str) -> String {
    format!(
        "{} &&\n(!{value}.startsWith('-') || {})",
        matches(value, DURATION_PATTERN),
        matches(value, NEGATIVE_ZERO_PATTERN)
    )
}

/// [`rfc3339::PATTERN`].
fn time_valid(value: &str) -> String {
    matches(value, rfc3339::PATTERN)
}

/// The tightenings, each a variable, then `tightened`: any of them.
fn tightenings() -> Vec<(&'static str, String)> {
    let new = |stem: &str| Side::New.var(stem);
    let old = |stem: &str| Side::Old.var(stem);
    // Set where there was none, or smaller; equal strings are equal values, read no further.
    let smaller = |stem: &str, read: &str| {
        let (new, old) = (new(stem), old(stem));
        format!("{new} != '' && {new} != {old} &&\n({old} == '' || {read}({new}) < {read}({old}))")
    };
    let deletes_itself = ["Ttl", "OwnExpiresAt", "Succeeded", "Failed"]
        .map(|stem| format!("{} != ''", new(stem)))
        .join(" || ");
    let found = vec![
        (
            "keepTightened",
            format!("{} && !{} &&\n({deletes_itself})", old("Keep"), new("Keep")),
        ),
        ("ttlTightened", smaller("Ttl", "duration")),
        ("succeededTightened", smaller("Succeeded", "duration")),
        ("failedTightened", smaller("Failed", "duration")),
        ("expiresAtTightened", smaller("OwnExpiresAt", "timestamp")),
        (
            "snoozedUntilTightened",
            format!(
                "{old} != '' &&\n({new} == '' || ({new} != {old} && timestamp({new}) < timestamp({old})))",
                old = old("SnoozedUntil"),
                new = new("SnoozedUntil"),
            ),
        ),
    ];
    let any = found
        .iter()
        .map(|(name, _)| format!("variables.{name}"))
        .collect::<Vec<_>>()
        .join(" ||\n");
    let mut all = found;
    all.push(("tightened", any));
    all
}

/// "you may not delete deployments.apps in namespace team-a, so you may not set their
/// retention", as the webhook says it.
fn lacking() -> String {
    format!(
        "'you may not delete ' + request.resource.resource +\n\
         (request.resource.group == '' ? '' : '.' + request.resource.group) +\n\
         (request.namespace == '' ? ' cluster-wide' : ' in namespace ' + request.namespace) +\n\
         ', so you may not {SET_THEIR_RETENTION}'"
    )
}

/// The annotations a refusal can name.
const NAMED: [&str; 7] = [
    KEEP,
    TTL,
    TTL_AFTER_SUCCEEDED,
    TTL_AFTER_FAILED,
    TTL_AFTER_FINISHED,
    EXPIRES_AT,
    SNOOZED_UNTIL,
];

/// Each annotation a refusal can name, by key: its new value as a JSON string (`''` where it
/// was taken away), of no more than its first characters a refusal shows (escaping only
/// lengthens, so the cut [`rendered`] makes is the same, and the cost is bounded whatever the
/// value's length). Backslashes, quotes and the line breaks are escaped as JSON escapes them (a
/// message must be one line); other control characters are left as they are.
fn quoted() -> String {
    let max = crate::field_error::RENDERED_CHARS;
    let entries: Vec<String> = NAMED
        .iter()
        .map(|key| {
            let whole = format!("variables.newAnnotations['{key}']");
            let value = format!("(size({whole}) <= {max} ? {whole} : {whole}.substring(0, {max}))");
            let escaped = [
                (r"'\\'", r"'\\\\'"),
                (r#"'"'"#, r#"'\\"'"#),
                (r"'\n'", r"'\\n'"),
                (r"'\r'", r"'\\r'"),
                (r"'\t'", r"'\\t'"),
            ]
            .iter()
            .fold(value, |text, (from, to)| {
                format!("{text}.replace({from}, {to})")
            });
            format!(
                "'{key}': '{key}' in variables.newAnnotations\n\
                 ? '\"' + {escaped} + (size({whole}) <= {max} ? '\"' : '') : ''"
            )
        })
        .collect();
    format!("{{\n{}\n}}", entries.join(",\n"))
}

/// Each annotation a refusal can name, by key: its new value as JSON, cut short as
/// [`crate::field_error::render`] cuts it, `null` where it was taken away.
fn rendered() -> String {
    let max = crate::field_error::RENDERED_CHARS;
    let entries: Vec<String> = NAMED
        .iter()
        .map(|key| {
            let quoted = format!("variables.quoted['{key}']");
            format!(
                "'{key}': {quoted} == '' ? 'null'\n\
                 : size({quoted}) <= {max} ? {quoted} : {quoted}.substring(0, {max}) + '…'"
            )
        })
        .collect();
    format!("{{\n{}\n}}", entries.join(",\n"))
}

/// The refusals, one per annotation in the webhook's order ([`crate::tightening::tightenings`]'):
/// `keep`, `ttl`, the TTL after success, after failure (once, where both are
/// `ttl-after-finished`), `expires-at`, `snoozed-until`.
fn refusals() -> String {
    let entry = |key: &str| {
        format!(
            "'{}: ' + variables.rendered['{key}'] + ' ' + variables.lacking",
            path(key)
        )
    };
    let when = |condition: &str, refusal: String| format!("({condition} ? [{refusal}] : [])");
    let effective = |specific_stem: &str, specific: &str| {
        format!(
            "{} != '' ? {} : {}",
            Side::New.var(specific_stem),
            entry(specific),
            entry(TTL_AFTER_FINISHED)
        )
    };
    let both_finished = format!(
        "variables.succeededTightened && {} == '' && {} == ''",
        Side::New.var("TtlAfterSucceeded"),
        Side::New.var("TtlAfterFailed")
    );
    [
        when("variables.keepTightened", entry(KEEP)),
        when("variables.ttlTightened", entry(TTL)),
        when(
            "variables.succeededTightened",
            effective("TtlAfterSucceeded", TTL_AFTER_SUCCEEDED),
        ),
        when(
            &format!("variables.failedTightened && !({both_finished})"),
            effective("TtlAfterFailed", TTL_AFTER_FAILED),
        ),
        when("variables.expiresAtTightened", entry(EXPIRES_AT)),
        when("variables.snoozedUntilTightened", entry(SNOOZED_UNTIL)),
    ]
    .join(" +\n")
}
