//! kube-retention's OCI image, built without a container engine: one layer holding the static
//! (musl) binaries at the root of the file system, a config that runs as 65532:65532, and the
//! manifest and index of an OCI image layout (oci-spec's types), written as one tar archive (`oci-archive:` for
//! skopeo and podman, `crane push` for registries, `ctr images import` for containerd). Byte for
//! byte reproducible: every time stamp is the epoch and every file owned by root. A release
//! image has a manifest per platform (linux/amd64 and linux/arm64) under one image index, which
//! the tag names; a registry and a runtime pick the node's platform from it.
//!
//! The local cluster's node builds its pod sandbox ("pause") image with the same builder: one
//! static binary, an entrypoint and a user of its own ([`Image::entrypoint`], [`Image::user`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use anyhow::{Context, Result};
pub use oci_spec::image::Arch;
use oci_spec::image::{
    ConfigBuilder, Descriptor, Digest, HistoryBuilder, ImageConfigurationBuilder,
    ImageIndexBuilder, ImageManifestBuilder, MediaType, Os, PlatformBuilder, RootFsBuilder,
    SCHEMA_VERSION,
};
use ring::digest::{SHA256, digest};

/// The user the containers run as (deploy/ sets the same in each pod's securityContext).
pub const USER: &str = "65532:65532";
const EPOCH: &str = "1970-01-01T00:00:00Z";
const SOURCE: &str = "https://github.com/kube-retention/kube-retention";
/// `org.opencontainers.image.description` of kube-retention's image.
pub const DESCRIPTION: &str = "kube-retention's controller, admission webhook, certificate \
sidecar and kubectl plugin: deletes finished Kubernetes objects on time, never the wrong one";

/// What goes into the image.
pub struct Image {
    /// The binaries of each platform: one manifest each. One platform is written as the layout's
    /// only manifest; more as an image index that lists one manifest per platform.
    pub platforms: Vec<Binaries>,
    /// The tag in the layout's index (`org.opencontainers.image.ref.name`).
    pub tag: String,
    pub version: String,
    /// `org.opencontainers.image.title`.
    pub title: String,
    /// `org.opencontainers.image.description`.
    pub description: String,
    /// `org.opencontainers.image.revision`: the commit built, when known.
    pub revision: Option<String>,
    /// The config's `Entrypoint`; empty for none (the chart names each container's command).
    pub entrypoint: Vec<String>,
    /// The config's `User`, `uid:gid`.
    pub user: String,
}

/// One platform's static binaries, each put at `/` + its file name.
pub struct Binaries {
    pub architecture: Arch,
    pub paths: Vec<PathBuf>,
}

impl Binaries {
    pub fn amd64(paths: Vec<PathBuf>) -> Self {
        Self {
            architecture: Arch::Amd64,
            paths,
        }
    }
}

impl Image {
    /// kube-retention's own image: `platforms`, no entrypoint, run as [`USER`].
    pub fn kube_retention(platforms: Vec<Binaries>, tag: String) -> Self {
        Self {
            platforms,
            tag,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            title: "kube-retention".to_owned(),
            description: DESCRIPTION.to_owned(),
            revision: None,
            entrypoint: Vec::new(),
            user: USER.to_owned(),
        }
    }

    /// The `org.opencontainers.image.*` labels of each config, and the annotations of a
    /// multi-platform index.
    fn labels(&self) -> HashMap<String, String> {
        let mut labels: HashMap<String, String> = [
            ("org.opencontainers.image.title", self.title.as_str()),
            ("org.opencontainers.image.description", &self.description),
            ("org.opencontainers.image.version", &self.version),
            ("org.opencontainers.image.source", SOURCE),
            ("org.opencontainers.image.url", SOURCE),
            ("org.opencontainers.image.licenses", "Apache-2.0"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
        if let Some(revision) = &self.revision {
            labels.insert(
                "org.opencontainers.image.revision".to_owned(),
                revision.clone(),
            );
        }
        labels
    }
}

/// The hex SHA-256 of `bytes`, as `sha256sum` and krew write it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    digest(&SHA256, bytes)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `sha256:` and the hex digest of `bytes`: an OCI digest.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// Appends `bytes` as the file `path` with `mode` to `archive` as a reproducible build needs it:
/// the epoch as its time, root as its owner. The image's layer and layout, and the release's
/// plugin archives, are written with it.
pub fn append_reproducible<W: Write>(
    archive: &mut tar::Builder<W>,
    path: &str,
    bytes: &[u8],
    mode: u32,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(u64::try_from(bytes.len())?);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_cksum();
    archive
        .append_data(&mut header, path, bytes)
        .with_context(|| format!("archiving {path}"))
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

/// The blobs of one platform's image (manifest, config, compressed layer) and the manifest's
/// descriptor, its platform set.
struct BuiltPlatform {
    blobs: [Vec<u8>; 3],
    descriptor: Descriptor,
}

fn platform_image(image: &Image, binaries: &Binaries) -> Result<BuiltPlatform> {
    let layer = layer(&binaries.paths)?;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gzip.write_all(&layer)?;
    let compressed = gzip.finish()?;
    let mut settings = ConfigBuilder::default()
        .user(image.user.clone())
        .env(vec!["PATH=/".to_owned()])
        .labels(image.labels());
    if !image.entrypoint.is_empty() {
        settings = settings.entrypoint(image.entrypoint.clone());
    }
    let config = ImageConfigurationBuilder::default()
        .created(EPOCH.to_owned())
        .architecture(binaries.architecture.clone())
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
    manifest_descriptor.set_platform(Some(
        PlatformBuilder::default()
            .architecture(binaries.architecture.clone())
            .os(Os::Linux)
            .build()?,
    ));
    Ok(BuiltPlatform {
        blobs: [manifest, config, compressed],
        descriptor: manifest_descriptor,
    })
}

fn index(manifests: Vec<Descriptor>, annotations: HashMap<String, String>) -> Result<Vec<u8>> {
    let mut index = ImageIndexBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageIndex)
        .manifests(manifests);
    if !annotations.is_empty() {
        index = index.annotations(annotations);
    }
    canonical(&index.build()?)
}

/// Writes the image as an OCI layout in a tar archive at `out`; returns the digest the tag
/// names: the manifest's for one platform, the image index's for more.
pub fn build(image: &Image, out: &Path) -> Result<String> {
    anyhow::ensure!(!image.platforms.is_empty(), "an image of no platform");
    let mut blobs = Vec::new();
    let mut manifests = Vec::new();
    for binaries in &image.platforms {
        let built = platform_image(image, binaries)?;
        blobs.extend(built.blobs);
        manifests.push(built.descriptor);
    }
    let mut tagged = if let [only] = &manifests[..] {
        only.clone()
    } else {
        let platforms = index(manifests, image.labels())?;
        let tagged = descriptor(MediaType::ImageIndex, &platforms)?;
        blobs.push(platforms);
        tagged
    };
    tagged.set_annotations(Some(HashMap::from([(
        "org.opencontainers.image.ref.name".to_owned(),
        image.tag.clone(),
    )])));
    let digest = tagged.digest().to_string();
    let layout_index = index(vec![tagged], HashMap::new())?;
    let mut archive = tar::Builder::new(
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?,
    );
    let oci_layout = br#"{"imageLayoutVersion":"1.0.0"}"#;
    append_reproducible(&mut archive, "oci-layout", oci_layout, 0o644)?;
    append_reproducible(&mut archive, "index.json", &layout_index, 0o644)?;
    for blob in &blobs {
        let path = format!("blobs/sha256/{}", sha256_hex(blob));
        append_reproducible(&mut archive, &path, blob, 0o644)?;
    }
    archive.finish()?;
    Ok(digest)
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
        append_reproducible(&mut layer, &name, &bytes, 0o755)?;
    }
    Ok(layer.into_inner()?)
}

mod inspect;

pub use inspect::{Inspected, PlatformImage, command_for, inspect, is_dynamic};
