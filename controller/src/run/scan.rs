//! Scans for kinds beyond the configured ones: watching annotated objects of those the
//! controller may delete, reporting the others, and checking policies against what is served.

use std::collections::{HashMap, HashSet};

use kube_retention_common::kinds::KindId;

use super::Loop;
use crate::discovery::Scan;
use crate::metrics::UnpermittedLabels;

impl Loop {
    /// Starts watching kinds a scan found watchable and stops those it no longer finds.
    pub(super) fn on_scan(&mut self, scan: Scan) {
        let mut discovered = std::mem::take(&mut self.extra.discovered);
        let Scan {
            watchable,
            unpermitted: lacking,
            served,
            rules,
        } = scan;
        let mut found = HashSet::new();
        for entry in watchable {
            let existing = self
                .state
                .kinds()
                .find_group_kind(&entry.resource.group, &entry.resource.kind);
            let kind = match existing {
                Some(kind) => kind,
                None => match self.state.add_kind(entry) {
                    Ok(kind) => kind,
                    Err(error) => {
                        tracing::warn!(%error, "cannot watch a discovered kind");
                        continue;
                    }
                },
            };
            found.insert(kind);
            if !self.watches.is_running(kind) {
                tracing::info!(kind = %self.state.kinds()[kind].resource, "watching annotated objects of a discovered kind");
                self.watches.start(kind, &self.state.kinds()[kind]);
                discovered.watching.insert(kind);
            }
        }
        let gone: Vec<KindId> = discovered.watching.difference(&found).copied().collect();
        for kind in gone {
            tracing::info!(kind = %self.state.kinds()[kind].resource, "no longer served or permitted; not watching it");
            discovered.watching.remove(&kind);
            self.watches.stop(kind);
            self.state.forget_kind(kind);
        }
        let mut unpermitted = HashMap::new();
        for kind in lacking {
            unpermitted.insert(kind.resource.to_string(), kind.missing.join(","));
        }
        let newly: Vec<String> = unpermitted
            .iter()
            .filter(|(kind, missing)| discovered.unpermitted.get(*kind) != Some(*missing))
            .map(|(kind, missing)| format!("{kind} ({missing})"))
            .collect();
        if !newly.is_empty() {
            tracing::info!(kinds = %newly.join(", "), "annotated objects of these kinds are not deleted: the controller lacks the verbs named (grant them with a ClusterRole labelled retention.dev/aggregate-to-controller: \"true\")");
        }
        for (kind, missing) in &discovered.unpermitted {
            if unpermitted.get(kind) != Some(missing) {
                let labels = UnpermittedLabels {
                    kind: kind.clone(),
                    missing: missing.clone(),
                };
                self.metrics.unpermitted_kinds.remove(&labels);
            }
        }
        for (kind, missing) in &unpermitted {
            let labels = UnpermittedLabels {
                kind: kind.clone(),
                missing: missing.clone(),
            };
            self.metrics.unpermitted_kinds.get_or_create(&labels).set(1);
        }
        discovered.unpermitted = unpermitted;
        self.extra.discovered = discovered;
        self.extra.scan = Some(Scan {
            served,
            rules,
            ..Scan::default()
        });
        self.follow_policies();
    }
}
