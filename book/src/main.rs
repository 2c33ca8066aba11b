//! Writes the book's generated reference pages, or checks that they are current: the CRDs'
//! fields from the Rust types (`crds`), and every binary's flags from its own `--help`
//! (`flags`). `make book` writes them; `make test` fails while a checked-in page is stale, as it
//! does for the CRDs' YAML, so the reference cannot drift from the code.

mod crds;
mod flags;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;

#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Where the built binaries are (`make build` puts them in target/debug).
    #[arg(long, default_value = "target/debug")]
    bin_dir: PathBuf,
    /// The book's reference folder.
    #[arg(long, default_value = "docs/reference")]
    out: PathBuf,
    /// Compare with the checked-in pages instead of writing them, and fail naming each stale one.
    #[arg(long)]
    check: bool,
}

impl Args {
    fn run(self) -> Result<()> {
        let pages = [
            ("crds.md", crds::page()?),
            ("flags.md", flags::page(&self.bin_dir)?),
        ];
        if self.check {
            return check(&self.out, &pages);
        }
        for (name, text) in &pages {
            let path = self.out.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
        }
        Ok(())
    }
}

/// Fails naming every page whose checked-in text is not what the code says now.
fn check(out: &Path, pages: &[(&str, String)]) -> Result<()> {
    let stale: Vec<String> = pages
        .iter()
        .filter(|(name, text)| std::fs::read_to_string(out.join(name)).ok().as_ref() != Some(text))
        .map(|(name, _)| out.join(name).display().to_string())
        .collect();
    if !stale.is_empty() {
        bail!("stale: {}; run `make book` to write them", stale.join(", "));
    }
    Ok(())
}

fn main() -> ExitCode {
    match Args::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("book-reference: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_or_missing_page_is_named_and_a_current_one_is_not() {
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("crds.md"), "current\n").unwrap();
        std::fs::write(out.path().join("flags.md"), "old\n").unwrap();
        let pages = [
            ("crds.md", "current\n".to_owned()),
            ("flags.md", "new\n".to_owned()),
            ("metrics.md", "new\n".to_owned()),
        ];
        let error = check(out.path(), &pages).unwrap_err().to_string();
        assert!(
            error.contains("flags.md") && error.contains("metrics.md"),
            "{error}"
        );
        assert!(!error.contains("crds.md"), "{error}");
        assert!(check(out.path(), &pages[..1]).is_ok());
    }
}
