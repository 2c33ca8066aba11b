//! The checked-in CRDs are exactly what the Rust types generate.

use std::path::Path;

use kube_retention_controller::crds;

#[test]
fn checked_in_crds_match_the_rust_types() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let checked_in = std::fs::read_to_string(root.join(crds::PATH)).unwrap_or_default();
    let generated = crds::render().unwrap_or_else(|error| panic!("{error}"));
    assert!(
        checked_in == generated,
        "{} is stale: run `make crds`",
        crds::PATH
    );
}
