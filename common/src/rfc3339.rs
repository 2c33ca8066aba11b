//! The times kube-retention's annotations accept (`retention.dev/expires-at`, `stamped`,
//! `snoozed-until`): RFC 3339 as Go's `time.Parse(time.RFC3339, …)` reads it, which is what the
//! API server's CEL `timestamp()` calls, and no wider. The writer check runs in the API server
//! too ([`crate::writer_policy`]), where a time the model read but CEL could not would be a
//! setting the one check sees and the other does not; so the grammar is one pattern, matched by
//! [`parse`] here and by the policy's CEL there, and every string it matches reads as the same
//! instant in jiff, in Go and in CEL (held on generated strings by
//! `common/tests/testsuite/rfc3339.rs`, and against the real API server by the e2e differential
//! test).
//!
//! What the pattern leaves out that a lenient parser would take: a space or a lower-case `t`/`z`,
//! minutes without seconds, offsets without the colon or with seconds, `[zone]` suffixes, more
//! than nine digits of a second, a leap second (`:60`), and years outside 1000 to 9998 (jiff's
//! and CEL's ranges end near year 0 and 9999, a day apart, once an offset moves the instant). A
//! day the month does not have (`02-30`, `02-29` outside leap years) is left out by the pattern
//! itself, so no string it matches is one CEL's `timestamp()` fails on.

use std::sync::LazyLock;

use jiff::Timestamp;
use regex::Regex;

/// The RFC 3339 times accepted, as an RE2 pattern (the API server's) that is also a Rust one:
/// `[0-9]`, never `\d` (Unicode digits in Rust), and no backslash at all, so it sits in a CEL
/// string as it is.
pub const PATTERN: &str = concat!(
    "^(",
    // Years 1000 to 9998: any month's days, February's first 28.
    "(?:[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-",
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)",
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))",
    // 29 February of the leap years among them.
    "|(?:[1-9][0-9](?:0[48]|[2468][048]|[13579][26])|(?:[13579][26]|[2468][048])00)-02-29",
    ")",
    "T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:[.][0-9]{1,9})?",
    "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$",
);

/// The longest time [`PATTERN`] matches (`9998-12-31T23:59:59.123456789-23:59`): a longer
/// string is no time, read no further.
pub const MAX_CHARS: usize = 35;

/// What a time must be, as every denial says it.
pub const RULE: &str = "is not an RFC 3339 time: write e.g. \"2026-12-31T23:00:00Z\" or \
                        \"2026-12-31T23:00:00.5+02:00\" (upper-case T and Z, seconds, an offset \
                        with a colon, a year from 1000 to 9998)";

static ACCEPTED: LazyLock<Regex> = LazyLock::new(|| {
    // The pattern is a constant, compiled by this module's own test.
    Regex::new(PATTERN).unwrap_or_else(|error| unreachable!("{error}"))
});

/// The instant `text` names, if it is a time of [`PATTERN`].
pub fn parse(text: &str) -> Option<Timestamp> {
    if !ACCEPTED.is_match(text) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rfc_3339_and_nothing_looser() {
        for (text, instant) in [
            ("2026-12-31T23:00:00Z", "2026-12-31T23:00:00Z"),
            ("2026-12-31T23:00:00.5+02:00", "2026-12-31T21:00:00.5Z"),
            ("2024-02-29T00:00:00-00:00", "2024-02-29T00:00:00Z"),
            (
                "2000-02-29T12:00:00.123456789Z",
                "2000-02-29T12:00:00.123456789Z",
            ),
            ("9998-12-31T23:59:59-23:59", "9999-01-01T23:58:59Z"),
            // The longest: MAX_CHARS.
            (
                "9998-12-31T23:59:59.123456789-23:59",
                "9999-01-01T23:58:59.123456789Z",
            ),
            ("1000-01-01T00:00:00+23:59", "0999-12-31T00:01:00Z"),
        ] {
            let expected: Timestamp = instant.parse().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(parse(text), Some(expected), "{text}");
        }
        assert_eq!("9998-12-31T23:59:59.123456789-23:59".len(), MAX_CHARS);
        for text in [
            "2026-12-31 23:00:00Z",
            "2026-12-31t23:00:00z",
            "2026-12-31T23:00Z",
            "2026-12-31T23:00:00+0200",
            "2026-12-31T23:00:00+02",
            "2026-12-31T23:00:00Z[UTC]",
            "2026-12-31T23:00:00.1234567891Z",
            "2026-12-31T23:59:60Z",
            "2026-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "0999-12-31T00:00:00Z",
            "9999-01-01T00:00:00Z",
            "2026-12-31T24:00:00Z",
            "2026-12-31T23:00:00+24:00",
            "２０２６-12-31T23:00:00Z",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
