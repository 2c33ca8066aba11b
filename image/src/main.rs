//! `oci-image`: writes kube-retention's OCI image (an OCI layout in a tar archive) from static
//! binaries for linux/amd64. `make image` builds the binaries for musl and calls it; `make
//! release` writes its image index of both platforms through the library (release/).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kube_retention_image::{Binaries, Image, build};

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
    /// The linux/amd64 static binaries to put at the root of the image.
    #[arg(required = true)]
    binaries: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let image = Image {
        title: args.title,
        entrypoint: args.entrypoint,
        user: args.user,
        ..Image::kube_retention(vec![Binaries::amd64(args.binaries)], args.tag)
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
