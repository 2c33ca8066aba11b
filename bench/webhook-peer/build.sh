#!/usr/bin/env bash
# Builds kube-retention's Go benchmark peer (not shipped) into bench/webhook-peer/bin
# (git-ignored): a static, stripped binary like the Rust webhook's release build.
set -euo pipefail
cd "$(dirname "$0")"

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/webhook-peer .
controller_runtime=$(go list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime)
echo "built bin/webhook-peer ($(du -h bin/webhook-peer | cut -f1)) with controller-runtime ${controller_runtime} and $(go env GOVERSION)"
