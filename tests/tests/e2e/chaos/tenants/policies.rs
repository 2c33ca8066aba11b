//! The attacker's copying policies (issue 57's first reproduction and generated variants of it):
//! RetentionPolicies whose `match` copies the attacker's ~800 KB Jobs at each mention — lists
//! and maps of `object`, nested lists, `in` over copies, comparisons of nested values — each
//! generated from a seed, rewritten every few seconds into another (a new generation is
//! evaluated afresh). Admission lets most through (their estimate counts nodes); the meter or
//! the evaluator process's bound stops them, and the controller stays up.

use std::time::Duration;

use anyhow::Result;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use kube_retention_common::api::RetentionPolicy;
use serde_json::{Value, json};

use crate::support::TestNamespace;
use crate::workloads::{bulky_job, finish_job, now_second};

/// The label that puts a Job under the copying policies.
const BIG: &str = "kube-retention.test/big";
/// Copying policies at once, and their names' prefix.
pub const POLICIES: usize = 5;
const COPIES: &str = "copies-";

/// xorshift64*: the variants a seed gives, the same every run.
pub struct Variants(u64);

impl Variants {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1) as u64) as usize
    }

    /// A `match` that copies the object (or the part of it that holds its bulk) at each
    /// mention, as many times as admission's bounds (4,096 bytes, 1,024 tokens) leave room
    /// for. Each is false if it ever completes: a copying policy never matches, so the
    /// attacker's Jobs are never its to delete, whatever the limits do.
    pub fn next(&mut self) -> String {
        let what = ["object", "object.spec", "object.spec.template"][self.below(3)];
        // Each mention: its bytes and tokens, with a separator and a map entry's key.
        let tokens = 2 * what.matches('.').count() + 1 + 3;
        let most = (3_600 / (what.len() + 7)).min(1_000 / tokens);
        let count = 60 + self.below(most - 60);
        let half = (count / 2).max(1);
        let list = |n: usize| vec![what; n].join(", ");
        match self.below(6) {
            0 => format!("[{}] == []", list(count)),
            1 => {
                let entries: Vec<String> = (0..count).map(|i| format!("{i}: {what}")).collect();
                format!("{{{}}} == {{}}", entries.join(", "))
            }
            2 => format!("[[{}], [{}]] == []", list(half), list(half)),
            3 => format!("size([{}]) < 0", list(count)),
            4 => format!("[{}] == [{}] && false", list(half), list(half)),
            _ => format!("{what} in [{}] && false", list(count)),
        }
    }
}

/// `count` finished Jobs of about 800 KB each (their bulk in the container's environment:
/// annotations are capped at 256 KiB), labelled for the copying policies; their names.
pub async fn big_jobs(attacker: &TestNamespace, count: usize) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for index in 0..count {
        let name = format!("big-{index}");
        bulky_job(attacker, &name, json!({BIG: "true"}), json!({}), 800_000).await?;
        finish_job(
            &attacker.env.client,
            &attacker.name,
            &name,
            true,
            now_second(),
        )
        .await?;
        names.push(name);
    }
    Ok(names)
}

fn policy(name: &str, matches: &str) -> Value {
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
           "metadata": {"name": name},
           "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                    "selector": {"matchLabels": {BIG: "true"}},
                    "ttlAfterSucceeded": "1s", "match": matches}})
}

/// What the policies came to.
#[derive(Debug, Default)]
pub struct Written {
    /// Variants admitted (each a generation), and refused at admission (their estimate).
    pub admitted: usize,
    pub refused: usize,
}

/// Writes the copying policies, then rewrites one every `every` with the next variant, until
/// aborted; counts into `written`.
pub async fn keep_writing(
    attacker: TestNamespace,
    mut variants: Variants,
    every: Duration,
    written: std::sync::Arc<std::sync::Mutex<Written>>,
) {
    let policies: Api<RetentionPolicy> =
        Api::namespaced(attacker.env.client.clone(), &attacker.name);
    let params = PatchParams::apply("chaos-tenants").force();
    for round in 0usize.. {
        let name = format!("{COPIES}{}", round % POLICIES);
        let manifest = policy(&name, &variants.next());
        let applied = policies
            .patch(&name, &params, &Patch::Apply(&manifest))
            .await;
        if let Ok(mut written) = written.lock() {
            match applied {
                Ok(_) => written.admitted += 1,
                Err(_) => written.refused += 1,
            }
        }
        if round >= POLICIES {
            tokio::time::sleep(every).await;
        }
    }
}

/// Each copying policy's `Ready` condition: (status, reason, message).
pub async fn readiness(attacker: &TestNamespace) -> Result<Vec<(String, String, String)>> {
    let policies: Api<RetentionPolicy> =
        Api::namespaced(attacker.env.client.clone(), &attacker.name);
    let listed = policies.list(&ListParams::default()).await?;
    Ok(listed
        .items
        .iter()
        .filter(|policy| {
            policy
                .metadata
                .name
                .as_deref()
                .is_some_and(|name| name.starts_with(COPIES))
        })
        .filter_map(|policy| {
            let value = serde_json::to_value(policy).ok()?;
            let conditions = value["status"]["conditions"].as_array()?.clone();
            let ready = conditions
                .iter()
                .find(|condition| condition["type"] == "Ready")?;
            let text = |field: &str| ready[field].as_str().unwrap_or_default().to_owned();
            Some((text("status"), text("reason"), text("message")))
        })
        .collect())
}
