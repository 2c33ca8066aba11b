#!/usr/bin/env bash
# Pins one Kubernetes release: `pin.sh v1.37.2` writes tests/cluster/kubernetes/1.37.mod and
# 1.37.sum, the go.mod and go.sum build.sh builds that minor with (`go build -modfile`), so every
# minor shares tests/cluster's commands (cmd/etcd, tools.go) but has dependencies of its own.
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and
# replaces them with folders of its own repository, which a module depending on it cannot use:
# each is replaced here with the release of that staging module (v0.37.2 for v1.37.2), the names
# read from the release's own go.mod. etcd's server is the version that go.mod requires.
set -euo pipefail
cd "$(dirname "$0")/.."

release=${1:?usage: pin.sh vMAJOR.MINOR.PATCH, e.g. v1.37.2}
[[ ${release} =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: ${release} is not a release like v1.37.2" >&2; exit 1; }
minor=1.${BASH_REMATCH[1]}
staging=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
modfile=kubernetes/${minor}.mod

upstream=$(go mod download -json "k8s.io/kubernetes@${release}" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' "${upstream}")
{
	echo "// Kubernetes ${minor}'s control plane and node, written by kubernetes/pin.sh ${release}."
	echo "module kube-retention/tests/cluster"
	echo
	echo "go 1.25.0"
	echo
	echo "require ("
	echo "	go.etcd.io/etcd/server/v3 ${etcd}"
	echo "	k8s.io/kubernetes ${release}"
	echo ")"
	echo
	echo "replace ("
	awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print "\t" $1 " => " $1 " '"${staging}"'" }' "${upstream}"
	echo ")"
} > "${modfile}"
rm -f "kubernetes/${minor}.sum"
go mod tidy -modfile="${modfile}"
echo "pinned Kubernetes ${release} (etcd ${etcd}) in tests/cluster/${modfile}"
