//! The webhook's tests, in one test binary (cargo's own `tests/testsuite` layout): each module
//! was a binary of its own that linked the whole webhook again, about 55 MB apiece in a debug
//! build. `make chaos` runs `properties` alone with a million cases.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fixtures unwrap

mod api_server;
mod support;

mod access_reviews;
mod access_served;
mod admission_calls;
mod campaign;
mod cleaner_approval;
mod cleaner_sinks;
mod client_auth;
mod compilations;
mod lean_reviews;
mod limits;
mod policies;
mod properties;
mod router;
mod serving;
mod tls_reload;
mod writer_resources;
mod writers;
