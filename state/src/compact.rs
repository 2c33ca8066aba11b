//! Times in 8 bytes, for the record kept per object: at 100,000 objects every byte of a record
//! costs 100 kB, and an `Option<Timestamp>` takes 24 of them. Only for times that may be a
//! millisecond late (deadlines, retries, creation for ordering); stamps keep the exact time,
//! since the object must carry exactly the one computed.

use std::num::NonZeroI64;

use jiff::Timestamp;

/// Added to milliseconds since the epoch so that no time is zero (the niche that makes an
/// `Option<CompactTime>` 8 bytes): every time jiff can hold lies within ±2^49 ms.
const OFFSET: i64 = 1 << 62;
const NANOS_PER_MILLI: i128 = 1_000_000;

/// A time in whole milliseconds, rounded up: a deadline kept this way is never earlier than the
/// one computed, at most a millisecond later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct CompactTime(NonZeroI64);

impl CompactTime {
    pub(super) fn new(at: Timestamp) -> Self {
        let nanos = at.as_nanosecond();
        let millis =
            nanos.div_euclid(NANOS_PER_MILLI) + i128::from(nanos.rem_euclid(NANOS_PER_MILLI) != 0);
        let latest = Timestamp::MAX.as_millisecond();
        let millis = i64::try_from(millis).unwrap_or(latest).min(latest);
        Self(NonZeroI64::new(millis + OFFSET).unwrap_or(NonZeroI64::MAX))
    }

    pub(super) fn get(self) -> Timestamp {
        Timestamp::from_millisecond(self.0.get() - OFFSET).unwrap_or(Timestamp::MAX)
    }
}

impl From<Timestamp> for CompactTime {
    fn from(at: Timestamp) -> Self {
        Self::new(at)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // fixtures

    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn whole_milliseconds_round_trip_and_the_rest_round_up() {
        for text in [
            "2026-01-01T00:00:12Z",
            "1969-12-31T23:59:59.999Z",
            "1970-01-01T00:00:00Z",
        ] {
            assert_eq!(CompactTime::new(at(text)).get(), at(text), "{text}");
        }
        assert_eq!(
            CompactTime::new(at("2026-01-01T00:00:12.000000001Z")).get(),
            at("2026-01-01T00:00:12.001Z")
        );
        assert_eq!(
            CompactTime::new(at("1969-12-31T23:59:59.9995Z")).get(),
            at("1970-01-01T00:00:00Z")
        );
        assert_eq!(
            CompactTime::new(Timestamp::MIN).get(),
            Timestamp::from_millisecond(Timestamp::MIN.as_millisecond()).unwrap()
        );
        assert!(CompactTime::new(Timestamp::MAX).get() <= Timestamp::MAX);
    }

    #[test]
    fn order_is_kept_and_options_cost_nothing() {
        let earlier = CompactTime::new(at("2026-01-01T00:00:00Z"));
        let later = CompactTime::new(at("2026-01-01T00:00:00.001Z"));
        assert!(earlier < later);
        assert!(CompactTime::new(Timestamp::MIN) < earlier);
        assert_eq!(size_of::<Option<CompactTime>>(), 8);
    }
}
