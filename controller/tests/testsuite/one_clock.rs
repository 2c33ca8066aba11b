//! One clock: the controller's parts read the time from the [`Clock`] they are given, never
//! from the system, so a test on paused time drives all of them, and a deadline, a breaker's
//! window, a Lease's renewal and a ledger entry agree on what time it is. Only `clock.rs`
//! reads the system's wall clock; this scans the controller's sources and those of the
//! workspace's crates it is built from ([`SOURCES`]) for any other reading.
//!
//! [`Clock`]: kube_retention_io::clock::Clock

use std::path::{Path, PathBuf};

/// The controller's sources and those of the workspace crates it runs, from its manifest's folder.
const SOURCES: [&str; 8] = [
    "src",
    "../cleaners/src",
    "../helm/src",
    "../io/src",
    "../sinks/src",
    "../runtime/src",
    "../state/src",
    "../evaluator/src",
];

const SYSTEM_READINGS: [&str; 4] = [
    "Timestamp::now()",
    "Utc::now()",
    "SystemTime::now()",
    "Local::now()",
];

fn sources(folder: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(folder).unwrap_or_else(|error| panic!("{folder:?}: {error}"));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn only_the_clock_reads_the_systems_time() {
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for folder in SOURCES {
        sources(&crate_root.join(folder), &mut files);
    }
    assert!(files.len() > 50, "found only {} sources", files.len());
    let clock = crate_root.join("../io/src/clock.rs");
    let mut readings = Vec::new();
    for file in files.iter().filter(|file| **file != clock) {
        let text = std::fs::read_to_string(file).expect("a source file");
        for (number, line) in text.lines().enumerate() {
            if SYSTEM_READINGS.iter().any(|reading| line.contains(reading)) {
                readings.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        readings.is_empty(),
        "read the time from the Clock the part is given, not the system's:\n{}",
        readings.join("\n")
    );
    let clock = std::fs::read_to_string(&clock).expect("clock.rs");
    assert!(
        clock.contains("Timestamp::now()"),
        "the clock reads the system's time"
    );
}
