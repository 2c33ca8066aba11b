//! The io crate's tests, in one test binary (cargo's `tests/testsuite` layout), each against the
//! mocked API server on paused time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fixtures unwrap

mod status_writes;
mod watch_set;
