//! The bodies the campaign sends, generated from a seed: reviews of every kind the lean
//! decode knows (`lean_reviews`' generator), policies and Cleaners valid and not, and the
//! hostile ones — malformed in every way serde can be, oversized, nested past any parser's
//! depth, arrays of numbers megabytes long where admission reads and where it does not, dense
//! retention annotations, and UPDATEs whose object and oldObject are each as large as etcd
//! stores (1.5 MiB).

use axum::body::Bytes;
use proptest::prelude::any;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

use crate::lean_reviews::{KINDS, object};
use crate::support::{as_user, review};

/// What a body is, for the distribution the campaign reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// A review of an object of a kind the registry knows, or of a plain one.
    Object,
    /// A RetentionPolicy or a Cleaner, valid or not.
    Ours,
    /// Not a review: truncated, mistyped, not JSON, empty.
    Malformed,
    /// Arrays nested a hundred thousand deep.
    Deep,
    /// Millions of numbers in one array.
    Numbers,
    /// Thousands of retention annotations: all of them kept.
    DenseAnnotations,
    /// An UPDATE of a Job as large as etcd stores, its oldObject as large.
    EtcdSized,
    /// Above --max-body-bytes.
    Oversized,
}

/// A body to send to `path`.
pub struct Generated {
    pub class: Class,
    pub path: &'static str,
    pub body: Bytes,
}

/// 1.5 MiB, the largest object etcd stores by default.
pub const ETCD_OBJECT: usize = 1536 * 1024;

pub struct Generator {
    runner: TestRunner,
}

impl Generator {
    pub fn new() -> Self {
        Self {
            runner: TestRunner::deterministic(),
        }
    }

    /// A value of `strategy`, drawn.
    fn draw<S: Strategy>(&mut self, strategy: S) -> S::Value {
        strategy.new_tree(&mut self.runner).unwrap().current()
    }

    fn range(&mut self, range: std::ops::Range<usize>) -> usize {
        self.draw(range)
    }

    fn chance(&mut self, probability: f64) -> bool {
        self.draw(proptest::bool::weighted(probability))
    }

    /// The next body, its class drawn by weight (per 100): objects 45, policies and Cleaners
    /// 12, malformed 15, deep 4, numbers 5, dense annotations 12, etcd-sized 4, oversized 3.
    pub fn next(&mut self) -> Generated {
        let roll = self.range(0..100);
        let path = if self.chance(0.5) {
            "/validate"
        } else {
            "/mutate"
        };
        let (class, body) = match roll {
            0..45 => (Class::Object, self.object_review()),
            45..57 => (Class::Ours, self.ours()),
            57..72 => (Class::Malformed, self.malformed()),
            72..76 => (Class::Deep, self.deep()),
            76..81 => (Class::Numbers, self.numbers()),
            81..93 => (Class::DenseAnnotations, self.dense_annotations()),
            93..97 => (Class::EtcdSized, etcd_sized_update()),
            _ => (Class::Oversized, self.oversized()),
        };
        Generated {
            class,
            path,
            body: Bytes::from(body),
        }
    }

    fn object(&mut self) -> Value {
        let mut object = object().new_tree(&mut self.runner).unwrap().current();
        // Deadlines from the object's own time, not the clock's: the oracle answers a moment
        // later than the webhook.
        object["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        object
    }

    fn object_review(&mut self) -> Vec<u8> {
        let (group, version, kind, _) = KINDS[self.range(0..KINDS.len())];
        let object = self.object();
        let old = self.chance(0.4).then(|| self.object());
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        let user = if self.chance(0.3) {
            super::port::REFUSED_USER
        } else {
            "alice"
        };
        let body = as_user(
            review(group, version, kind, operation, &object, old.as_ref()),
            user,
        );
        serde_json::to_vec(&body).unwrap()
    }

    fn ours(&mut self) -> Vec<u8> {
        let expressions = [
            "object.metadata.name == 'x'",
            "object.metadata.name ==",
            "size(object.metadata.labels) > 2",
            "[1, 2, 3].all(x, x > 0)",
        ];
        let expression = expressions[self.range(0..expressions.len())];
        let ttl = ["1h", "1d", "36h"][self.range(0..3)];
        let object = if self.chance(0.6) {
            json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                   "metadata": {"name": "p", "namespace": "team-a", "generation": 1,
                                "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                            "ttl": ttl, "match": expression}})
        } else {
            json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
                   "metadata": {"name": "c", "namespace": "team-a",
                                "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"ttl": ttl,
                            "targets": [{"name": "jobs", "apiGroup": "batch", "version": "v1",
                                         "kind": "Job", "delete": true}],
                            "conditions": [expression],
                            "cloudEventSink": "http://169.254.169.254/"}})
        };
        let user = if self.chance(0.3) {
            super::port::REFUSED_USER
        } else {
            "alice"
        };
        let kind = object["kind"].as_str().unwrap().to_owned();
        let body = as_user(
            review("retention.dev", "v1alpha1", &kind, "CREATE", &object, None),
            user,
        );
        serde_json::to_vec(&body).unwrap()
    }

    fn malformed(&mut self) -> Vec<u8> {
        let valid = self.object_review();
        match self.range(0..7) {
            0 => {
                let cut = self.range(0..valid.len());
                valid[..cut].to_vec()
            }
            1 => {
                self.draw(proptest::collection::vec(any::<u8>(), 0..4096))
            }
            2 => br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}"#.to_vec(),
            3 => {
                let mut body: Value = serde_json::from_slice(&valid).unwrap();
                body["request"]["object"] = json!([1, 2, 3]);
                serde_json::to_vec(&body).unwrap()
            }
            4 => {
                let mut body: Value = serde_json::from_slice(&valid).unwrap();
                body["request"]["userInfo"] = json!({"groups": "not a list"});
                serde_json::to_vec(&body).unwrap()
            }
            5 => Vec::new(),
            _ => {
                let mut body: Value = serde_json::from_slice(&valid).unwrap();
                body["request"]["operation"] = json!("DESTROY");
                serde_json::to_vec(&body).unwrap()
            }
        }
    }

    fn deep(&mut self) -> Vec<u8> {
        let depth = 100_000;
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let at = self.range(0..3);
        let mut body: Value = serde_json::from_slice(&job_review(0)).unwrap();
        let placeholder = json!("DEEP");
        match at {
            // Where admission does not read: read past.
            0 => body["request"]["object"]["spec"]["template"] = placeholder,
            // Where it keeps everything: past serde's depth, malformed.
            1 => {
                body["request"]["object"]["metadata"]["annotations"]["retention.dev/ttl"] =
                    placeholder;
            }
            _ => body["request"]["userInfo"]["extra"] = json!({"k": placeholder}),
        }
        serde_json::to_string(&body)
            .unwrap()
            .replacen("\"DEEP\"", &nested, 1)
            .into_bytes()
    }

    fn numbers(&mut self) -> Vec<u8> {
        let count = self.range(500_000..1_900_000);
        let numbers = format!("[{}]", vec!["0"; count].join(","));
        let mut body: Value = serde_json::from_slice(&job_review(0)).unwrap();
        let placeholder = json!("NUMBERS");
        match self.range(0..3) {
            0 => body["request"]["object"]["spec"]["template"] = placeholder,
            1 => {
                body["request"]["object"]["metadata"]["annotations"]["retention.dev/ttl"] =
                    placeholder;
            }
            _ => {
                body["request"]["kind"] = json!({"group": "retention.dev", "version": "v1alpha1",
                                                 "kind": "RetentionPolicy"});
                body["request"]["object"]["spec"]["resources"] = placeholder;
            }
        }
        serde_json::to_string(&body)
            .unwrap()
            .replacen("\"NUMBERS\"", &numbers, 1)
            .into_bytes()
    }

    fn dense_annotations(&mut self) -> Vec<u8> {
        let count = self.range(1_000..60_000);
        let mut body: Value = serde_json::from_slice(&job_review(0)).unwrap();
        let annotations = &mut body["request"]["object"]["metadata"]["annotations"];
        for index in 0..count {
            annotations[format!("retention.dev/{index}")] = json!("");
        }
        serde_json::to_vec(&body).unwrap()
    }

    fn oversized(&mut self) -> Vec<u8> {
        job_review(4 * 1024 * 1024 + self.range(1..4096))
    }
}

/// A CREATE of an annotated Job whose template pads the body to about `size` bytes.
pub fn job_review(size: usize) -> Vec<u8> {
    let object = job(size);
    serde_json::to_vec(&as_user(
        review("batch", "v1", "Job", "CREATE", &object, None),
        "alice",
    ))
    .unwrap()
}

/// A finished Job with a TTL, its container's arguments (`"0"`, four bytes of JSON each, the
/// densest a Job's text gets) padding it to about `size` bytes.
pub fn job(size: usize) -> Value {
    let args = vec!["0"; size / 4];
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "big", "namespace": "team-a",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"retention.dev/ttl-after-finished": "1h"},
                     "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox",
                                                       "args": args}]}}},
        "status": {"conditions": [{"type": "Complete", "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:10:00Z"}],
                   "completionTime": "2026-01-01T00:10:00Z", "succeeded": 1}})
}

/// An UPDATE (kubectl annotate) of a Job as large as etcd stores, its oldObject as large.
pub fn etcd_sized_update() -> Vec<u8> {
    let old = job(ETCD_OBJECT - 1024);
    let mut object = old.clone();
    object["metadata"]["annotations"]["note"] = json!("annotated");
    serde_json::to_vec(&as_user(
        review("batch", "v1", "Job", "UPDATE", &object, Some(&old)),
        "alice",
    ))
    .unwrap()
}
