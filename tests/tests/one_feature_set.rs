//! Each third-party crate is compiled once per profile and target, whichever packages a `cargo`
//! command names. Cargo resolves features for the packages a command selects: without
//! workspace-hack/ (kept by `cargo hakari`, .config/hakari.toml), `cargo test -p X` compiled
//! tokio, serde_json and most of what depends on them again, with the features X alone asks
//! for. `make test` runs a dozen such commands; on a fresh clone that was minutes each.
//!
//! This test holds the workspace-hack current without cargo-hakari installed: for each member
//! alone, on the host and on the release's targets, `cargo tree` must give every third-party
//! crate only feature sets the whole workspace gives it. When it fails, `cargo hakari generate`
//! (and `cargo hakari manage-deps` for a new member) makes it pass.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use serde_json::Value;

/// What the test reads of `.config/hakari.toml`, the workspace-hack's configuration.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Hakari {
    /// Where the workspace is built.
    platforms: Vec<String>,
    traversal_excludes: Excludes,
}

/// The members left out of the workspace-hack.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Excludes {
    workspace_members: Vec<String>,
}

fn hakari() -> Result<Hakari> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.config/hakari.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// "name version" -> the feature sets it is compiled with (a build dependency may differ).
type FeatureSets = BTreeMap<String, BTreeSet<String>>;

fn cargo(args: &[&str]) -> Result<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(&root)
        .output()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "cargo {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8(output.stdout).context("cargo's output is UTF-8")
}

/// The third-party crates of `selection` on `target`, with their features.
fn feature_sets(selection: &[&str], target: &str) -> Result<FeatureSets> {
    let mut args = vec!["tree", "--locked", "--offline", "--prefix", "none"];
    args.extend(["--format", "{p} [{f}]", "--edges", "normal,build,dev"]);
    args.extend(["--target", target]);
    args.extend(selection);
    let mut sets = FeatureSets::new();
    for line in cargo(&args)?.lines() {
        // A member is printed with its path: "kube-retention-common v0.2.0 (/...)".
        if line.contains(" (/") || line.trim().is_empty() {
            continue;
        }
        let line = line.trim_end_matches(" (*)").replace(" (proc-macro)", "");
        let (package, features) = line
            .split_once(" [")
            .with_context(|| format!("a line of cargo tree: {line}"))?;
        sets.entry(package.to_owned())
            .or_default()
            .insert(features.trim_end_matches(']').to_owned());
    }
    Ok(sets)
}

fn members(excluded: &[String]) -> Result<Vec<String>> {
    let metadata: Value = serde_json::from_str(&cargo(&[
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
        "--offline",
    ])?)?;
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata lists packages")?;
    Ok(packages
        .iter()
        .filter_map(|package| package["name"].as_str().map(str::to_owned))
        .filter(|name| !excluded.contains(name))
        .collect())
}

#[test]
fn each_member_alone_compiles_third_party_crates_with_the_workspace_features() -> Result<()> {
    let hakari = hakari()?;
    let excluded = &hakari.traversal_excludes.workspace_members;
    let members = members(excluded)?;
    ensure!(members.len() > 10, "the workspace's members: {members:?}");
    ensure!(
        !hakari.platforms.is_empty(),
        "hakari.toml names no platform"
    );
    let mut whole_workspace = vec!["--workspace"];
    for member in excluded {
        whole_workspace.extend(["--exclude", member]);
    }
    let mut differences = Vec::new();
    for target in &hakari.platforms {
        let workspace = feature_sets(&whole_workspace, target)?;
        for member in &members {
            for (package, sets) in feature_sets(&["--package", member], target)? {
                // A crate built for the host too (a build script's or a proc-macro's
                // dependency) may have a second feature set; each one a member needs must be
                // one the workspace compiles, or the member compiles it again.
                if let Some(whole) = workspace.get(&package)
                    && !sets.is_subset(whole)
                {
                    differences.push(format!(
                        "{target}: `-p {member}` compiles {package} with {sets:?}, \
                         the workspace with {whole:?}"
                    ));
                }
            }
        }
    }
    ensure!(
        differences.is_empty(),
        "workspace-hack/ is stale, so these crates compile again for each package selection \
         (run `cargo hakari generate`):\n{}",
        differences.join("\n")
    );
    Ok(())
}
