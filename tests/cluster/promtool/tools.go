//go:build tools

// Package tools pins the promtool command this module builds (`promtool check rules` and `promtool
// test rules` over deploy/monitoring), so `go mod tidy` keeps it. Prometheus has its own module
// because its Kubernetes libraries need not match the cluster's.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
