//! One minor's steps, each a command whose output goes to a log file, timed, its tests counted
//! from libtest's `test result:` lines.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use kube_retention_e2e::layout::pinned_release;

use crate::probe::{self, Features};

/// What one step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub took: Duration,
    pub passed: u32,
    pub failed: u32,
    /// The command's exit status was success.
    pub succeeded: bool,
}

/// One minor's row of the report.
#[derive(Clone, Debug)]
pub struct Row {
    pub minor: String,
    pub release: String,
    /// The commit and the day the minor ran.
    pub revision: String,
    pub day: String,
    pub build: Step,
    pub features: Features,
    pub e2e: Step,
    pub shipped: Option<Step>,
}

impl Row {
    pub fn passed(&self) -> bool {
        self.build.succeeded
            && self.e2e.succeeded
            && self.e2e.failed == 0
            && self
                .shipped
                .as_ref()
                .is_none_or(|s| s.succeeded && s.failed == 0)
    }

    pub fn summary(&self) -> String {
        let shipped = match &self.shipped {
            Some(step) => format!(", as shipped {}", step.counts()),
            None => String::new(),
        };
        format!("e2e {}{shipped}", self.e2e.counts())
    }
}

impl Step {
    pub fn counts(&self) -> String {
        let mut counts = format!("{} passed, {} failed", self.passed, self.failed);
        if !self.succeeded && self.failed == 0 {
            counts.push_str(" (the run itself failed: see its log)");
        }
        counts
    }
}

/// Builds `minor`, reads what its API server enables, then runs its suites.
pub fn minor(root: &Path, report: &Path, minor: &str, logs: &Path, shipped: bool) -> Result<Row> {
    // Read as the minor starts, so a row names the checkout its suites ran from.
    let revision = revision(root, report)?;
    let kubernetes = format!("KUBERNETES={minor}");
    let build = step(
        root,
        Command::new("tests/cluster/build.sh").arg(minor),
        &logs.join("build.log"),
    )?;
    let features = probe::features(minor, &logs.join("probe"))
        .with_context(|| format!("reading what Kubernetes {minor} enables"))?;
    let e2e = step(
        root,
        Command::new("make").args(["--no-print-directory", "e2e", &kubernetes]),
        &logs.join("e2e.log"),
    )?;
    let shipped = match shipped {
        true => Some(step(
            root,
            Command::new("make").args(["--no-print-directory", "test-shipped", &kubernetes]),
            &logs.join("shipped.log"),
        )?),
        false => None,
    };
    Ok(Row {
        minor: minor.to_owned(),
        release: pinned_release(root, minor)?,
        revision,
        day: today()?,
        build,
        features,
        e2e,
        shipped,
    })
}

/// Runs `command` in `root` with its output in `log`, and counts its tests.
fn step(root: &Path, command: &mut Command, log: &Path) -> Result<Step> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    println!("   {command:?} > {}", log.display());
    let started = Instant::now();
    let status = command
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .with_context(|| format!("running {command:?}"))?;
    let took = started.elapsed();
    let output = std::fs::read_to_string(log)?;
    let (passed, failed) = counts(&output);
    Ok(Step {
        took,
        passed,
        failed,
        succeeded: status.success(),
    })
}

/// The passed and failed tests of every `test result:` line libtest (and libtest-mimic) printed.
pub fn counts(output: &str) -> (u32, u32) {
    let mut totals = (0, 0);
    for line in output.lines() {
        let Some(result) = line.trim().strip_prefix("test result: ") else {
            continue;
        };
        for part in result.split(['.', ';']) {
            let mut words = part.split_whitespace();
            let (Some(number), Some(word)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(number) = number.parse::<u32>() else {
                continue;
            };
            match word {
                "passed" => totals.0 += number,
                "failed" => totals.1 += number,
                _ => {}
            }
        }
    }
    totals
}

/// The checkout's commit, short, with `+` when the work tree has changes other than to
/// `report`, which this run itself rewrites after each minor.
pub fn revision(root: &Path, report: &Path) -> Result<String> {
    let git = |args: &[&str]| -> Result<String> {
        let output = Command::new("git").args(args).current_dir(root).output()?;
        ensure!(
            output.status.success(),
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(String::from_utf8(output.stdout)?.trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--", "."];
    // A report outside the checkout changes nothing git sees.
    let not_the_report = report
        .strip_prefix(root)
        .ok()
        .map(|inside| format!(":(exclude){}", inside.display()));
    status.extend(not_the_report.as_deref());
    let changes = git(&status)?;
    Ok(if changes.is_empty() {
        commit
    } else {
        format!("{commit}+")
    })
}

fn today() -> Result<String> {
    let now = time::OffsetDateTime::now_utc();
    Ok(format!(
        "{}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    ))
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use super::{counts, revision};

    fn git(root: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(root)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn a_row_names_the_commit_with_a_plus_only_for_changes_other_than_the_report() {
        let checkout = tempfile::tempdir().unwrap();
        let root = checkout.path();
        std::fs::create_dir(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/compatibility.md"), "rows\n").unwrap();
        std::fs::write(root.join("code.rs"), "fn main() {}\n").unwrap();
        git(root, &["init", "--quiet"]);
        git(root, &["add", "."]);
        git(root, &["commit", "--quiet", "-m", "first"]);
        let report = root.join("docs/compatibility.md");
        let commit = revision(root, &report).unwrap();
        assert!(!commit.is_empty() && !commit.ends_with('+'), "{commit}");

        // The run rewrites its report after each minor: still the same checkout.
        std::fs::write(&report, "rows and a new row\n").unwrap();
        assert_eq!(revision(root, &report).unwrap(), commit);

        std::fs::write(root.join("code.rs"), "fn main() { changed() }\n").unwrap();
        assert_eq!(revision(root, &report).unwrap(), format!("{commit}+"));
    }

    #[test]
    fn counts_every_result_line() {
        let output = "running 3 tests\n\
            test result: ok. 82 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 220.07s\n\
            noise 5 passed\n\
            test result: FAILED. 13 passed; 1 failed; 0 ignored; 0 measured; 2 filtered out; finished in 406.46s\n";
        assert_eq!(counts(output), (95, 1));
        assert_eq!(counts("no tests here"), (0, 0));
    }
}
