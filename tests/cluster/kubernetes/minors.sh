#!/usr/bin/env bash
# The Kubernetes minors pinned in this folder (one NN.mod each, written by pin.sh), oldest first:
# the matrix runs each, and the newest is the default of build.sh, `make up` and `make test`.
set -euo pipefail
cd "$(dirname "$0")"
ls -- *.mod | sed 's/\.mod$//' | sort -V
