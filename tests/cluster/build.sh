#!/usr/bin/env bash
# `build.sh [--control-plane] [MINOR]` builds one Kubernetes minor — etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl and the node's kubelet and kube-proxy — from the
# Go modules pinned in kubernetes/MINOR.mod, into tests/cluster/bin/MINOR, with the real release
# versions stamped in; and the node's pause binary from the pause.c in the same Kubernetes module.
# MINOR is the argument, else $KUBERNETES, else the newest pinned (kubernetes/minors.sh lists them).
# `--control-plane` builds only what a cluster without a node runs (etcd, kube-apiserver,
# kube-controller-manager, kubectl): `make e2e-oldest` builds the oldest minor so, for the e2e
# suite's core, leaving out three binaries to link and about 5% of the packages to compile.
# Beside them, into tests/cluster/bin, whatever the minor: helm from helm/go.mod, promtool from
# promtool/go.mod and krew from krew/go.mod. All of it is git-ignored.
# Each output is stamped with what it was built from (`built-from` files) and rebuilt only when
# that changes, so an unchanged minor takes a second even with Go's caches emptied.
set -euo pipefail
cd "$(dirname "$0")"

control_plane_only=
if [[ ${1:-} == --control-plane ]]; then
	control_plane_only=1
	shift
fi
minor=${1:-${KUBERNETES:-$(kubernetes/minors.sh | tail -n 1)}}
modfile=kubernetes/${minor}.mod
if [[ ! -f ${modfile} ]]; then
	echo "Kubernetes ${minor} is not pinned here: the pinned minors are $(kubernetes/minors.sh | tr '\n' ' ')" >&2
	echo "(kubernetes/pin.sh v1.NN.P pins another)." >&2
	exit 1
fi
out=bin/${minor}
k8s_version=$(go list -modfile="${modfile}" -m -f '{{.Version}}' k8s.io/kubernetes)

# What a cluster without a node runs; the node's binaries and its pause unless --control-plane.
commands=(./cmd/etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
	k8s.io/kubernetes/cmd/kubectl)
if [[ -z ${control_plane_only} ]]; then
	commands+=(k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet
		k8s.io/kubernetes/cmd/kube-proxy)
fi
# inputs, fresh and executables: what an output was built from, and whether it stands.
source ../../scripts/built-from.sh
kubernetes_inputs=("${modfile}" "${modfile%.mod}.sum")
tools_inputs=(helm/go.mod helm/go.sum promtool/go.mod promtool/go.sum krew/go.mod krew/go.sum)
tools=(bin/helm bin/promtool bin/krew)

# Said before Go's own "downloading" lines, so a first run does not look stuck. The figures are
# of a cold build on two cores (about 2 GB of modules, 4.9 GB of build cache per minor).
build_kubernetes() {
	echo "Building Kubernetes ${k8s_version} ($(printf '%s\n' "${commands[@]##*/}" | paste -sd ' ')) from its Go"
	echo "modules into tests/cluster/${out}. This first build of a minor is done once: it downloads about"
	echo "2 GB of Go modules and compiles for about ten minutes on two cores. Later runs skip it while"
	echo "what it was built from stands (${out}/built-from)."
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X ${pkg}.gitVersion=${k8s_version}"
		ldflags+=" -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor#1.}"
		ldflags+=" -X ${pkg}.gitTreeState=clean"
	done

	mkdir -p "${out}"
	# One `go build` for all the commands, so they share compiled packages.
	CGO_ENABLED=0 go build -modfile="${modfile}" -trimpath -ldflags "${ldflags}" -o "${out}/" "${commands[@]}"
	if [[ -z ${control_plane_only} ]]; then
		# The pod sandbox's process, Kubernetes' own pause.c, static; its version is the one
		# build/pause/Makefile tags the upstream image with.
		kubernetes_dir=$(go list -modfile="${modfile}" -m -f '{{.Dir}}' k8s.io/kubernetes)
		pause_version=$(sed -n 's/^TAG ?= //p' "${kubernetes_dir}/build/pause/Makefile")
		cc -Os -static -Wall -Werror -DVERSION="v${pause_version}" \
			-o "${out}/pause" "${kubernetes_dir}/build/pause/linux/pause.c"
		echo "${pause_version}" > "${out}/pause.version"
	fi
	inputs "${kubernetes_inputs[@]}" > "${out}/built-from"
}

build_tools() {
	# Helm has a module of its own: its Kubernetes libraries need not match the cluster's.
	# The ldflags are those of helm's own Makefile: besides its version, the Kubernetes version it
	# assumes without a cluster (`helm template`, `helm lint`) is its client-go's (v0.35 -> 1.35);
	# without them it assumes 1.20, below the chart's kubeVersion.
	helm_version=$(cd helm && go list -m -f '{{.Version}}' helm.sh/helm/v3)
	helm_client_go=$(cd helm && go list -m -f '{{.Version}}' k8s.io/client-go)
	helm_k8s_minor=$(echo "${helm_client_go}" | cut -d. -f2)
	helm_k8s_major=$(( $(echo "${helm_client_go#v}" | cut -d. -f1) + 1 ))
	helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${helm_version}"
	for package in pkg/lint/rules pkg/chartutil; do
		helm_ldflags+=" -X helm.sh/helm/v3/${package}.k8sVersionMajor=${helm_k8s_major}"
		helm_ldflags+=" -X helm.sh/helm/v3/${package}.k8sVersionMinor=${helm_k8s_minor}"
	done
	(cd helm && CGO_ENABLED=0 go build -trimpath -o ../bin/ -ldflags "${helm_ldflags}" \
		helm.sh/helm/v3/cmd/helm)
	# promtool, for `make monitoring-check`: Prometheus's module versions v0.X.Y are its releases 3.X.Y.
	# Prometheus's own `remove_all_sd` build tag leaves out the service discoveries (the AWS, Azure
	# and Google SDKs among them): `check rules` and `test rules` read none, and a sixth fewer
	# packages compile.
	prometheus_version=$(cd promtool && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
	prometheus_release=${prometheus_version#v0.}
	prometheus_release="3.${prometheus_release:1}"
	(cd promtool && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd -o ../bin/ \
		-ldflags "-s -w -X github.com/prometheus/common/version.Version=${prometheus_release}" \
		github.com/prometheus/prometheus/cmd/promtool)
	# krew, for `make release-test`: the plugin installed from the release's krew manifest.
	krew_version=$(cd krew && go list -m -f '{{.Version}}' sigs.k8s.io/krew)
	(cd krew && CGO_ENABLED=0 go build -trimpath -o ../bin/ \
		-ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=${krew_version}" \
		sigs.k8s.io/krew/cmd/krew)
	inputs "${tools_inputs[@]}" > bin/tools.built-from
}

binaries=("${commands[@]##*/}")
if executables "${binaries[@]/#/${out}/}" && fresh "${out}/built-from" "${kubernetes_inputs[@]}"; then
	echo "Kubernetes ${k8s_version} in tests/cluster/${out} is up to date (${out}/built-from)."
else
	build_kubernetes
	echo "built Kubernetes ${k8s_version} into tests/cluster/${out} ($(ls "${out}" | tr '\n' ' '))"
fi
if executables "${tools[@]}" && fresh bin/tools.built-from "${tools_inputs[@]}"; then
	echo "helm, promtool and krew in tests/cluster/bin are up to date (bin/tools.built-from)."
else
	build_tools
	echo "built helm ${helm_version}, promtool ${prometheus_release} and krew ${krew_version} into tests/cluster/bin"
fi
