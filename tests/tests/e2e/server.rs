//! What the suite's API server does differently by Kubernetes minor, asked of the server or of
//! its minor, so that each test asserts exactly what that server does (docs/compatibility.md
//! lists these differences).

use anyhow::Result;
use kube_retention_e2e::feature_gates;
use kube_retention_e2e::layout::minor_number;

use crate::support::Env;

/// The minor a CRD's CEL rule denial names its refused value from; before it, the value's type.
const NAMES_REFUSED_VALUES_FROM: u32 = 35;

/// `expected`, a denial by one of the CRDs' CEL rules of a string value, as this API server
/// words it: from Kubernetes 1.35 it names the value (`Invalid value: "1d": is not a duration`),
/// before that the value's type (`Invalid value: "string": is not a duration`), as
/// k8s.io/apiextensions-apiserver's `schema/cel/validation.go` passes `sts.Type` there. Only the
/// quoted value after `Invalid value: ` is rewritten; the field path and the rule stay.
pub fn cel_rule_denial(env: &Env, expected: &str) -> String {
    if minor(env) >= NAMES_REFUSED_VALUES_FROM {
        return expected.to_owned();
    }
    let marker = "Invalid value: \"";
    let Some(start) = expected.find(marker).map(|at| at + marker.len()) else {
        return expected.to_owned();
    };
    let Some(length) = expected[start..].find("\": ") else {
        return expected.to_owned();
    };
    format!(
        "{}string{}",
        &expected[..start],
        &expected[start + length..]
    )
}

/// The minor the API server renders a structured value in its denials as JSON from; before, in
/// Go's syntax (k8s.io/apimachinery's `util/validation/field/errors.go`).
const RENDERS_VALUES_AS_JSON_FROM: u32 = 34;

/// `expected`, a `Duplicate value: {...}` denial of a list-map entry with string keys written
/// as JSON (`Duplicate value: {"name":"a"}`), as this API server words it: as JSON from
/// Kubernetes 1.34, before in Go's syntax (`Duplicate value: map[string]interface {}{"name":"a"}`).
pub fn duplicate_denial(env: &Env, expected: &str) -> String {
    if minor(env) >= RENDERS_VALUES_AS_JSON_FROM {
        return expected.to_owned();
    }
    expected.replace(
        "Duplicate value: {",
        "Duplicate value: map[string]interface {}{",
    )
}

/// The suite's minor, 37 for "1.37"; a minor that is not a number counts as the newest.
fn minor(env: &Env) -> u32 {
    minor_number(&env.cluster.layout.kubernetes).unwrap_or(u32::MAX)
}

/// Whether the API server serves streamed lists: its `WatchList` feature gate, as its
/// `kubernetes_feature_enabled` metric says (off by default in 1.33, on from 1.34).
pub fn streams_lists(env: &Env) -> Result<bool> {
    let metrics = feature_gates::api_server_metrics(&env.cluster)?;
    Ok(feature_gates::enabled(&metrics, "WatchList") == Some(true))
}
