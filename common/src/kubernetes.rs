//! The Kubernetes minors kube-retention supports: those on which `make test-matrix` ran every
//! suite green (docs/compatibility.md). `tests/tests/compatibility.rs` holds this range to that
//! report, the README and the chart's `kubeVersion`.

use std::ops::RangeInclusive;

/// The supported minors of Kubernetes 1.
pub const SUPPORTED_MINORS: RangeInclusive<u32> = 33..=37;

/// Where a server's minor stands against [`SUPPORTED_MINORS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    Supported,
    /// Older than the oldest supported minor: APIs kube-retention uses may be missing.
    Older,
    /// Newer than the newest tested: expected to work, not yet proven.
    Newer,
    /// The server's `/version` said no major 1 and numeric minor.
    Unknown,
}

/// Where the server whose `/version` says `major` and `minor` stands. Managed clusters append
/// to the minor (EKS and GKE say "33+"), which is read past.
pub fn support(major: &str, minor: &str) -> Support {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    match (major, digits.parse::<u32>()) {
        ("1", Ok(minor)) if SUPPORTED_MINORS.contains(&minor) => Support::Supported,
        ("1", Ok(minor)) if minor < *SUPPORTED_MINORS.start() => Support::Older,
        ("1", Ok(_)) => Support::Newer,
        _ => Support::Unknown,
    }
}

/// The range as people write it: "1.33 to 1.37".
pub fn supported_range() -> String {
    format!(
        "1.{} to 1.{}",
        SUPPORTED_MINORS.start(),
        SUPPORTED_MINORS.end()
    )
}
