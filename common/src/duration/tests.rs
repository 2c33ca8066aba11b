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
        serde_json::from_str(include_str!("../../testdata/go_parse_duration.json")).unwrap();
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
