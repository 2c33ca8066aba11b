//! The times the annotations accept ([`kube_retention_common::rfc3339`]): every string its
//! pattern matches is one instant to jiff (so a time the API server's CEL reads is never one the
//! model calls invalid), and strings near the pattern's edges are accepted exactly when it
//! matches them. That Go reads each as the same instant is the e2e differential test's.

use jiff::Timestamp;
use kube_retention_common::rfc3339::{MAX_CHARS, PATTERN, parse};
use proptest::prelude::*;
use regex::Regex;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_time_the_pattern_matches_is_an_instant(
        text in proptest::string::string_regex(PATTERN.trim_start_matches('^').trim_end_matches('$')).unwrap()
    ) {
        let at = parse(&text);
        prop_assert!(at.is_some(), "{text:?} matches the pattern but jiff refuses it");
        let jiff: Timestamp = text.parse().unwrap();
        prop_assert_eq!(at, Some(jiff));
        prop_assert!(text.chars().count() <= MAX_CHARS, "{text:?} is longer than MAX_CHARS");
    }

    #[test]
    fn times_near_the_edges_are_accepted_exactly_where_the_pattern_matches(
        year in prop::sample::select(vec!["0999", "1000", "1900", "2000", "2024", "2026", "9998", "9999", "0000"]),
        month in prop::sample::select(vec!["00", "01", "02", "04", "12", "13"]),
        day in prop::sample::select(vec!["00", "01", "28", "29", "30", "31", "32"]),
        separator in prop::sample::select(vec!["T", "t", " "]),
        hour in prop::sample::select(vec!["00", "23", "24"]),
        second in prop::sample::select(vec!["00", "59", "60"]),
        fraction in prop::sample::select(vec!["", ".", ".5", ".123456789", ".1234567891"]),
        offset in prop::sample::select(vec!["Z", "z", "+00:00", "-00:00", "+23:59", "+24:00", "-02:30", "+0200", "+02", ""]),
    ) {
        let text = format!("{year}-{month}-{day}{separator}{hour}:00:{second}{fraction}{offset}");
        let matched = Regex::new(PATTERN).unwrap().is_match(&text);
        prop_assert_eq!(parse(&text).is_some(), matched, "{}", text);
        if matched {
            // jiff agrees it is a date and a time at all.
            prop_assert!(text.parse::<Timestamp>().is_ok(), "{}", text);
        }
    }
}
