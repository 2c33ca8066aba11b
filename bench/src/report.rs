//! docs/benchmarks.md: each benchmark owns one section between markers and rewrites only that,
//! so the file keeps the other benchmarks' latest results and any prose around them.

use std::path::Path;

use anyhow::Result;

/// Replaces the section `name` of `file` (creating the file or section as needed).
pub fn write_section(file: &Path, name: &str, body: &str) -> Result<()> {
    let begin = format!("<!-- begin {name} -->");
    let end = format!("<!-- end {name} -->");
    let section = format!("{begin}\n{}\n{end}", body.trim_end());
    let current = std::fs::read_to_string(file).unwrap_or_else(|_| "# Benchmarks\n".to_owned());
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
    std::fs::write(file, updated)?;
    Ok(())
}
