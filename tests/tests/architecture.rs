//! ARCHITECTURE.md is the map from concepts to files, so every path it names must exist. A path
//! is a backticked name that ends in `/` or a file extension, or starts with a top-level folder
//! of the checkout; one with a `<placeholder>` is a pattern, not a path. It is looked up from the
//! checkout's root, or, as the map names files inside a folder it has just named
//! (`controller/src/executor/` … `requests.rs`, the crate `common/` … `cel/meter.rs`), inside a
//! folder a path before it in the same paragraph, list item or table row resolved to, one of
//! that folder's parents, or their `src/`. `NN` stands for digits (`1.NN.mod`, one file per
//! Kubernetes minor).

use std::path::{Path, PathBuf};

const EXTENSIONS: [&str; 9] = ["rs", "md", "yaml", "yml", "toml", "json", "sh", "mod", "c"];

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The text's blocks: paragraphs, and each list item and table row on its own.
fn blocks(text: &str) -> Vec<String> {
    let mut blocks = vec![String::new()];
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let starts_item = trimmed.starts_with("- ")
            || trimmed.starts_with('|')
            || trimmed.split_once(". ").is_some_and(|(number, _)| {
                !number.is_empty() && number.chars().all(|c| c.is_ascii_digit())
            });
        if !fenced && (trimmed.is_empty() || starts_item) {
            blocks.push(String::new());
        }
        if !fenced {
            let block = blocks.last_mut().expect("a block");
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// The backticked names of `block` that are paths.
fn paths(block: &str, top_level: &[String]) -> Vec<String> {
    block
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| !span.contains(char::is_whitespace) && !span.contains("::"))
        .filter(|span| !span.contains('<'))
        .filter(|span| !span.starts_with('-') && !span.contains('='))
        .filter(|span| {
            span.ends_with('/')
                || span
                    .rsplit_once('.')
                    .is_some_and(|(_, extension)| EXTENSIONS.contains(&extension))
                || top_level
                    .iter()
                    .any(|folder| span.starts_with(&format!("{folder}/")))
        })
        .map(str::to_owned)
        .collect()
}

/// Whether `path` names something under `base`; `NN` in its file name stands for digits.
fn exists(base: &Path, path: &str) -> bool {
    let Some((stem, rest)) = path.split_once("NN") else {
        return base.join(path).exists();
    };
    let (folder, prefix) = stem.rsplit_once('/').unwrap_or(("", stem));
    let Ok(entries) = std::fs::read_dir(base.join(folder)) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        name.strip_prefix(prefix)
            .and_then(|tail| tail.strip_suffix(rest))
            .is_some_and(|digits| !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
    })
}

/// Where `path` resolves: from the root, else within a folder of `context`, one of its
/// parents, or their `src/`.
fn resolve(root: &Path, context: &[PathBuf], path: &str) -> Option<PathBuf> {
    if exists(root, path) {
        return Some(root.join(path));
    }
    context
        .iter()
        .flat_map(|folder| folder.ancestors())
        .filter(|folder| folder.starts_with(root))
        .flat_map(|folder| [folder.to_path_buf(), folder.join("src")])
        .find(|folder| exists(folder, path))
        .map(|folder| folder.join(path))
}

fn missing_paths(root: &Path, text: &str) -> Vec<String> {
    let top_level: Vec<String> = std::fs::read_dir(root)
        .expect("reading the checkout")
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    let mut missing = Vec::new();
    for block in blocks(text) {
        let mut context: Vec<PathBuf> = Vec::new();
        for path in paths(&block, &top_level) {
            match resolve(root, &context, &path) {
                Some(found) if found.is_dir() => context.push(found),
                Some(found) => context.extend(found.parent().map(Path::to_path_buf)),
                None => missing.push(path),
            }
        }
    }
    missing
}

#[test]
fn every_path_architecture_names_exists() {
    let root = checkout();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let missing = missing_paths(&root, &text);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:#?}"
    );
}

#[test]
fn a_path_that_does_not_exist_is_found_missing_and_one_inside_a_named_folder_is_not() {
    let root = checkout();
    let text = "The loop (`controller/src/run/`, its readiness in `readiness.rs`) and \
                `common/src/policy.rs`.\n\n- `tests/cluster/kubernetes/` holds a `1.NN.mod` \
                per minor, not a `1.NN.sh`\n\n| `common/` | `cel/meter.rs`, `<crate>/x.rs` |\n\
                \nElsewhere, `readiness.rs` alone.\n";
    assert_eq!(
        missing_paths(&root, text),
        ["common/src/policy.rs", "1.NN.sh", "readiness.rs"]
    );
}
