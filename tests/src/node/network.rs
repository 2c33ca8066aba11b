//! The node's network namespace and its link to the host (iproute2's `ip`).
//!
//! Inside the namespace: `lo`, the node's end of the link ([`NODE_IP`]) with a default route to
//! the host, IPv4 forwarding (pods' traffic passes through), and bridged traffic sent through
//! iptables (`bridge-nf-call-iptables`: a pod calling a Service whose endpoint sits on the same
//! bridge). On the host: the host's end ([`HOST_IP`]) and a route to [`POD_CIDR`] via the node.

use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{HOST_IP, HOST_SERVICE_IP, NETNS, NODE_IP, POD_CIDR};
use crate::run;

/// The link's two ends: the host's name, and the node's (inside [`NETNS`]).
pub(super) const HOST_LINK: &str = "krt-host";
const NODE_LINK: &str = "krt-node";

/// Creates the namespace, the link and the routes. Fails, naming what is in the way, when a
/// namespace of that name exists already (another node, or leftovers `make down` will clear).
pub(super) fn create() -> Result<()> {
    if exists() {
        bail!(
            "network namespace {NETNS} exists already: another local node runs on this machine, \
             or one was left behind (`make down` in its checkout, or `ip netns delete {NETNS}`)"
        );
    }
    ip(&["netns", "add", NETNS])?;
    let result = configure();
    if result.is_err() {
        delete().ok();
    }
    result
}

fn configure() -> Result<()> {
    ip(&[
        "link", "add", HOST_LINK, "type", "veth", "peer", "name", NODE_LINK, "netns", NETNS,
    ])?;
    ip(&["addr", "add", &format!("{HOST_IP}/24"), "dev", HOST_LINK])?;
    ip(&[
        "addr",
        "add",
        &format!("{HOST_SERVICE_IP}/32"),
        "dev",
        HOST_LINK,
    ])?;
    ip(&["link", "set", HOST_LINK, "up"])?;
    in_node(&["ip", "link", "set", "lo", "up"])?;
    in_node(&[
        "ip",
        "addr",
        "add",
        &format!("{NODE_IP}/24"),
        "dev",
        NODE_LINK,
    ])?;
    in_node(&["ip", "link", "set", NODE_LINK, "up"])?;
    in_node(&["ip", "route", "add", "default", "via", HOST_IP])?;
    ip(&["route", "add", POD_CIDR, "via", NODE_IP])?;
    for setting in [
        "net.ipv4.ip_forward=1",
        // The bridge's traffic through iptables: br_netfilter's switch is per namespace.
        "net.bridge.bridge-nf-call-iptables=1",
    ] {
        in_node(&["sysctl", "-q", "-w", setting])?;
    }
    Ok(())
}

/// Deletes the namespace (with it the node's end of the link, the bridge, pods' leftover veths
/// and every iptables rule made inside) and the host's end if it outlived it.
pub(super) fn delete() -> Result<()> {
    if exists() {
        ip(&["netns", "delete", NETNS])?;
    }
    if link_exists() {
        ip(&["link", "delete", HOST_LINK])?;
    }
    Ok(())
}

/// Whether the node's namespace exists (`ip netns add` mounts it under /run/netns): asked
/// without `ip`, so `make down` of a cluster without a node needs no iproute2.
pub(super) fn exists() -> bool {
    std::path::Path::new(&format!("/run/netns/{NETNS}")).exists()
}

/// Whether the host's end of the link exists.
pub(super) fn link_exists() -> bool {
    std::path::Path::new(&format!("/sys/class/net/{HOST_LINK}")).exists()
}

/// Starts `program` with `args` inside the node's namespace as the tracked process `name`.
/// `nsenter --net` joins the namespace and execs the program: the pid is the program's own, and
/// it is tracked by the program's path. (`ip netns exec` would also mount a /sys of the
/// namespace's own, hiding /sys/fs/cgroup from the kubelet and runc.)
pub(super) fn spawn_in_node(
    state: &std::path::Path,
    name: &str,
    program: &std::path::Path,
    args: &[String],
) -> Result<crate::process::Tracked> {
    let mut command = Command::new("nsenter");
    command
        .arg(format!("--net=/run/netns/{NETNS}"))
        .arg("--")
        .arg(program)
        .args(args);
    crate::process::spawn_exec(state, name, &mut command, &program.to_string_lossy())
}

fn in_node(args: &[&str]) -> Result<String> {
    run(Command::new("ip").args(["netns", "exec", NETNS]).args(args))
        .with_context(|| format!("in the node's namespace: {}", args.join(" ")))
}

fn ip(args: &[&str]) -> Result<String> {
    run(Command::new("ip").args(args)).with_context(|| format!("ip {}", args.join(" ")))
}
