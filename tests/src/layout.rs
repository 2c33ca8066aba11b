//! Where things are: the checkout, the Go-built cluster binaries of the Kubernetes minor this run
//! uses, the vendored CRDs, and one cluster's state folder (certificates, etcd data, kubeconfigs,
//! logs and pid files).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

#[derive(Debug, Clone)]
pub struct Layout {
    pub repo_root: PathBuf,
    /// The Kubernetes minor ("1.37"): `$KUBERNETES`, else the newest pinned in
    /// tests/cluster/kubernetes (one `1.NN.mod` each).
    pub kubernetes: String,
    /// Its binaries, `tests/cluster/bin/<minor>`, built by `tests/cluster/build.sh <minor>`.
    pub kubernetes_bin: PathBuf,
    /// The tools of every minor (helm, promtool, krew), `tests/cluster/bin`.
    pub tools_bin: PathBuf,
    pub state_dir: PathBuf,
}

/// The Kubernetes binaries a local cluster needs, so a missing build is said before anything starts.
const KUBERNETES_BINARIES: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
];
/// What a node needs besides: `tests/cluster/build.sh --control-plane` leaves these out.
pub const NODE_BINARIES: [&str; 4] = ["kube-scheduler", "kubelet", "kube-proxy", "pause"];
/// The tools run from [`Layout::tools_bin`]; every other name is one of the minor's.
const TOOLS: [&str; 3] = ["helm", "promtool", "krew"];
/// Where the pinned minors are, in the checkout: one `1.NN.mod` (and `.sum`) each.
const PINNED: &str = "tests/cluster/kubernetes";

impl Layout {
    /// The layout for a cluster whose state lives in `state_dir`, of the minor `$KUBERNETES`
    /// names, else the newest pinned.
    pub fn new(state_dir: impl Into<PathBuf>) -> Result<Self> {
        let repo_root = Self::checkout()?;
        let minor = match std::env::var("KUBERNETES") {
            Ok(minor) if !minor.is_empty() => minor,
            _ => pinned_minors(&repo_root)?
                .pop()
                .with_context(|| format!("no Kubernetes minor is pinned in {PINNED}"))?,
        };
        Self::for_minor(state_dir, &minor)
    }

    /// The layout for a cluster of Kubernetes `minor` ("1.33") whose state lives in `state_dir`.
    pub fn for_minor(state_dir: impl Into<PathBuf>, minor: &str) -> Result<Self> {
        let repo_root = Self::checkout()?;
        let state_dir = std::path::absolute(state_dir.into())?;
        let kubernetes = minor.to_owned();
        if !modfile(&repo_root, &kubernetes).is_file() {
            bail!(
                "KUBERNETES={kubernetes} is not pinned: the pinned minors are {} \
                 ({PINNED}/pin.sh pins another)",
                pinned_minors(&repo_root)?.join(", ")
            );
        }
        let bin = repo_root.join("tests/cluster/bin");
        let layout = Self {
            kubernetes_bin: bin.join(&kubernetes),
            tools_bin: bin,
            kubernetes,
            repo_root,
            state_dir,
        };
        layout.require(&KUBERNETES_BINARIES)?;
        Ok(layout)
    }

    /// Fails, naming the first missing and the build that makes it, unless each of the minor's
    /// `binaries` is built.
    pub fn require(&self, binaries: &[&str]) -> Result<()> {
        for binary in binaries {
            if !self.binary(binary).is_file() {
                bail!(
                    "{} is missing: run `make cluster-binaries KUBERNETES={}` \
                     (tests/cluster/build.sh {}) first",
                    self.binary(binary).display(),
                    self.kubernetes,
                    self.kubernetes
                );
            }
        }
        Ok(())
    }

    /// The Kubernetes release this layout's minor is pinned at ("v1.37.2"), as its `.mod` file
    /// requires it and its binaries say.
    pub fn kubernetes_release(&self) -> Result<String> {
        pinned_release(&self.repo_root, &self.kubernetes)
    }

    /// The checkout this crate is in.
    fn checkout() -> Result<PathBuf> {
        Ok(Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the tests crate lives inside the checkout")?
            .to_path_buf())
    }

    /// One of the minor's binaries, or one of the tools (helm, promtool, krew).
    pub fn binary(&self, name: &str) -> PathBuf {
        if TOOLS.contains(&name) {
            self.tools_bin.join(name)
        } else {
            self.kubernetes_bin.join(name)
        }
    }

    /// A binary of this workspace built by `cargo build`, in [`Self::cargo_profile`]'s folder.
    pub fn cargo_binary(&self, name: &str) -> PathBuf {
        self.target_dir().join(Self::cargo_profile()).join(name)
    }

    /// Cargo's target folder: `$CARGO_TARGET_DIR`, or `target` in the checkout.
    pub fn target_dir(&self) -> PathBuf {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.repo_root.join("target"))
    }

    /// Where a run of `suite` whose tests failed keeps its processes' logs, past its temporary
    /// state folder: `<suite>-logs/<minor>` in the target folder.
    pub fn kept_logs(&self, suite: &str) -> PathBuf {
        self.target_dir()
            .join(format!("{suite}-logs"))
            .join(&self.kubernetes)
    }

    /// Copies the processes' logs (the control plane's, kube-retention's) out of the temporary
    /// state folder into [`Layout::kept_logs`] of `suite`, replacing an earlier run's: where.
    pub fn keep_logs(&self, suite: &str) -> Result<PathBuf> {
        let logs = self.state("logs");
        let kept = self.kept_logs(suite);
        if kept.exists() {
            std::fs::remove_dir_all(&kept)
                .with_context(|| format!("removing {}", kept.display()))?;
        }
        std::fs::create_dir_all(&kept).with_context(|| format!("creating {}", kept.display()))?;
        for entry in
            std::fs::read_dir(&logs).with_context(|| format!("reading {}", logs.display()))?
        {
            let path = entry?.path();
            if path.is_file()
                && let Some(name) = path.file_name()
            {
                std::fs::copy(&path, kept.join(name))
                    .with_context(|| format!("copying {}", path.display()))?;
            }
        }
        Ok(kept)
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

    /// Where the API server writes its audit log, as [`Self::audit_policy`] says.
    pub fn audit_log(&self) -> PathBuf {
        self.state("logs/audit.log")
    }

    /// Shipwright's CRDs, vendored in the checkout (see the README beside them).
    pub fn shipwright_crds(&self) -> PathBuf {
        self.repo_root.join("tests/crds/shipwright")
    }
}

/// The minor's number: 37 for "1.37"; `None` for what is not "1.NN".
pub fn minor_number(minor: &str) -> Option<u32> {
    minor.strip_prefix("1.")?.parse().ok()
}

/// A minor's go.mod in the checkout at `repo_root`.
fn modfile(repo_root: &Path, minor: &str) -> PathBuf {
    repo_root.join(PINNED).join(format!("{minor}.mod"))
}

/// The minors pinned in the checkout at `repo_root` (tests/cluster/kubernetes), oldest first,
/// as `tests/cluster/kubernetes/minors.sh` lists them.
pub fn pinned_minors(repo_root: &Path) -> Result<Vec<String>> {
    let folder = repo_root.join(PINNED);
    let mut minors: Vec<(u32, String)> = Vec::new();
    for entry in
        std::fs::read_dir(&folder).with_context(|| format!("reading {}", folder.display()))?
    {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(minor) = name.strip_suffix(".mod")
            && let Some(number) = minor_number(minor)
        {
            minors.push((number, minor.to_owned()));
        }
    }
    minors.sort();
    Ok(minors.into_iter().map(|(_, minor)| minor).collect())
}

/// The release ("v1.37.2") `tests/cluster/kubernetes/<minor>.mod` requires in the checkout at
/// `repo_root`.
pub fn pinned_release(repo_root: &Path, minor: &str) -> Result<String> {
    let modfile = modfile(repo_root, minor);
    std::fs::read_to_string(&modfile)
        .with_context(|| format!("reading {}", modfile.display()))?
        .lines()
        .find_map(|line| line.trim().strip_prefix("k8s.io/kubernetes "))
        .map(|version| version.trim().to_owned())
        .with_context(|| format!("{} requires no k8s.io/kubernetes", modfile.display()))
}

#[cfg(test)]
mod tests {
    use super::{KUBERNETES_BINARIES, Layout, NODE_BINARIES, pinned_minors, pinned_release};

    #[test]
    fn minors_sort_by_number_and_only_mod_files_count() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join(super::PINNED);
        std::fs::create_dir_all(&folder).unwrap();
        for name in [
            "1.9.mod", "1.33.mod", "1.10.mod", "1.33.sum", "pin.sh", "2.0.mod",
        ] {
            std::fs::write(folder.join(name), "").unwrap();
        }
        assert_eq!(pinned_minors(root.path()).unwrap(), ["1.9", "1.10", "1.33"]);
    }

    #[test]
    fn the_release_is_the_one_the_mod_file_requires() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("tests/cluster/kubernetes");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("1.33.mod"),
            "module m\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.5.21\n\tk8s.io/kubernetes v1.33.13\n)\n",
        )
        .unwrap();
        assert_eq!(pinned_release(root.path(), "1.33").unwrap(), "v1.33.13");
        assert!(pinned_release(root.path(), "1.34").is_err());
    }

    #[test]
    fn a_control_plane_build_serves_a_cluster_and_a_node_asks_for_the_full_build() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("tests/cluster/bin");
        std::fs::create_dir_all(bin.join("1.33")).unwrap();
        for binary in KUBERNETES_BINARIES {
            std::fs::write(bin.join("1.33").join(binary), "").unwrap();
        }
        let layout = Layout {
            repo_root: root.path().to_path_buf(),
            kubernetes: "1.33".to_owned(),
            kubernetes_bin: bin.join("1.33"),
            tools_bin: bin,
            state_dir: root.path().join("state"),
        };
        layout.require(&KUBERNETES_BINARIES).unwrap();
        let refusal = layout.require(&NODE_BINARIES).unwrap_err().to_string();
        assert!(
            refusal.contains("1.33/kube-scheduler is missing")
                && refusal.contains("make cluster-binaries KUBERNETES=1.33"),
            "{refusal}"
        );
    }
}
