//go:build tools

// Package tools pins krew, the kubectl plugin manager, for the release test: it installs the
// plugin from the release's krew manifest and archive as a user's `kubectl krew install` would.
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
