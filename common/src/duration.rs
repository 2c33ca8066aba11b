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

/// Parses a non-negative Go duration string. A minus sign is allowed on zeros only: Go rounds
/// `-.0000000001ns` to zero, but a sign on any other digit says a negative time, and the CRDs'
/// rule (`schema_rules::NEGATIVE_ZERO_PATTERN`) can only see the digits.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let (negative, nanos) = parse_go(text)?;
    if negative && (nanos != 0 || text.bytes().any(|byte| matches!(byte, b'1'..=b'9'))) {
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

/// Go's units and their nanoseconds: "us", and "µs" spelled with U+00B5 (micro sign) or
/// U+03BC (Greek mu).
pub const UNITS: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

fn unit_nanos(unit: &[u8]) -> Option<u64> {
    UNITS
        .iter()
        .find(|(name, _)| name.as_bytes() == unit)
        .map(|(_, nanos)| *nanos)
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
mod tests;
