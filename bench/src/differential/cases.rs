//! The generated AdmissionReviews of the differential check: Shipwright Builds and BuildRuns,
//! annotated ConfigMaps and Jobs, each field drawn from values that are valid, invalid, or on
//! the edge between kube-retention's duration grammar and Go's `time.ParseDuration`. Case `i` is
//! a pure function of `i`, so a disagreement can be reproduced from its number alone.

use hyper::body::Bytes;
use serde_json::{Map, Value, json};

use crate::webhook::{NAMESPACE, review_with_old};

/// The writer every generated request comes from (the writer check is off in the comparison).
const USER: &str = "differential";

/// Durations: the everyday, both grammars' edges, and plain garbage.
const DURATIONS: [&str; 24] = [
    "1h", "90m", "1h30m", "10s", "300ms", "0s", "0", "-5m", "1d", "1.5h", "1e3s", " 1h", "1H", "",
    "abc", "2562047h", "2562048h", "1h0m0s", "+1h", "5", "1us", "1µs", "1ns", "7d",
];
const LIMITS: [i64; 7] = [0, 1, 2, 50, 100, 101, -1];
const KEEP: [&str; 5] = ["true", "false", "True", "yes", ""];
const EXPIRES_AT: [&str; 5] = [
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00+02:00",
    "2026-01-01",
    "tomorrow",
    "2026-01-01T00:00:00.5Z",
];
/// The Builds the benchmark creates for BuildRuns to name, and one that does not exist.
pub const PARENTS: [&str; 4] = ["with-ttls", "no-retention", "at-deletion", "missing"];
const ANNOTATIONS: [&str; 6] = [
    "retention.dev/ttl",
    "retention.dev/ttl-after-finished",
    "retention.dev/ttl-after-succeeded",
    "retention.dev/ttl-after-failed",
    "retention.dev/keep",
    "retention.dev/expires-at",
];

/// One request: where it goes, its body, and the object a patch applies to.
pub struct Case {
    pub path: &'static str,
    pub body: Bytes,
    pub object: Value,
    /// `Kind OPERATION path`, for the report.
    pub shape: String,
}

/// SplitMix64: a deterministic stream per case.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

/// Case number `index`.
pub fn case(index: u64) -> Case {
    let mut draw = Draw(index.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5eed);
    let path = if draw.chance(50) {
        "/validate"
    } else {
        "/mutate"
    };
    let (group, kind) = draw.pick(&[
        ("shipwright.io", "Build"),
        ("shipwright.io", "BuildRun"),
        ("", "ConfigMap"),
        ("batch", "Job"),
    ]);
    let name = format!("case-{index}");
    let new = object(&mut draw, kind, &name);
    let update = kind != "BuildRun" && draw.chance(30);
    let old = update.then(|| object(&mut draw, kind, &name));
    let operation = if update { "UPDATE" } else { "CREATE" };
    Case {
        path,
        body: review_with_old(operation, group, kind, new.clone(), old.as_ref(), USER),
        object: new,
        shape: format!("{kind} {operation} {path}"),
    }
}

/// An object of `kind` with fields drawn from the pools.
fn object(draw: &mut Draw, kind: &str, name: &str) -> Value {
    let mut metadata = json!({"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
                              "creationTimestamp": "2026-01-01T00:00:00Z"});
    match kind {
        "Build" => {
            json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build", "metadata": metadata,
            "spec": {"strategy": {"kind": "ClusterBuildStrategy", "name": "buildkit"},
                     "output": {"image": "registry.example/app"},
                     "retention": build_retention(draw)}})
        }
        "BuildRun" => {
            let mut spec = json!({"build": {"name": draw.pick(&PARENTS)}});
            if draw.chance(50) {
                spec["retention"] = run_retention(draw);
            }
            json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun", "metadata": metadata, "spec": spec})
        }
        "ConfigMap" => {
            metadata["annotations"] = annotations(draw);
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}})
        }
        _ => {
            metadata["annotations"] = annotations(draw);
            let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                                               "restartPolicy": "Never"}}}});
            job["status"] = job_status(draw);
            job
        }
    }
}

fn build_retention(draw: &mut Draw) -> Value {
    let mut retention = run_retention(draw);
    for field in ["failedLimit", "succeededLimit"] {
        if draw.chance(50) {
            retention[field] = json!(draw.pick(&LIMITS));
        }
    }
    if draw.chance(20) {
        retention["atBuildDeletion"] = json!(draw.chance(50));
    }
    retention
}

fn run_retention(draw: &mut Draw) -> Value {
    let mut retention = Map::new();
    for field in ["ttlAfterFailed", "ttlAfterSucceeded"] {
        if draw.chance(60) {
            retention.insert(field.into(), json!(draw.pick(&DURATIONS)));
        }
    }
    Value::Object(retention)
}

fn annotations(draw: &mut Draw) -> Value {
    let mut annotations = Map::new();
    for annotation in ANNOTATIONS {
        if !draw.chance(35) {
            continue;
        }
        let value = match annotation {
            "retention.dev/keep" => draw.pick(&KEEP),
            "retention.dev/expires-at" => draw.pick(&EXPIRES_AT),
            _ => draw.pick(&DURATIONS),
        };
        annotations.insert(annotation.into(), json!(value));
    }
    Value::Object(annotations)
}

fn job_status(draw: &mut Draw) -> Value {
    match draw.below(3) {
        0 => json!({"active": 1}),
        1 => json!({"completionTime": "2026-01-01T00:05:00Z",
                    "conditions": [{"type": "Complete", "status": "True",
                                    "lastTransitionTime": "2026-01-01T00:05:00Z"}]}),
        _ => json!({"conditions": [{"type": "Failed", "status": "True",
                                    "lastTransitionTime": "2026-01-01T00:07:00Z"}]}),
    }
}
