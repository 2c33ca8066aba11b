//! The literal spellings of an address the sink policy's host parser reads as that address:
//! for IPv4 those of the C library's `inet_aton` (dotted, one number, octal and hexadecimal
//! parts, the short forms `a.b.c` and `a.b`, a trailing dot) and its IPv6 forms (mapped,
//! compatible, NAT64's well-known prefix, 6to4); for IPv6, bracketed, compressed or not, in
//! either case, with a zone. Shared by the tests of spellings and of the metadata table.

#![allow(dead_code)] // each test file uses a part

use std::net::{Ipv4Addr, Ipv6Addr};

/// The spellings `inet_aton` reads as `address`, as a URL's host carries them.
pub fn v4(address: Ipv4Addr) -> Vec<String> {
    let [a, b, c, d] = address.octets();
    let whole = u32::from(address);
    let low16 = whole & 0xffff;
    let low24 = whole & 0xff_ffff;
    vec![
        address.to_string(),
        whole.to_string(),
        format!("0x{whole:x}"),
        format!("0{whole:o}"),
        format!("0x{a:x}.0x{b:X}.0x{c:x}.0x{d:x}"),
        format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
        format!("{a}.{b}.{low16}"),
        format!("{a}.0x{low24:x}"),
        format!("0{a:o}.{b}.0x{c:x}.{d}"),
        format!("{address}."),
    ]
}

/// The IPv6 addresses that stand for `address` where they are routed, bracketed.
pub fn v4_in_v6(address: Ipv4Addr) -> Vec<String> {
    let whole = u32::from(address);
    let (high, low) = (whole >> 16, whole & 0xffff);
    vec![
        format!("[::ffff:{address}]"),
        format!("[::ffff:{high:x}:{low:x}]"),
        format!("[::{address}]"),
        format!("[64:ff9b::{address}]"),
        format!("[2002:{high:x}:{low:x}::1]"),
    ]
}

/// `address` bracketed: compressed, every group written out, upper case, with a zone.
pub fn v6(address: Ipv6Addr) -> Vec<String> {
    let full = address
        .segments()
        .map(|segment| format!("{segment:04x}"))
        .join(":");
    let bare = address
        .segments()
        .map(|segment| format!("{segment:x}"))
        .join(":");
    vec![
        format!("[{address}]"),
        format!("[{full}]"),
        format!("[{bare}]"),
        format!("[{}]", address.to_string().to_ascii_uppercase()),
        format!("[{address}%25eth0]"),
    ]
}
