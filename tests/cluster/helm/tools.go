//go:build tools

// Package tools pins the Helm command this module builds, so `go mod tidy` keeps it. Helm has
// its own module because its Kubernetes libraries need not match the cluster's.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
