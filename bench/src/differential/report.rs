//! The differential check's findings as markdown: what was sent, how often the two webhooks
//! disagreed and on what, and the first case of each disagreement with both answers.

use serde_json::Value;

use super::Findings;

impl Findings {
    /// The section body.
    pub fn markdown(&self) -> String {
        let mut text = String::new();
        let shapes: Vec<String> = self
            .shapes
            .iter()
            .map(|(shape, count)| format!("{shape}: {count}"))
            .collect();
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(outcome, count)| format!("{count} {outcome}"))
            .collect();
        text.push_str(&format!(
            "{} generated AdmissionReviews, each sent to both ({}). kube-retention's answers: {}.\n\n",
            self.cases,
            shapes.join("; "),
            outcomes.join(", ")
        ));
        let disagreeing: u64 = self.counts.values().sum();
        if disagreeing == 0 {
            text.push_str("**No disagreement**: every answer matched (allowed, status code, fields denied, patched object).\n");
            return text;
        }
        text.push_str(&format!(
            "**{disagreeing} disagreements** ({:.3}% of the cases):\n\n\
             | request | what differs | cases |\n| --- | --- | --- |\n",
            disagreeing as f64 * 100.0 / self.cases.max(1) as f64
        ));
        for ((shape, what), count) in &self.counts {
            text.push_str(&format!("| {shape} | {what} | {count} |\n"));
        }
        text.push_str("\nThe first case of each, with both answers:\n");
        for example in &self.examples {
            text.push_str(&format!(
                "\n- case {} ({}, {})\n  - request object: `{}`\n  - kube-retention: `{}`\n  - Go peer: `{}`\n",
                example.index,
                example.shape,
                example.what,
                compact(&example.request["object"]),
                compact(&summary(&example.ours)),
                compact(&summary(&example.peer)),
            ));
        }
        text
    }
}

/// The parts of an AdmissionResponse the comparison reads.
fn summary(response: &Value) -> Value {
    let mut summary = serde_json::json!({"allowed": response["allowed"]});
    for (key, pointer) in [
        ("code", "/status/code"),
        ("message", "/status/message"),
        ("patch", "/patch"),
    ] {
        if let Some(value) = response.pointer(pointer) {
            summary[key] = value.clone();
        }
    }
    if let Ok(Some(patch)) = super::patch_of(response) {
        summary["patch"] = serde_json::to_value(patch).unwrap_or_default();
    }
    summary
}

fn compact(value: &Value) -> String {
    let text = value.to_string().replace('`', "'");
    if text.chars().count() > 600 {
        format!("{}…", text.chars().take(600).collect::<String>())
    } else {
        text
    }
}
