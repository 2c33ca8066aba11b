//! The runtime crate's tests, in one test binary (cargo's own `tests/testsuite` layout).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fixtures unwrap

mod discovery;
mod sink_lookups;
mod supervise;
mod time_shares;
