//! Where things are: the checkout, the Go-built cluster binaries, the vendored CRDs, and one
//! cluster's state folder (certificates, etcd data, kubeconfigs, logs and pid files).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

#[derive(Debug, Clone)]
pub struct Layout {
    pub repo_root: PathBuf,
    pub bin_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl Layout {
    /// The layout for a cluster whose state lives in `state_dir`.
    pub fn new(state_dir: impl Into<PathBuf>) -> Result<Self> {
        let repo_root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the tests crate lives inside the checkout")?
            .to_path_buf();
        let state_dir = std::path::absolute(state_dir.into())?;
        let layout = Self {
            bin_dir: repo_root.join("tests").join("cluster").join("bin"),
            repo_root,
            state_dir,
        };
        for binary in [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kubectl",
        ] {
            if !layout.binary(binary).is_file() {
                bail!(
                    "{} is missing: run `make cluster-binaries` (tests/cluster/build.sh) first",
                    layout.binary(binary).display()
                );
            }
        }
        Ok(layout)
    }

    pub fn binary(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// A binary of this workspace built by `cargo build`, in [`Self::cargo_profile`]'s folder.
    pub fn cargo_binary(&self, name: &str) -> PathBuf {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.repo_root.join("target"));
        target.join(Self::cargo_profile()).join(name)
    }

    /// The folder under the target folder that the workspace's binaries are run from: `debug`
    /// unless `KUBE_RETENTION_PROFILE` names another (the benchmarks use the image's static
    /// build, `x86_64-unknown-linux-musl/release`).
    pub fn cargo_profile() -> String {
        std::env::var("KUBE_RETENTION_PROFILE").unwrap_or_else(|_| "debug".into())
    }

    /// A file or folder inside the cluster's state folder.
    pub fn state(&self, relative: &str) -> PathBuf {
        self.state_dir.join(relative)
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.state("kubeconfig")
    }

    /// The API server's audit policy: tests/cluster/audit-policy.yaml unless
    /// `KUBE_RETENTION_AUDIT_POLICY` names another (the benchmarks record more).
    pub fn audit_policy(&self) -> PathBuf {
        match std::env::var_os("KUBE_RETENTION_AUDIT_POLICY") {
            Some(path) => PathBuf::from(path),
            None => self.repo_root.join("tests/cluster/audit-policy.yaml"),
        }
    }

    /// Shipwright's CRDs, vendored in the checkout (see the README beside them).
    pub fn shipwright_crds(&self) -> PathBuf {
        self.repo_root.join("tests/crds/shipwright")
    }
}
