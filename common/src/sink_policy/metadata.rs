//! The clouds' instance metadata and platform services, by address and by name: the one table
//! the sink policy denies by default (and the webhook warns with), wherever the cluster runs.
//!
//! A pod that reaches one of these gets what the node may get: credentials of the instance's
//! or the node's role (AWS IMDS and EKS Pod Identity, GCP's metadata server, Azure IMDS), its
//! user data, or the platform's own channel (Azure's WireServer). Most sit in link-local
//! 169.254.0.0/16, already denied as a range; listing them here names what they are in the
//! refusal and keeps them denied when an admin re-opens link-local on purpose (an allow rule
//! must be as specific as the /32 or /128 to reach one). The others are not link-local at all
//! (`fd00:ec2::254`, `100.100.100.200`, `168.63.129.16`), so nothing else here would deny them.
//!
//! Each row names its source; a vendor that adds an address is a row added here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

const fn v4(a: u8, b: u8, c: u8, d: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), 32))
}

#[allow(clippy::too_many_arguments)] // the eight segments of an address
const fn v6(a: u16, b: u16, c: u16, d: u16, e: u16, f: u16, g: u16, h: u16) -> IpNet {
    IpNet::V6(Ipv6Net::new_assert(
        Ipv6Addr::new(a, b, c, d, e, f, g, h),
        128,
    ))
}

/// The metadata and platform services' addresses, and what each is.
pub const METADATA_ADDRESSES: [(IpNet, &str); 15] = [
    // AWS: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html
    // GCP: https://cloud.google.com/compute/docs/metadata/querying-metadata
    // Azure: https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service
    // Oracle OCI: https://docs.oracle.com/en-us/iaas/Content/Compute/Tasks/gettingmetadata.htm
    // DigitalOcean: https://docs.digitalocean.com/reference/api/metadata/
    // OpenStack: https://docs.openstack.org/nova/latest/user/metadata.html
    // Hetzner Cloud: https://docs.hetzner.cloud/reference/cloud#server-metadata
    // Akamai (Linode): https://techdocs.akamai.com/cloud-computing/docs/metadata-service-api
    // IBM Cloud VPC: https://cloud.ibm.com/docs/vpc?topic=vpc-imd-about
    (
        v4(169, 254, 169, 254),
        "the cloud instance metadata service (AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack, \
         Hetzner, Akamai, IBM)",
    ),
    // https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html
    (
        v6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
        "AWS's instance metadata service over IPv6",
    ),
    // https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html
    (
        v4(169, 254, 170, 2),
        "AWS ECS's task metadata and credentials endpoint",
    ),
    // https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html
    (
        v4(169, 254, 170, 23),
        "AWS EKS's Pod Identity Agent (credentials)",
    ),
    (
        v6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23),
        "AWS EKS's Pod Identity Agent (credentials) over IPv6",
    ),
    // https://cloud.google.com/compute/docs/metadata/querying-metadata (IPv6-only instances)
    (
        v6(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254),
        "GCP's metadata server over IPv6",
    ),
    // https://learn.microsoft.com/azure/virtual-network/what-is-ip-address-168-63-129-16
    (
        v4(168, 63, 129, 16),
        "Azure's WireServer (the VM agent's platform channel)",
    ),
    // https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata
    (
        v4(100, 100, 100, 200),
        "Alibaba Cloud's instance metadata service",
    ),
    // https://docs.oracle.com/en/cloud/iaas-classic/compute-iaas-cloud/stcsg/retrieving-instance-metadata.html
    (
        v4(192, 0, 0, 192),
        "Oracle Cloud Infrastructure Classic's instance metadata service",
    ),
    // https://docs.oracle.com/en-us/iaas/Content/Compute/Tasks/gettingmetadata.htm (IPv6)
    (
        v6(0xfd00, 0xc1, 0, 0, 0, 0, 0xa9fe, 0xa9fe),
        "Oracle OCI's instance metadata service over IPv6",
    ),
    // https://www.tencentcloud.com/document/product/213/4934 (metadata.tencentyun.com)
    (
        v4(169, 254, 0, 23),
        "Tencent Cloud's instance metadata service",
    ),
    // https://www.scaleway.com/en/developers/api/instance/user-data
    (v4(169, 254, 42, 42), "Scaleway's instance metadata service"),
    (
        v6(0xfd00, 0x42, 0, 0, 0, 0, 0, 0x42),
        "Scaleway's instance metadata service over IPv6",
    ),
    // https://techdocs.akamai.com/cloud-computing/docs/metadata-service-api
    (
        v6(0xfd00, 0xa9fe, 0xa9fe, 0, 0, 0, 0, 1),
        "Akamai (Linode)'s metadata service over IPv6",
    ),
    // https://specs.openstack.org/openstack/neutron-specs/specs/ussuri/metadata-add-ipv6-support.html
    (
        v6(0xfe80, 0, 0, 0, 0, 0, 0xa9fe, 0xa9fe),
        "OpenStack's metadata service over IPv6",
    ),
];

/// The metadata services' host names (lower case, no trailing dot), and what each is.
pub const METADATA_NAMES: [(&str, &str); 7] = [
    // https://cloud.google.com/compute/docs/metadata/querying-metadata
    (
        "metadata.google.internal",
        "the name of GCP's metadata server",
    ),
    // GCP's resolver answers the short name through the search domain google.internal.
    ("metadata", "the name of GCP's metadata server"),
    // GCP's other name for its metadata server (its client libraries try it too).
    ("metadata.goog", "the name of GCP's metadata server"),
    // https://www.tencentcloud.com/document/product/213/4934
    (
        "metadata.tencentyun.com",
        "the name of Tencent Cloud's metadata service",
    ),
    // https://docs.cloud-init.io/en/latest/reference/datasources/ec2.html (the EC2 resolver's
    // name for IMDS)
    (
        "instance-data",
        "the name of AWS's instance metadata service",
    ),
    (
        "instance-data.ec2.internal",
        "the name of AWS's instance metadata service",
    ),
    // https://cloud.ibm.com/docs/vpc?topic=vpc-imd-about
    (
        "api.metadata.cloud.ibm.com",
        "the name of IBM Cloud's metadata service",
    ),
];

/// What the metadata service at exactly `address` is, if it is one.
pub fn metadata_address(address: IpAddr) -> Option<&'static str> {
    METADATA_ADDRESSES
        .iter()
        .find(|(net, _)| net.addr() == address)
        .map(|(_, what)| *what)
}

/// What the metadata service named `name` (lower case, no trailing dot) is, if it is one.
pub fn metadata_name(name: &str) -> Option<&'static str> {
    METADATA_NAMES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, what)| *what)
}
