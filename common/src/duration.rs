//! The duration grammar: exactly what Go's `time.ParseDuration` accepts, because Shipwright's
//! controller (and any Go consumer of these fields) decodes them with it. "1d" or "2 weeks" would
//! be accepted by friendlier parsers and then break the Go side, so they are errors here.
//!
//! The parser is a port of Go's (`src/time/format.go`), including its overflow rules and the
//! float64 step for fractions, so the two agree to the nanosecond. Negative durations parse in Go
//! but make no sense as a time-to-live, so they are rejected too.

use std::fmt;
use std::time::Duration;

/// The largest duration Go can represent: `1<<63 - 1` nanoseconds (2562047h47m16.854775807s).
pub const MAX_NANOS: u64 = (1 << 63) - 1;

/// What is allowed, said once so every denial reads the same.
pub const GRAMMAR_HINT: &str = "use h, m, s, ms, us or ns, e.g. \"36h\" or \"1h30m\"";

/// Why a string is not an acceptable duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationError {
    /// Not Go duration syntax (including unknown units such as "d" or "w").
    Syntax,
    /// Valid syntax, but below zero.
    Negative,
    /// Larger than Go's int64 nanoseconds can hold.
    Overflow,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax => write!(f, "is not a duration: {GRAMMAR_HINT}"),
            Self::Negative => write!(
                f,
                "is negative: a time to live must be zero or more, e.g. \"0s\" or \"36h\""
            ),
            Self::Overflow => write!(
                f,
                "is too long: the most is \"2562047h47m16.854775807s\" (about 292 years)"
            ),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a non-negative Go duration string.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let (negative, nanos) = parse_go(text)?;
    if negative && nanos != 0 {
        return Err(DurationError::Negative);
    }
    Ok(Duration::from_nanos(nanos))
}

/// Formats a duration the way Go's `Duration.String` does ("1h30m0s", "300ms"), so values
/// written back to objects read like the ones users write.
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos().min(u128::from(MAX_NANOS));
    let nanos = u64::try_from(nanos).unwrap_or(MAX_NANOS);
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, scale) = match nanos {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", fraction(nanos, scale));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = fraction(nanos % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds}s"),
        _ => format!("{hours}h{minutes}m{seconds}s"),
    }
}

/// `value / scale` with the fractional digits Go prints (trailing zeros trimmed).
fn fraction(value: u64, scale: u64) -> String {
    let whole = value / scale;
    let rest = value % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

fn unit_nanos(unit: &[u8]) -> Option<u64> {
    Some(match unit {
        b"ns" => 1,
        // "us", and "µs" spelled with U+00B5 (micro sign) or U+03BC (Greek mu).
        b"us" | b"\xC2\xB5s" | b"\xCE\xBCs" => 1_000,
        b"ms" => 1_000_000,
        b"s" => 1_000_000_000,
        b"m" => 60_000_000_000,
        b"h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Go's algorithm: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, returning the sign and the magnitude.
fn parse_go(text: &str) -> Result<(bool, u64), DurationError> {
    const LIMIT: u64 = 1 << 63;
    let mut s = text.as_bytes();
    let mut negative = false;
    if let Some((&sign @ (b'-' | b'+'), rest)) = s.split_first() {
        negative = sign == b'-';
        s = rest;
    }
    if s == b"0" {
        return Ok((negative, 0));
    }
    if s.is_empty() {
        return Err(DurationError::Syntax);
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(DurationError::Syntax);
        }
        let before = s.len();
        let (mut value, rest) = leading_int(s)?;
        s = rest;
        let has_integer = s.len() != before;
        let (mut fraction, mut scale, mut has_fraction) = (0u64, 1f64, false);
        if let Some((b'.', rest)) = s.split_first() {
            let before = rest.len();
            (fraction, scale, s) = leading_fraction(rest);
            has_fraction = s.len() != before;
        }
        if !has_integer && !has_fraction {
            return Err(DurationError::Syntax);
        }
        let unit_len = s
            .iter()
            .position(|c| *c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::Syntax);
        }
        let unit = unit_nanos(&s[..unit_len]).ok_or(DurationError::Syntax)?;
        s = &s[unit_len..];
        if value > LIMIT / unit {
            return Err(DurationError::Overflow);
        }
        value *= unit;
        if fraction > 0 {
            // Go computes this in float64 (nanosecond-accurate even for fractions of hours).
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let extra = (fraction as f64 * (unit as f64 / scale)) as u64;
            value = value.checked_add(extra).ok_or(DurationError::Overflow)?;
            if value > LIMIT {
                return Err(DurationError::Overflow);
            }
        }
        total = total.checked_add(value).ok_or(DurationError::Overflow)?;
        if total > LIMIT {
            return Err(DurationError::Overflow);
        }
    }
    if !negative && total > MAX_NANOS {
        return Err(DurationError::Overflow);
    }
    Ok((negative, total))
}

fn leading_int(s: &[u8]) -> Result<(u64, &[u8]), DurationError> {
    const LIMIT: u64 = 1 << 63;
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut value: u64 = 0;
    for digit in &s[..digits] {
        if value > LIMIT / 10 {
            return Err(DurationError::Overflow);
        }
        value = value * 10 + u64::from(digit - b'0');
        if value > LIMIT {
            return Err(DurationError::Overflow);
        }
    }
    Ok((value, &s[digits..]))
}

/// Digits after the point: their value and 10^(digits used); digits beyond what fits are
/// consumed but ignored, as in Go.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let (mut value, mut scale, mut overflow) = (0u64, 1f64, false);
    for digit in &s[..digits] {
        if overflow {
            continue;
        }
        if value > MAX_NANOS / 10 {
            overflow = true;
            continue;
        }
        let next = value * 10 + u64::from(digit - b'0');
        if next > 1 << 63 {
            overflow = true;
            continue;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale, &s[digits..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(serde::Deserialize)]
    struct GoCase {
        #[serde(rename = "in")]
        input: String,
        ok: bool,
        nanos: i64,
    }

    /// Every case agrees with what Go's time.ParseDuration said (testdata/go-duration-cases),
    /// except that negative durations are refused.
    #[test]
    fn agrees_with_go_parse_duration() {
        let cases: Vec<GoCase> =
            serde_json::from_str(include_str!("../testdata/go_parse_duration.json")).unwrap();
        assert!(cases.len() > 80);
        for case in cases {
            let parsed = parse(&case.input);
            match (case.ok, case.nanos) {
                (true, nanos) if nanos >= 0 => assert_eq!(
                    parsed,
                    Ok(Duration::from_nanos(nanos.unsigned_abs())),
                    "{:?}",
                    case.input
                ),
                (true, _) => assert_eq!(parsed, Err(DurationError::Negative), "{:?}", case.input),
                (false, _) => assert!(
                    matches!(parsed, Err(DurationError::Syntax | DurationError::Overflow)),
                    "{:?} must be rejected, got {parsed:?}",
                    case.input
                ),
            }
        }
    }

    #[test]
    fn classifies_rejections() {
        assert_eq!(parse("1d"), Err(DurationError::Syntax));
        assert_eq!(parse("2 weeks"), Err(DurationError::Syntax));
        assert_eq!(parse("-5s"), Err(DurationError::Negative));
        assert_eq!(parse("-0"), Ok(Duration::ZERO));
        assert_eq!(parse("3000000h"), Err(DurationError::Overflow));
        assert_eq!(parse("9223372036854775808ns"), Err(DurationError::Overflow));
    }

    #[test]
    fn messages_say_what_is_allowed() {
        assert_eq!(
            DurationError::Syntax.to_string(),
            "is not a duration: use h, m, s, ms, us or ns, e.g. \"36h\" or \"1h30m\""
        );
        assert!(DurationError::Negative.to_string().contains("zero or more"));
        assert!(
            DurationError::Overflow
                .to_string()
                .contains("2562047h47m16.854775807s")
        );
    }

    #[test]
    fn formats_like_go() {
        for (nanos, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (300_000_000, "300ms"),
            (3_300_000_000, "3.3s"),
            (64_000_000_000, "1m4s"),
            (5_400_000_000_000, "1h30m0s"),
            (MAX_NANOS, "2562047h47m16.854775807s"),
        ] {
            assert_eq!(format(Duration::from_nanos(nanos)), text);
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,24}") {
            let _ = parse(&text);
        }

        #[test]
        fn go_syntax_strings_never_panic(text in "[-+]?([0-9]{0,22}(\\.[0-9]{0,22})?(ns|us|µs|ms|s|m|h|d)){1,4}") {
            let _ = parse(&text);
        }

        #[test]
        fn formatted_durations_parse_back(nanos in 0..=MAX_NANOS) {
            let duration = Duration::from_nanos(nanos);
            prop_assert_eq!(parse(&format(duration)), Ok(duration));
        }
    }
}
