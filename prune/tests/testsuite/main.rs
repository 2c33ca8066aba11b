//! The prune crate's tests, in one test binary (cargo's own `tests/testsuite` layout).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fixtures unwrap

mod support;

mod deleting;
mod limits_agreement;
mod newest_finished;
mod plan;
