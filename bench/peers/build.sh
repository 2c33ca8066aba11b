#!/usr/bin/env bash
# `bench/peers/build.sh` builds the peers `make bench-peers` measures, each from its own pinned
# Go module, into bench/peers/bin (git-ignored):
#   - kyverno-cleanup-controller: Kyverno's cleanup controller (kyverno/go.mod), static and
#     stripped as Kyverno's own Makefile builds it (CGO_ENABLED=0, its version stamped in), with
#     the CRDs it waits for at start copied from the same module into bin/kyverno-crds.
# Like tests/cluster/build.sh, the output is stamped with what it was built from
# (bin/kyverno.built-from) and rebuilt only when that changes. A cold build downloads Kyverno's
# module graph (its cloud KMS and signing SDKs among it) and compiles for several minutes.
set -euo pipefail
cd "$(dirname "$0")"

# inputs, fresh and executables: what an output was built from, and whether it stands.
source ../../scripts/built-from.sh

kyverno_version=$(cd kyverno && go list -m -f '{{.Version}}' github.com/kyverno/kyverno)
# What the controller blocks on at start (its informers wait on each, without a timeout).
kyverno_crds=(
	config/crds/kyverno/kyverno.io_cleanuppolicies.yaml
	config/crds/kyverno/kyverno.io_clustercleanuppolicies.yaml
	config/crds/kyverno/kyverno.io_globalcontextentries.yaml
	config/crds/policies.kyverno.io/policies.kyverno.io_deletingpolicies.yaml
	config/crds/policies.kyverno.io/policies.kyverno.io_namespaceddeletingpolicies.yaml
	config/crds/policies.kyverno.io/policies.kyverno.io_policyexceptions.yaml
)
if executables bin/kyverno-cleanup-controller && fresh bin/kyverno.built-from kyverno/go.mod kyverno/go.sum; then
	echo "Kyverno ${kyverno_version}'s cleanup controller in bench/peers/bin is up to date (bin/kyverno.built-from)."
	exit 0
fi
echo "Building Kyverno ${kyverno_version}'s cleanup controller from its Go module into bench/peers/bin."
mkdir -p bin/kyverno-crds
(cd kyverno && CGO_ENABLED=0 go build -trimpath -o ../bin/kyverno-cleanup-controller \
	-ldflags "-s -w -X github.com/kyverno/kyverno/pkg/version.BuildVersion=${kyverno_version}" \
	github.com/kyverno/kyverno/cmd/cleanup-controller)
kyverno_dir=$(cd kyverno && go list -m -f '{{.Dir}}' github.com/kyverno/kyverno)
for crd in "${kyverno_crds[@]}"; do
	install -m 0644 "${kyverno_dir}/${crd}" bin/kyverno-crds/
done
inputs kyverno/go.mod kyverno/go.sum > bin/kyverno.built-from
echo "built Kyverno ${kyverno_version}'s cleanup controller ($(du -h bin/kyverno-cleanup-controller | cut -f1)) and its ${#kyverno_crds[@]} CRDs into bench/peers/bin"
