//go:build tools

// Package tools pins the Kyverno command this module builds, so `go mod tidy` keeps it: the
// cleanup controller of Kyverno v1.19.1, the peer `make bench-peers` measures. A module of its
// own because Kyverno's go.mod has a replace directive, which `go install ...@v1.19.1` refuses
// and only a main module applies (copied in go.mod).
package tools

import (
	_ "github.com/kyverno/kyverno/cmd/cleanup-controller"
)
