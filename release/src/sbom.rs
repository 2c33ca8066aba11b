//! The release's SBOM: a CycloneDX 1.5 document (cyclonedx-bom's model and writer) of every
//! crate the shipped binaries link, on either platform.
//!
//! What is linked comes from cargo itself: `cargo metadata --filter-platform` for each target
//! resolves the dependency graph as a build for that platform does, and the components are the
//! crates reachable from the binaries' packages along normal dependencies (build scripts' and
//! tests' dependencies are not linked; procedural macros are listed, as the code they expand to
//! is). Each component carries its purl (`pkg:cargo/name@version`), its licence as the crate
//! declares it (as SPDX where it can be read as SPDX), and the SHA-256 that `Cargo.lock` holds for it; the workspace's own crates are
//! built from this source and carry none. The document's serial number is derived from what it
//! lists, so the same release writes the same SBOM.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use cargo_metadata::{DependencyKind, MetadataCommand, Package, PackageId};
use cyclonedx_bom::external_models::spdx::SpdxExpression;
use cyclonedx_bom::external_models::uri::Purl;
use cyclonedx_bom::models::bom::{Bom, UrnUuid};
use cyclonedx_bom::models::component::{Classification, Component, Components};
use cyclonedx_bom::models::dependency::{Dependencies, Dependency};
use cyclonedx_bom::models::hash::{Hash, HashAlgorithm, HashValue, Hashes};
use cyclonedx_bom::models::license::{License, LicenseChoice, Licenses};
use cyclonedx_bom::models::metadata::Metadata;
use serde::Deserialize;

/// The packages whose binaries the image and the plugin archives ship.
pub const SHIPPED_PACKAGES: [&str; 4] = [
    "kube-retention-controller",
    "kube-retention-webhook",
    "kube-retention-certs",
    "kube-retention-plugin",
];

/// A crate the binaries link, as cargo resolved it.
struct Linked<'a> {
    package: &'a Package,
    /// The crates it links, by package id.
    dependencies: BTreeSet<&'a PackageId>,
}

/// Writes the SBOM of the workspace at `workspace` for `targets` to `out`.
pub fn write(workspace: &Path, targets: &[&str], version: &str, out: &Path) -> Result<()> {
    let checksums = lockfile_checksums(&workspace.join("Cargo.lock"))?;
    let mut metadata = Vec::new();
    for target in targets {
        metadata.push(
            MetadataCommand::new()
                .manifest_path(workspace.join("Cargo.toml"))
                .other_options(vec!["--filter-platform".to_owned(), (*target).to_owned()])
                .exec()
                .with_context(|| format!("cargo metadata --filter-platform {target}"))?,
        );
    }
    let mut linked: BTreeMap<&PackageId, Linked> = BTreeMap::new();
    for resolved in &metadata {
        for (id, crate_) in linked_crates(resolved)? {
            linked
                .entry(id)
                .or_insert(Linked {
                    package: crate_.package,
                    dependencies: BTreeSet::new(),
                })
                .dependencies
                .extend(crate_.dependencies);
        }
    }
    // `name@version` names a crate in the document: unique in one resolved graph, and unlike
    // cargo's package ids it holds no path of the machine that built the release.
    let reference = |id: &PackageId| -> Result<String> {
        let package = linked
            .get(id)
            .with_context(|| format!("{id} is linked but not listed"))?
            .package;
        Ok(format!("{}@{}", package.name, package.version))
    };
    let mut components = Vec::new();
    let mut dependencies = Vec::new();
    for (id, crate_) in &linked {
        let listed_as = reference(id)?;
        components.push(component(crate_.package, listed_as.clone(), &checksums)?);
        dependencies.push(Dependency {
            dependency_ref: listed_as,
            dependencies: crate_
                .dependencies
                .iter()
                .map(|dependency| reference(dependency))
                .collect::<Result<_>>()?,
        });
    }
    let mut release = Component::new(Classification::Application, "kube-retention", version, None);
    release.purl = Some(Purl::new("oci", "kube-retention", version)?);
    release.licenses = Some(Licenses(vec![LicenseChoice::Expression(
        SpdxExpression::new("Apache-2.0"),
    )]));
    let listed: Vec<&str> = dependencies
        .iter()
        .map(|dependency| dependency.dependency_ref.as_str())
        .collect();
    let bom = Bom {
        serial_number: Some(serial_number(version, &listed)),
        metadata: Some(Metadata {
            component: Some(release),
            ..Metadata::default()
        }),
        components: Some(Components(components)),
        dependencies: Some(Dependencies(dependencies)),
        ..Bom::default()
    };
    let mut file =
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    bom.output_as_json_v1_5(&mut file)
        .with_context(|| format!("writing the SBOM to {}", out.display()))
}

/// The crates reachable from [`SHIPPED_PACKAGES`] along normal dependencies in one platform's
/// resolved graph.
fn linked_crates(metadata: &cargo_metadata::Metadata) -> Result<BTreeMap<&PackageId, Linked<'_>>> {
    let resolve = metadata
        .resolve
        .as_ref()
        .context("cargo metadata resolved no dependency graph")?;
    let packages: BTreeMap<&PackageId, &Package> = metadata
        .packages
        .iter()
        .map(|package| (&package.id, package))
        .collect();
    let nodes: BTreeMap<&PackageId, &cargo_metadata::Node> =
        resolve.nodes.iter().map(|node| (&node.id, node)).collect();
    let mut pending: Vec<&PackageId> = metadata
        .workspace_packages()
        .into_iter()
        .filter(|package| SHIPPED_PACKAGES.contains(&package.name.as_str()))
        .map(|package| &package.id)
        .collect();
    anyhow::ensure!(
        pending.len() == SHIPPED_PACKAGES.len(),
        "the workspace lacks one of {SHIPPED_PACKAGES:?}"
    );
    let mut linked = BTreeMap::new();
    while let Some(id) = pending.pop() {
        if linked.contains_key(id) {
            continue;
        }
        let node = nodes
            .get(id)
            .with_context(|| format!("{id} is not in the resolved graph"))?;
        let dependencies: BTreeSet<&PackageId> = node
            .deps
            .iter()
            .filter(|dependency| {
                dependency
                    .dep_kinds
                    .iter()
                    .any(|kind| kind.kind == DependencyKind::Normal)
            })
            .map(|dependency| &dependency.pkg)
            .collect();
        pending.extend(dependencies.iter().copied());
        let package = packages
            .get(id)
            .with_context(|| format!("{id} has no package"))?;
        linked.insert(
            id,
            Linked {
                package,
                dependencies,
            },
        );
    }
    Ok(linked)
}

fn component(
    package: &Package,
    reference: String,
    checksums: &BTreeMap<(String, String), String>,
) -> Result<Component> {
    let (name, version) = (package.name.as_str(), package.version.to_string());
    let mut component = Component::new(Classification::Library, name, &version, Some(reference));
    component.purl = Some(Purl::new("cargo", name, &version)?);
    component.description = package.description.as_deref().map(Into::into);
    component.licenses = package
        .license
        .as_deref()
        .map(|declared| Licenses(vec![licence(declared)]));
    if let Some(checksum) = checksums.get(&(name.to_owned(), version.clone())) {
        component.hashes = Some(Hashes(vec![Hash {
            alg: HashAlgorithm::SHA_256,
            content: HashValue(checksum.clone()),
        }]));
    }
    Ok(component)
}

/// A crate's declared licence as an SPDX expression; the old `MIT/Apache-2.0` form read as the
/// `OR` it means, and anything that still is not SPDX kept by name.
fn licence(declared: &str) -> LicenseChoice {
    match SpdxExpression::parse_lax(declared.to_owned()) {
        Ok(expression) => LicenseChoice::Expression(expression),
        Err(_) => LicenseChoice::License(License::named_license(declared)),
    }
}

#[derive(Deserialize)]
struct Lockfile {
    package: Vec<LockedPackage>,
}

#[derive(Deserialize)]
struct LockedPackage {
    name: String,
    version: String,
    checksum: Option<String>,
}

/// `Cargo.lock`'s SHA-256 of each registry crate, by name and version.
fn lockfile_checksums(path: &Path) -> Result<BTreeMap<(String, String), String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let lockfile: Lockfile =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(lockfile
        .package
        .into_iter()
        .filter_map(|package| Some(((package.name, package.version), package.checksum?)))
        .collect())
}

/// A version 4 UUID whose random bits are the first of the SHA-256 of the version and the
/// listed crates: the same for the same release.
fn serial_number(version: &str, listed: &[&str]) -> UrnUuid {
    let hashed = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{version}\n{}", listed.join("\n")).as_bytes(),
    );
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&hashed.as_ref()[..16]);
    let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
    UrnUuid(format!("urn:uuid:{uuid}"))
}
