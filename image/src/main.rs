//! `oci-image`: writes kube-retention's OCI image (an OCI layout in a tar archive) from static
//! binaries. `make image` builds the binaries for musl and calls it; `make release` with the
//! arm64 binaries too, for an image index of both platforms.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kube_retention_image::{Arch, Binaries, Image, build};

#[derive(Parser)]
#[command(
    name = "oci-image",
    version,
    about = "Builds kube-retention's OCI image without a container engine"
)]
struct Args {
    /// Where to write the archive.
    #[arg(long)]
    out: PathBuf,
    /// The tag in the image index.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    tag: String,
    /// `org.opencontainers.image.title`; another title than kube-retention's is another image
    /// (the local node's pause image).
    #[arg(long, default_value = "kube-retention")]
    title: String,
    /// The entrypoint, one argument per use; none by default.
    #[arg(long)]
    entrypoint: Vec<String>,
    /// The user the image runs as, `uid:gid`.
    #[arg(long, default_value = kube_retention_image::USER)]
    user: String,
    /// `org.opencontainers.image.revision`: the commit the binaries were built from.
    #[arg(long)]
    revision: Option<String>,
    /// The linux/arm64 binaries, one per use: with them the tag names an image index of both
    /// platforms.
    #[arg(long, value_name = "BINARY")]
    arm64: Vec<PathBuf>,
    /// The linux/amd64 static binaries to put at the root of the image.
    #[arg(required = true)]
    binaries: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut platforms = vec![Binaries::amd64(args.binaries)];
    if !args.arm64.is_empty() {
        platforms.push(Binaries {
            architecture: Arch::ARM64,
            paths: args.arm64,
        });
    }
    let image = Image {
        title: args.title,
        entrypoint: args.entrypoint,
        user: args.user,
        revision: args.revision,
        ..Image::kube_retention(platforms, args.tag)
    };
    match build(&image, &args.out) {
        Ok(digest) => {
            println!("wrote {} ({digest})", args.out.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
