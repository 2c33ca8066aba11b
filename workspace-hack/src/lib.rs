//! Empty on purpose: this crate's only job is its Cargo.toml, which `cargo hakari generate`
//! writes (.config/hakari.toml). Every member depends on it, so every cargo command, whichever
//! members it selects, asks the same features of each third-party crate and reuses what an
//! earlier command compiled. `tests/tests/one_feature_set.rs` fails when it is stale.
