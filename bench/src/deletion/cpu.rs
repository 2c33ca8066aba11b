//! Where the CPU went over a burst's deletions: the deleter's, kube-apiserver's and etcd's CPU
//! seconds from /proc, read at the expiry and at the last deletion.

use kube_retention_e2e::LocalCluster;

use crate::{cpu_seconds, pid_of};

/// CPU seconds used over a burst's deletions, by the deleter and by the control plane.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub deleter: f64,
    pub apiserver: f64,
    pub etcd: f64,
}

impl Cpu {
    pub(super) fn read(cluster: &LocalCluster, deleter: Option<u32>) -> Option<Self> {
        let of = |name: &str| pid_of(cluster, name).and_then(cpu_seconds);
        Some(Self {
            deleter: deleter.and_then(cpu_seconds)?,
            apiserver: of("kube-apiserver")?,
            etcd: of("etcd")?,
        })
    }

    pub(super) fn since(self, before: Self) -> Self {
        Self {
            deleter: self.deleter - before.deleter,
            apiserver: self.apiserver - before.apiserver,
            etcd: self.etcd - before.etcd,
        }
    }
}
