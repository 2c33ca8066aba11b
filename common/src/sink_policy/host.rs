//! Reading the host of a sink URL the way the resolver will: an IP literal in any form the C
//! library's `inet_aton` accepts (`getaddrinfo` tries it before DNS, so `127.1`, `2130706433`,
//! `0177.0.0.1` and `0x7f.1` all reach 127.0.0.1), a bracketed IPv6 address, or a host name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A sink's host, normalised: an address in whatever form it was written, or a lower-case name
/// without a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Address(IpAddr),
    Name(String),
}

/// Reads `host` (as it appears in a URL's authority, IPv6 in brackets); why not when it is
/// neither an address nor a host name.
pub fn parse(host: &str) -> Result<Host, &'static str> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or("has an unclosed [")?;
        // A zone (fe80::1%25eth0) names an interface, not another address.
        let address = inner.split('%').next().unwrap_or(inner);
        return address
            .parse::<Ipv6Addr>()
            .map(|address| Host::Address(IpAddr::V6(address)))
            .map_err(|_| "is not an IPv6 address");
    }
    let lower = host.to_ascii_lowercase();
    let trimmed = lower.strip_suffix('.').unwrap_or(&lower);
    if trimmed.is_empty() {
        return Err("has no host");
    }
    if let Some(address) = inet_aton(trimmed) {
        return Ok(Host::Address(IpAddr::V4(address)));
    }
    if let Ok(address) = trimmed.parse::<Ipv6Addr>() {
        return Ok(Host::Address(IpAddr::V6(address)));
    }
    let name_chars = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if !trimmed.chars().all(name_chars) || trimmed.starts_with('.') || trimmed.contains("..") {
        return Err("is not a host name (letters, digits, -, _ and dots)");
    }
    Ok(Host::Name(trimmed.to_owned()))
}

/// The host and port of a URL's authority (`host`, `host:port`, `[v6]:port`), user info removed.
pub fn split_authority(authority: &str) -> Result<(&str, Option<u16>), &'static str> {
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host_port)| host_port);
    let (host, port) = if host_port.starts_with('[') {
        let end = host_port.find(']').ok_or("has an unclosed [")?;
        let (host, rest) = host_port.split_at(end + 1);
        match rest {
            "" => (host, None),
            _ => (
                host,
                Some(rest.strip_prefix(':').ok_or("has text after ]")?),
            ),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    let port = match port {
        None | Some("") => None,
        Some(port) if port.chars().all(|c| c.is_ascii_digit()) => {
            Some(port.parse().map_err(|_| "has a port above 65535")?)
        }
        Some(_) => return Err("has a port that is not a number"),
    };
    if host.is_empty() {
        return Err("has no host");
    }
    Ok((host, port))
}

/// An IPv4 address as `inet_aton` reads it: one to four parts, each decimal, octal (leading 0)
/// or hexadecimal (0x), the last filling the bytes the others leave.
pub fn inet_aton(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let numbers = parts
        .into_iter()
        .map(number)
        .collect::<Option<Vec<u32>>>()?;
    let (last, leading) = numbers.split_last()?;
    let mut value: u32 = 0;
    for (index, byte) in leading.iter().enumerate() {
        if *byte > 255 {
            return None;
        }
        value |= byte << (24 - 8 * index);
    }
    let room = 32 - 8 * leading.len() as u32;
    if room < 32 && u64::from(*last) >= 1u64 << room {
        return None;
    }
    Some(Ipv4Addr::from(value | last))
}

/// One part of an `inet_aton` address.
fn number(part: &str) -> Option<u32> {
    let (digits, radix) = match part.strip_prefix("0x").or(part.strip_prefix("0X")) {
        Some("") => return Some(0),
        Some(hex) => (hex, 16),
        None if part.len() > 1 && part.starts_with('0') => (&part[1..], 8),
        None => (part, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

/// The IPv4 address an IPv6 address stands for, where routing it may reach that IPv4
/// address: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`, but `::` and `::1`),
/// NAT64's well-known prefix (`64:ff9b::a.b.c.d`) and 6to4 (`2002:aabb:ccdd::`).
pub fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    let octets = address.octets();
    let tail = Ipv4Addr::new(octets[12], octets[13], octets[14], octets[15]);
    match address.segments() {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        [0, 0, 0, 0, 0, 0, _, _] if u32::from(tail) > 1 => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        [0x2002, ..] => Some(Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5])),
        _ => None,
    }
}
