//! The checked-in CRDs are exactly what the Rust types generate.

use std::path::Path;

use kube_retention_controller::crds;

#[test]
fn checked_in_crds_match_the_rust_types() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let generated = crds::render().unwrap_or_else(|error| panic!("{error}"));
    for path in crds::PATHS {
        let checked_in = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        assert!(checked_in == generated, "{path} is stale: run `make crds`");
    }
}
