//! The differential check of `make bench-webhook`: the same generated AdmissionReviews (module
//! `cases`) to kube-retention's webhook and to the Go peer, their answers compared — allowed or
//! not, the status code, the fields a denial names, and the object each patch produces.
//! A correctness cross-check as much as a benchmark: every disagreement is reported.

mod cases;
mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::Mutex;

pub use cases::{Case, PARENTS, case};

use crate::load::{Reply, Sender, Target, post};

/// What an answer says, in the terms the two webhooks must agree on.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub allowed: bool,
    pub code: Option<i64>,
    pub fields: BTreeSet<String>,
    /// The object after the answer's patch (the object itself when there is none).
    pub patched: Value,
}

impl Answer {
    /// Reads `review`, the answer to a request about `object`.
    pub fn read(object: &Value, review: &Value) -> Result<Self> {
        let response = review.get("response").context("no response")?;
        let allowed = response["allowed"].as_bool().context("no allowed")?;
        let status = &response["status"];
        let fields = status["details"]["causes"]
            .as_array()
            .map(|causes| {
                causes
                    .iter()
                    .filter_map(|cause| cause["field"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut patched = object.clone();
        if let Some(patch) = patch_of(response)? {
            json_patch::patch(&mut patched, &patch).context("the patch does not apply")?;
        }
        Ok(Self {
            allowed,
            code: (!allowed).then(|| status["code"].as_i64()).flatten(),
            fields,
            patched,
        })
    }

    /// What the answer did to a request about `object`.
    pub fn outcome(&self, object: &Value) -> &'static str {
        match (self.allowed, &self.patched == object) {
            (false, _) => "denied",
            (true, false) => "allowed with a patch",
            (true, true) => "allowed as it was",
        }
    }

    /// The first way `self` and `other` differ, if any.
    pub fn differs(&self, other: &Self) -> Option<&'static str> {
        if self.allowed != other.allowed {
            Some("allowed")
        } else if self.code != other.code {
            Some("status code")
        } else if self.fields != other.fields {
            Some("fields denied")
        } else if self.patched != other.patched {
            Some("patched object")
        } else {
            None
        }
    }
}

/// The JSON patch of an AdmissionResponse. `patch` is bytes: base64 in a JSON string as Go
/// writes it, or (kube-rs) an array of byte values, which the API server decodes alike.
pub fn patch_of(response: &Value) -> Result<Option<json_patch::Patch>> {
    let bytes = match &response["patch"] {
        Value::Null => return Ok(None),
        Value::String(encoded) => base64::engine::general_purpose::STANDARD.decode(encoded)?,
        Value::Array(values) => values
            .iter()
            .map(|value| value.as_u64().and_then(|byte| u8::try_from(byte).ok()))
            .collect::<Option<Vec<u8>>>()
            .context("a patch array of non-bytes")?,
        other => bail!("a patch that is not bytes: {other}"),
    };
    Ok(Some(serde_json::from_slice(&bytes)?))
}

/// One disagreement, with what each webhook answered.
pub struct Disagreement {
    pub index: u64,
    pub shape: String,
    pub what: &'static str,
    pub request: Value,
    pub ours: Value,
    pub peer: Value,
}

/// What the check found.
#[derive(Default)]
pub struct Findings {
    pub cases: u64,
    pub shapes: BTreeMap<String, u64>,
    /// kube-retention's answers: denied, allowed with a patch, allowed as they were.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// How many disagreed, by shape and what differed.
    pub counts: BTreeMap<(String, &'static str), u64>,
    /// The first disagreement of each (shape, what).
    pub examples: Vec<Disagreement>,
}

/// Sends cases `0..count` to both webhooks over `workers` connections each.
pub async fn run(
    ours: Arc<Target>,
    peer: Arc<Target>,
    count: u64,
    workers: usize,
) -> Result<Findings> {
    let next = Arc::new(AtomicU64::new(0));
    let findings = Arc::new(Mutex::new(Findings::default()));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (ours, peer, next, findings) =
            (ours.clone(), peer.clone(), next.clone(), findings.clone());
        tasks.push(tokio::spawn(async move {
            let (mut ours_sender, mut peer_sender) = (None, None);
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= count {
                    return Ok::<_, anyhow::Error>(());
                }
                let case = case(index);
                let ours_review = exchange(&ours, &mut ours_sender, &case).await?;
                let peer_review = exchange(&peer, &mut peer_sender, &case).await?;
                let ours_answer = Answer::read(&case.object, &ours_review)
                    .with_context(|| format!("case {index}, kube-retention: {ours_review}"))?;
                let peer_answer = Answer::read(&case.object, &peer_review)
                    .with_context(|| format!("case {index}, the Go peer: {peer_review}"))?;
                let mut findings = findings.lock().await;
                findings.cases += 1;
                *findings.shapes.entry(case.shape.clone()).or_default() += 1;
                *findings
                    .outcomes
                    .entry(ours_answer.outcome(&case.object))
                    .or_default() += 1;
                if let Some(what) = ours_answer.differs(&peer_answer) {
                    let count = findings
                        .counts
                        .entry((case.shape.clone(), what))
                        .or_default();
                    *count += 1;
                    if *count == 1 {
                        let request: Value = serde_json::from_slice(&case.body)?;
                        findings.examples.push(Disagreement {
                            index,
                            shape: case.shape,
                            what,
                            request: request["request"].clone(),
                            ours: ours_review["response"].clone(),
                            peer: peer_review["response"].clone(),
                        });
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    let findings = std::mem::take(&mut *findings.lock().await);
    Ok(findings)
}

/// POSTs `case` to `target` and reads the AdmissionReview it answers with.
async fn exchange(target: &Target, sender: &mut Option<Sender>, case: &Case) -> Result<Value> {
    for _ in 0..3 {
        match post(target, sender, case.path, &case.body).await {
            Ok(Reply::Body(body)) => return Ok(serde_json::from_slice(&body)?),
            Ok(Reply::Status(status)) => bail!("{} answered {status}", case.path),
            Err(_) => continue,
        }
    }
    bail!("{} did not answer after 3 connections", target.address)
}

/// Creates the Builds [`PARENTS`] names (all but the missing one).
pub fn seed_parents(cluster: &kube_retention_e2e::LocalCluster) -> Result<()> {
    let retention = [
        json!({"ttlAfterFailed": "1h", "ttlAfterSucceeded": "30m"}),
        json!({}),
        json!({"atBuildDeletion": true, "ttlAfterSucceeded": "2h"}),
    ];
    for (name, retention) in PARENTS.iter().zip(retention) {
        let build = json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build",
            "metadata": {"name": name, "namespace": crate::webhook::NAMESPACE},
            "spec": {"strategy": {"kind": "ClusterBuildStrategy", "name": "buildkit"},
                     "source": {"type": "Git", "git": {"url": "https://example.com/app"}},
                     "output": {"image": "registry.example/app"}, "retention": retention}});
        kube_retention_e2e::run_with_input(
            cluster.kubectl().args(["apply", "-f", "-"]),
            &build.to_string(),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde_json::json;

    const PATCH: &str = r#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#;

    #[test]
    fn a_patch_as_base64_or_as_bytes_patches_alike_and_denials_compare_by_field() {
        let object = json!({"metadata": {"name": "x"}});
        let go = json!({"response": {"allowed": true, "status": {"code": 200},
            "patch": base64::engine::general_purpose::STANDARD.encode(PATCH)}});
        let rust = json!({"response": {"allowed": true, "status": {},
            "patch": PATCH.as_bytes().to_vec()}});
        let (go, rust) = (
            Answer::read(&object, &go).unwrap_or_else(|error| panic!("{error}")),
            Answer::read(&object, &rust).unwrap_or_else(|error| panic!("{error}")),
        );
        assert_eq!(go.differs(&rust), None);
        assert_eq!(rust.outcome(&object), "allowed with a patch");
        assert_eq!(rust.patched["metadata"]["labels"]["a"], "b");

        let denied = |field: &str| {
            let review = json!({"response": {"allowed": false, "status": {"code": 422,
                "details": {"causes": [{"field": field}]}}}});
            Answer::read(&object, &review).unwrap_or_else(|error| panic!("{error}"))
        };
        assert_eq!(denied("spec.a").differs(&denied("spec.a")), None);
        assert_eq!(
            denied("spec.a").differs(&denied("spec.b")),
            Some("fields denied")
        );
        assert_eq!(denied("spec.a").differs(&go), Some("allowed"));
    }

    #[test]
    fn a_case_is_a_pure_function_of_its_number() {
        let (one, again) = (case(42), case(42));
        assert_eq!(one.body, again.body);
        assert_ne!(case(42).body, case(43).body);
    }
}
