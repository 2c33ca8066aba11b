//! Reading an image archive back, checking what a registry or runtime would: every blob matches
//! its digest and size, the config's diff_id matches the uncompressed layer.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::sha256;

// The media types as the OCI image spec writes them, spelled out here rather than taken from
// oci-spec, which the builder uses: the check does not share the builder's mistakes.
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// An image read from its archive, every digest checked.
pub struct Inspected {
    /// The layout's `index.json`.
    pub index: Value,
    /// The image index the tag names, when the image has more than one platform.
    pub platform_index: Option<Value>,
    /// Each platform's image, by architecture (`amd64`, `arm64`).
    pub images: BTreeMap<String, PlatformImage>,
}

/// A layer's files: path → (mode, owner uid, bytes).
pub type LayerFiles = BTreeMap<String, (u32, u64, Vec<u8>)>;

/// One platform's manifest, config and layer.
pub struct PlatformImage {
    pub manifest: Value,
    pub config: Value,
    pub files: LayerFiles,
}

impl Inspected {
    /// The image of `architecture`.
    pub fn image(&self, architecture: &str) -> Result<&PlatformImage> {
        self.images.get(architecture).with_context(|| {
            format!(
                "no {architecture} image; the archive has {:?}",
                self.images.keys()
            )
        })
    }
}

pub fn inspect(archive: &Path) -> Result<Inspected> {
    let mut entries = BTreeMap::new();
    let mut reader = tar::Archive::new(
        std::fs::File::open(archive).with_context(|| format!("opening {}", archive.display()))?,
    );
    for entry in reader.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        entries.insert(path, bytes);
    }
    let layout: Value =
        serde_json::from_slice(entries.get("oci-layout").context("no oci-layout")?)?;
    ensure!(
        layout["imageLayoutVersion"] == "1.0.0",
        "oci-layout: {layout}"
    );
    let index: Value = serde_json::from_slice(entries.get("index.json").context("no index.json")?)?;
    ensure!(
        index["mediaType"] == INDEX && index["schemaVersion"] == 2,
        "index: {index}"
    );
    let blob = |descriptor: &Value, media_type: &str| -> Result<Vec<u8>> {
        ensure!(
            descriptor["mediaType"] == media_type,
            "{descriptor} is not a {media_type}"
        );
        let digest = descriptor["digest"].as_str().context("no digest")?;
        let path = format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"));
        let bytes = entries
            .get(&path)
            .with_context(|| format!("no blob {path}"))?
            .clone();
        ensure!(sha256(&bytes) == digest, "{path} does not match its digest");
        ensure!(
            descriptor["size"] == bytes.len(),
            "{path}: size {} in {descriptor}",
            bytes.len()
        );
        Ok(bytes)
    };
    let tagged = &index["manifests"][0];
    let (platform_index, manifests) = if tagged["mediaType"] == INDEX {
        let platforms: Value = serde_json::from_slice(&blob(tagged, INDEX)?)?;
        let manifests = platforms["manifests"]
            .as_array()
            .context("an image index without manifests")?
            .clone();
        (Some(platforms), manifests)
    } else {
        (None, vec![tagged.clone()])
    };
    let mut images = BTreeMap::new();
    for descriptor in &manifests {
        let manifest: Value = serde_json::from_slice(&blob(descriptor, MANIFEST)?)?;
        let config: Value = serde_json::from_slice(&blob(&manifest["config"], CONFIG)?)?;
        let architecture = config["architecture"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        ensure!(
            descriptor["platform"]["architecture"] == architecture.as_str()
                && descriptor["platform"]["os"] == config["os"],
            "the descriptor's platform {} is not the config's {architecture}",
            descriptor["platform"]
        );
        let compressed = blob(&manifest["layers"][0], LAYER)?;
        let files = layer_files(&compressed, &config)?;
        let image = PlatformImage {
            manifest,
            config,
            files,
        };
        ensure!(
            images.insert(architecture.clone(), image).is_none(),
            "two images for {architecture}"
        );
    }
    Ok(Inspected {
        index,
        platform_index,
        images,
    })
}

/// The files of a gzip-compressed layer, its diff_id checked against the config's.
fn layer_files(compressed: &[u8], config: &Value) -> Result<LayerFiles> {
    let mut layer = Vec::new();
    flate2::read::GzDecoder::new(compressed).read_to_end(&mut layer)?;
    ensure!(
        config["rootfs"]["diff_ids"][0] == sha256(&layer),
        "the diff_id does not match the layer"
    );
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(&layer[..]).entries()? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        let (mode, uid) = (entry.header().mode()?, entry.header().uid()?);
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        files.insert(path, (mode, uid, bytes));
    }
    Ok(files)
}

/// A command that runs the binary at `path`, built for `architecture`, on this amd64 machine:
/// amd64 binaries directly, arm64 ones under qemu-user (`qemu-aarch64`, Debian's qemu-user).
pub fn command_for(architecture: &str, path: &Path) -> Result<std::process::Command> {
    match architecture {
        "amd64" => Ok(std::process::Command::new(path)),
        "arm64" => {
            let mut qemu = std::process::Command::new("qemu-aarch64");
            qemu.arg(path);
            Ok(qemu)
        }
        other => anyhow::bail!("no way to run a {other} binary here"),
    }
}

/// Whether an ELF executable asks for a dynamic loader (a PT_INTERP program header).
pub fn is_dynamic(elf: &[u8]) -> Result<bool> {
    ensure!(
        elf.starts_with(b"\x7fELF") && elf.get(4) == Some(&2),
        "not a 64-bit ELF file"
    );
    let read = |at: usize, width: usize| -> Result<u64> {
        let bytes = elf.get(at..at + width).context("a truncated ELF header")?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0, |value, byte| (value << 8) | u64::from(*byte)))
    };
    let (offset, size, count) = (
        usize::try_from(read(0x20, 8)?)?,
        usize::try_from(read(0x36, 2)?)?,
        usize::try_from(read(0x38, 2)?)?,
    );
    for index in 0..count {
        if read(offset + index * size, 4)? == 3 {
            return Ok(true);
        }
    }
    Ok(false)
}
