//! How a review ended: the answer it gave, or why it gave none. The metrics count reviews by it.

/// How one AdmissionReview ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdmissionOutcome {
    Allowed,
    Patched,
    Denied,
    /// The writer may not delete what its retention settings govern.
    Forbidden,
    /// Whether the writer may could not be checked: refused.
    Unchecked,
    Malformed,
    /// Not answered within `--admission-timeout`: a validation refused, a mutation admitted
    /// unchanged, a body that never finished cut off.
    Timeout,
    /// Refused unjudged: `--max-admissions-in-flight` were already being answered, or the
    /// memory admissions share (`--max-admission-memory`) had no room for it.
    Shed,
    /// Cut off while its body arrived, to make room for reviews that arrived faster.
    CutOff,
    /// Its body above `--max-body-bytes`, or what admission reads of it above
    /// `--max-decoded-bytes`: a validation refused, a mutation admitted unchanged.
    TooLarge,
    /// Refused uncompiled: its namespace had used its share of the compile time.
    Throttled,
}

impl AdmissionOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Patched => "patched",
            Self::Denied => "denied",
            Self::Forbidden => "forbidden",
            Self::Unchecked => "unchecked",
            Self::Malformed => "malformed",
            Self::Timeout => "timeout",
            Self::Shed => "shed",
            Self::CutOff => "cut_off",
            Self::TooLarge => "too_large",
            Self::Throttled => "throttled",
        }
    }
}
