#!/usr/bin/env bash
# Installs what the local cluster's node runs besides the Kubernetes binaries built from Go
# modules: Debian's containerd and runc (the container runtime), the CNI plugins (the pods'
# bridge network), iptables and conntrack (kube-proxy) and iproute2 (the node's network
# namespace). Needs root; installs only what is missing, so a second run does nothing.
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables conntrack iproute2)
missing=()
for package in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q 'install ok installed' \
		|| missing+=("${package}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "the local node needs ${missing[*]}: run $0 as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's containerd unit would start a system containerd where systemd runs; the node starts
# its own, with its own configuration and state, and needs no other.
echo "installed ${missing[*]}"
