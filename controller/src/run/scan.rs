//! Scans for kinds beyond the configured ones: watching annotated objects of those the
//! controller may delete, reporting the others, and keeping what is served and the
//! controller's rules, which policies are checked against.

use std::collections::{HashMap, HashSet};

use kube_retention_common::kinds::KindId;

use super::Core;
use crate::discovery::{Scan, Unpermitted};
use crate::metrics::{Metrics, UnpermittedLabels};

/// Kinds watched because a scan found them, kinds reported for lacking permissions, and the
/// latest scan.
#[derive(Default)]
pub struct Discovered {
    watching: HashSet<KindId>,
    /// Kind → the verbs missing, comma-separated.
    unpermitted: HashMap<String, String>,
    /// The latest scan's served kinds and the controller's rules (`None` before the first).
    scan: Option<Scan>,
}

impl Discovered {
    /// The latest scan's served kinds and the controller's rules.
    pub fn scan(&self) -> Option<&Scan> {
        self.scan.as_ref()
    }

    /// Whether `kind` is watched because a scan found it.
    pub fn watches(&self, kind: KindId) -> bool {
        self.watching.contains(&kind)
    }

    /// Starts watching kinds `scan` found watchable and stops those it no longer finds.
    pub fn scanned(&mut self, scan: Scan, core: &mut Core) {
        let Scan {
            watchable,
            unpermitted,
            served,
            rules,
        } = scan;
        let mut found = HashSet::new();
        for entry in watchable {
            let kind = match core.kind_for(entry) {
                Ok(kind) => kind,
                Err(error) => {
                    tracing::warn!(%error, "cannot watch a discovered kind");
                    continue;
                }
            };
            found.insert(kind);
            if !core.watches.is_running(kind) {
                tracing::info!(kind = %core.state.kinds()[kind].resource, "watching annotated objects of a discovered kind");
                core.watches.start(kind, &core.state.kinds()[kind]);
                self.watching.insert(kind);
            }
        }
        let gone: Vec<KindId> = self.watching.difference(&found).copied().collect();
        for kind in gone {
            tracing::info!(kind = %core.state.kinds()[kind].resource, "no longer served or permitted; not watching it");
            self.watching.remove(&kind);
            core.watches.stop(kind);
            core.state.forget_kind(kind);
        }
        self.report(unpermitted, &core.metrics);
        self.scan = Some(Scan {
            served,
            rules,
            ..Scan::default()
        });
    }

    /// Logs the kinds newly lacking verbs, and keeps their gauge to what the scan found.
    fn report(&mut self, lacking: Vec<Unpermitted>, metrics: &Metrics) {
        let mut unpermitted = HashMap::new();
        for kind in lacking {
            unpermitted.insert(kind.resource.to_string(), kind.missing.join(","));
        }
        let newly: Vec<String> = unpermitted
            .iter()
            .filter(|(kind, missing)| self.unpermitted.get(*kind) != Some(*missing))
            .map(|(kind, missing)| format!("{kind} ({missing})"))
            .collect();
        if !newly.is_empty() {
            tracing::info!(kinds = %newly.join(", "), "annotated objects of these kinds are not deleted: the controller lacks the verbs named (grant them with a ClusterRole labelled retention.dev/aggregate-to-controller: \"true\")");
        }
        for (kind, missing) in &self.unpermitted {
            if unpermitted.get(kind) != Some(missing) {
                let labels = UnpermittedLabels {
                    kind: kind.clone(),
                    missing: missing.clone(),
                };
                metrics.unpermitted_kinds.remove(&labels);
            }
        }
        for (kind, missing) in &unpermitted {
            let labels = UnpermittedLabels {
                kind: kind.clone(),
                missing: missing.clone(),
            };
            metrics.unpermitted_kinds.get_or_create(&labels).set(1);
        }
        self.unpermitted = unpermitted;
    }
}
