//! An object's numbers as Kubernetes' CEL reads them: whole numbers are `int`, so an
//! expression written for the API server judges alike here. kube-cel's own conversion made
//! every whole number not below zero a `uint`, and `object.status.failed != 0` was true for a
//! Job that never failed.

use kube_retention_common::cel::{Expect, Expression};
use serde_json::json;

fn judged(source: &str) -> Result<bool, String> {
    let job = json!({
        "status": {"succeeded": 1, "failed": 0, "ready": -1, "ratio": 0.5,
                   "huge": u64::MAX, "counts": [3, 1, 2]},
    });
    Expression::compile(source, Expect::Condition)
        .unwrap_or_else(|error| panic!("{source}: {error}"))
        .condition(&job)
        .map_err(|error| error.to_string())
}

#[test]
fn whole_numbers_are_ints_as_in_kubernetes() {
    for source in [
        "object.status.succeeded == 1",
        "!(object.status.failed != 0)",
        "object.status.ready == -1",
        "object.status.succeeded + 1 == 2",
        "object.status.succeeded - 2 == -1",
        "object.status.counts == [3, 1, 2]",
        "object.status.counts.sort() == [1, 2, 3]",
        "object.status.counts.sum() == 6",
    ] {
        assert_eq!(judged(source), Ok(true), "{source}");
    }
}

#[test]
fn numbers_past_int_and_fractions_keep_their_types() {
    for source in [
        "object.status.huge == 18446744073709551615u",
        "object.status.ratio * 2.0 == 1.0",
        "object.status.ratio == 0.5",
    ] {
        assert_eq!(judged(source), Ok(true), "{source}");
    }
}
