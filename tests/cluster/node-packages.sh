#!/usr/bin/env bash
# Installs what the local cluster's node runs besides the Kubernetes binaries built from Go
# modules: Debian's containerd and runc (the container runtime), the CNI plugins (the pods'
# bridge network), iptables and conntrack (kube-proxy) and iproute2 (the node's network
# namespace); and for the as-shipped suite's registry, Debian's distribution registry
# (docker-registry) and skopeo, which pushes the release's image index to it. Needs root;
# installs only what is missing, so a second run does nothing.
#
# Debian's containerd unit would start a system containerd where systemd runs; the node starts
# its own, with its own configuration and state, and needs no other. The same holds for the
# registry's unit: the suite starts its own registry.
set -euo pipefail

exec "$(dirname "$0")/../../scripts/debian-packages.sh" "the local node" \
	containerd runc containernetworking-plugins iptables conntrack iproute2 \
	docker-registry skopeo
