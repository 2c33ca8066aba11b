//! Where a server's `/version` stands against the supported minors.

use kube_retention_common::kubernetes::{SUPPORTED_MINORS, Support, support, supported_range};

#[test]
fn a_servers_minor_is_placed_against_the_supported_range() {
    let (oldest, newest) = (*SUPPORTED_MINORS.start(), *SUPPORTED_MINORS.end());
    assert_eq!(support("1", &oldest.to_string()), Support::Supported);
    assert_eq!(support("1", &newest.to_string()), Support::Supported);
    // EKS and GKE append to the minor.
    assert_eq!(support("1", &format!("{oldest}+")), Support::Supported);
    assert_eq!(support("1", &(oldest - 1).to_string()), Support::Older);
    assert_eq!(support("1", &(newest + 1).to_string()), Support::Newer);
    for (major, minor) in [("2", "0"), ("1", ""), ("1", "+"), ("", "33")] {
        assert_eq!(support(major, minor), Support::Unknown, "{major}.{minor}");
    }
    assert_eq!(supported_range(), format!("1.{oldest} to 1.{newest}"));
}
