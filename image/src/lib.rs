//! kube-retention's OCI image, built without a container engine: one layer holding the static
//! (musl) binaries at the root of the file system, a config that runs as 65532:65532, and the
//! manifest and index of an OCI image layout (oci-spec's types), written as one tar archive (`oci-archive:` for
//! skopeo and podman, `crane push` for registries, `ctr images import` for containerd). Byte for
//! byte reproducible: every time stamp is the epoch and every file owned by root.
//!
//! The local cluster's node builds its pod sandbox ("pause") image with the same builder: one
//! static binary, an entrypoint and a user of its own ([`Image::entrypoint`], [`Image::user`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use anyhow::{Context, Result};
use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, Digest, HistoryBuilder, ImageConfigurationBuilder,
    ImageIndexBuilder, ImageManifestBuilder, MediaType, Os, Platform, PlatformBuilder,
    RootFsBuilder, SCHEMA_VERSION,
};
use ring::digest::{SHA256, digest};

/// The user the containers run as (deploy/ sets the same in each pod's securityContext).
pub const USER: &str = "65532:65532";
const EPOCH: &str = "1970-01-01T00:00:00Z";

/// What goes into the image.
pub struct Image {
    /// Each binary, put at `/` + its file name.
    pub binaries: Vec<PathBuf>,
    /// The tag in the index (`org.opencontainers.image.ref.name`).
    pub tag: String,
    pub version: String,
    /// `org.opencontainers.image.title`.
    pub title: String,
    /// The config's `Entrypoint`; empty for none (the chart names each container's command).
    pub entrypoint: Vec<String>,
    /// The config's `User`, `uid:gid`.
    pub user: String,
}

impl Image {
    /// kube-retention's own image: `binaries`, no entrypoint, run as [`USER`].
    pub fn kube_retention(binaries: Vec<PathBuf>, tag: String) -> Self {
        Self {
            binaries,
            tag,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            title: "kube-retention".to_owned(),
            entrypoint: Vec::new(),
            user: USER.to_owned(),
        }
    }
}

/// `sha256:` and the hex digest of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let hash = digest(&SHA256, bytes);
    let hex: String = hash
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The descriptor of a blob: its media type, digest and size.
fn descriptor(media_type: MediaType, bytes: &[u8]) -> Result<Descriptor> {
    let digest: Digest = sha256(bytes).parse()?;
    Ok(Descriptor::new(
        media_type,
        u64::try_from(bytes.len())?,
        digest,
    ))
}

/// `value` as JSON with its keys sorted: oci-spec keeps labels and annotations in `HashMap`s,
/// whose order would change the digests from one build to the next.
fn canonical(value: &impl serde::Serialize) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(&serde_json::to_value(value)?)?)
}

fn linux_amd64() -> Result<Platform> {
    Ok(PlatformBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::Linux)
        .build()?)
}

/// Writes the image as an OCI layout in a tar archive at `out`; returns the manifest's digest.
pub fn build(image: &Image, out: &Path) -> Result<String> {
    let layer = layer(&image.binaries)?;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gzip.write_all(&layer)?;
    let compressed = gzip.finish()?;
    let labels: HashMap<String, String> = HashMap::from([
        ("org.opencontainers.image.title", image.title.as_str()),
        ("org.opencontainers.image.version", image.version.as_str()),
        (
            "org.opencontainers.image.source",
            "https://github.com/kube-retention/kube-retention",
        ),
        ("org.opencontainers.image.licenses", "Apache-2.0"),
    ])
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    let mut settings = ConfigBuilder::default()
        .user(image.user.clone())
        .env(vec!["PATH=/".to_owned()])
        .labels(labels);
    if !image.entrypoint.is_empty() {
        settings = settings.entrypoint(image.entrypoint.clone());
    }
    let config = ImageConfigurationBuilder::default()
        .created(EPOCH.to_owned())
        .architecture(Arch::Amd64)
        .os(Os::Linux)
        .config(settings.build()?)
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![sha256(&layer)])
                .build()?,
        )
        .history(vec![
            HistoryBuilder::default()
                .created(EPOCH.to_owned())
                .created_by(format!("make image: {}", image.title))
                .build()?,
        ])
        .build()?;
    let config = canonical(&config)?;
    let manifest = ImageManifestBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(MediaType::ImageConfig, &config)?)
        .layers(vec![descriptor(MediaType::ImageLayerGzip, &compressed)?])
        .build()?;
    let manifest = canonical(&manifest)?;
    let mut manifest_descriptor = descriptor(MediaType::ImageManifest, &manifest)?;
    manifest_descriptor.set_annotations(Some(HashMap::from([(
        "org.opencontainers.image.ref.name".to_owned(),
        image.tag.clone(),
    )])));
    manifest_descriptor.set_platform(Some(linux_amd64()?));
    let index = ImageIndexBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![manifest_descriptor])
        .build()?;
    let index = canonical(&index)?;
    let mut archive = tar::Builder::new(
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?,
    );
    let mut add = |path: &str, bytes: &[u8], mode: u32| -> Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_size(u64::try_from(bytes.len())?);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_cksum();
        archive.append_data(&mut header, path, bytes)?;
        Ok(())
    };
    add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#, 0o644)?;
    add("index.json", &index, 0o644)?;
    for blob in [&manifest, &config, &compressed] {
        let hex = sha256(blob).trim_start_matches("sha256:").to_owned();
        add(&format!("blobs/sha256/{hex}"), blob, 0o644)?;
    }
    archive.finish()?;
    Ok(sha256(&manifest))
}

/// The uncompressed layer: each binary at `/` + its file name, 0755, owned by root.
fn layer(binaries: &[PathBuf]) -> Result<Vec<u8>> {
    let mut layer = tar::Builder::new(Vec::new());
    let mut sorted = binaries.to_vec();
    sorted.sort();
    for binary in &sorted {
        let name = binary
            .file_name()
            .context("a binary without a file name")?
            .to_string_lossy()
            .into_owned();
        let mut bytes = Vec::new();
        std::fs::File::open(binary)
            .with_context(|| format!("reading {}", binary.display()))?
            .read_to_end(&mut bytes)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(u64::try_from(bytes.len())?);
        header.set_mode(0o755);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_cksum();
        layer.append_data(&mut header, &name, &bytes[..])?;
    }
    Ok(layer.into_inner()?)
}

mod inspect;

pub use inspect::{Inspected, inspect, is_dynamic};
