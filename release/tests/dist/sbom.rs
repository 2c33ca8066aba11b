//! The SBOM: valid CycloneDX 1.5 by cyclonedx-bom's own validation, no local path in it, and
//! every crate `cargo tree` says the shipped binaries link, on either platform, listed with
//! Cargo.lock's checksum.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use cyclonedx_bom::models::bom::Bom;
use cyclonedx_bom::prelude::Validate;

use super::{VERSION, dist, workspace};

const TARGETS: [&str; 2] = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];
const SHIPPED_PACKAGES: [&str; 4] = [
    "kube-retention-controller",
    "kube-retention-webhook",
    "kube-retention-certs",
    "kube-retention-plugin",
];

/// The crates `cargo tree` says the shipped packages link for `target` (normal dependencies),
/// as (name, version).
fn linked_by_cargo_tree(target: &str) -> Result<BTreeSet<(String, String)>> {
    let mut tree = Command::new(env!("CARGO"));
    tree.args([
        "tree", "--edges", "normal", "--prefix", "none", "--format", "{p}",
    ])
    .args(["--target", target])
    .current_dir(workspace());
    for package in SHIPPED_PACKAGES {
        tree.args(["--package", package]);
    }
    let output = tree.output()?;
    ensure!(
        output.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let version = words.next()?.strip_prefix('v')?;
            Some((name.to_owned(), version.to_owned()))
        })
        .collect())
}

#[test]
#[ignore = "needs the folder `make release` writes: run by `make release-test`"]
fn the_sbom_is_valid_cyclonedx_listing_every_linked_crate() -> Result<()> {
    let path = dist()?.join(format!("kube-retention-{VERSION}.cdx.json"));
    let text = std::fs::read_to_string(&path)?;
    // Reproducible and private: no path of the machine that built it.
    ensure!(!text.contains("file://"), "the SBOM names a local path");
    let bom = Bom::parse_from_json_v1_5(text.as_bytes())
        .with_context(|| format!("parsing {}", path.display()))?;
    let validation = bom.validate();
    ensure!(validation.passed(), "{validation:?}");
    let lockfile: toml::Value =
        toml::from_str(&std::fs::read_to_string(workspace().join("Cargo.lock"))?)?;
    let checksums: BTreeMap<(String, String), String> = lockfile["package"]
        .as_array()
        .context("Cargo.lock lists no packages")?
        .iter()
        .filter_map(|package| {
            Some((
                (
                    package["name"].as_str()?.to_owned(),
                    package["version"].as_str()?.to_owned(),
                ),
                package.get("checksum")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    let components = &bom.components.as_ref().context("no components")?.0;
    let listed: BTreeMap<(String, String), Option<String>> = components
        .iter()
        .map(|component| {
            let version = component
                .version
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let hash = component
                .hashes
                .as_ref()
                .and_then(|hashes| hashes.0.first())
                .map(|hash| hash.content.0.clone());
            ((component.name.to_string(), version), hash)
        })
        .collect();
    let mut linked = BTreeSet::new();
    for target in TARGETS {
        linked.extend(linked_by_cargo_tree(target)?);
    }
    ensure!(linked.len() > 100, "cargo tree listed only {linked:?}");
    let missing: Vec<_> = linked
        .iter()
        .filter(|crate_| !listed.contains_key(*crate_))
        .collect();
    ensure!(missing.is_empty(), "the SBOM lacks {missing:?}");
    for (crate_, hash) in &listed {
        ensure!(
            hash.as_ref() == checksums.get(crate_),
            "{crate_:?}: the SBOM's hash {hash:?} is not Cargo.lock's {:?}",
            checksums.get(crate_)
        );
    }
    Ok(())
}
