//! docs/benchmarks/: a page per area, and each benchmark owns one section of its area's page
//! between markers and rewrites only that, so a page keeps the other benchmarks' latest results
//! and any prose around them. Which page a section belongs to is said here, once.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The pages of docs/benchmarks/, by the prefix of the sections they hold: (prefix, page, title).
const PAGES: &[(&str, &str, &str)] = &[
    ("webhook", "webhook.md", "Benchmarks: the webhook"),
    ("controller", "controller.md", "Benchmarks: the controller"),
    ("cel", "cel.md", "Benchmarks: CEL"),
    ("envelope", "envelope.md", "Benchmarks: the envelope"),
    (
        "peers",
        "peers.md",
        "Benchmarks: the peers admins install instead",
    ),
];

/// The page of `folder` that holds the section `name`, and that page's title.
fn page(folder: &Path, name: &str) -> Result<(PathBuf, &'static str)> {
    let Some((_, page, title)) = PAGES
        .iter()
        .find(|(prefix, _, _)| name == *prefix || name.starts_with(&format!("{prefix}-")))
    else {
        bail!(
            "no page of the benchmarks holds the section {name:?}: add its area to bench/src/report.rs"
        )
    };
    Ok((folder.join(page), title))
}

/// Replaces the section `name` of its page in `folder` (creating the page or section as needed).
pub fn write_section(folder: &Path, name: &str, body: &str) -> Result<()> {
    let (file, title) = page(folder, name)?;
    let begin = format!("<!-- begin {name} -->");
    let end = format!("<!-- end {name} -->");
    let section = format!("{begin}\n{}\n{end}", body.trim_end());
    let current = std::fs::read_to_string(&file).unwrap_or_else(|_| format!("# {title}\n"));
    let updated = match (current.find(&begin), current.find(&end)) {
        (Some(start), Some(stop)) if start < stop => {
            format!(
                "{}{section}{}",
                &current[..start],
                &current[stop + end.len()..]
            )
        }
        _ => format!("{}\n{section}\n", current.trim_end()),
    };
    std::fs::create_dir_all(folder)
        .with_context(|| format!("creating the benchmarks' folder {}", folder.display()))?;
    std::fs::write(&file, updated).with_context(|| format!("writing {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_section_goes_to_its_areas_page() {
        let folder = Path::new("docs/benchmarks");
        for (name, expected) in [
            ("webhook", "webhook.md"),
            ("webhook-memcpy", "webhook.md"),
            ("webhook-writers", "webhook.md"),
            ("controller-ledger", "controller.md"),
            ("cel", "cel.md"),
            ("envelope-scale-400000", "envelope.md"),
        ] {
            assert_eq!(
                page(folder, name).unwrap().0,
                folder.join(expected),
                "{name}"
            );
        }
        let error = page(folder, "celery").unwrap_err().to_string();
        assert!(error.contains("\"celery\""), "{error}");
    }

    #[test]
    fn a_section_is_replaced_in_place_and_the_rest_of_its_page_kept() {
        let folder = tempfile::tempdir().unwrap();
        write_section(folder.path(), "cel", "first").unwrap();
        write_section(folder.path(), "cel-stack", "stack").unwrap();
        write_section(folder.path(), "cel", "second").unwrap();
        let page = std::fs::read_to_string(folder.path().join("cel.md")).unwrap();
        assert_eq!(
            page,
            "# Benchmarks: CEL\n<!-- begin cel -->\nsecond\n<!-- end cel -->\n\
             <!-- begin cel-stack -->\nstack\n<!-- end cel-stack -->\n"
        );
    }
}
