#!/usr/bin/env bash
# `make monitoring`: deploy/monitoring's rule file and dashboard are the source; this writes the
# PrometheusRule that wraps the rules for the Prometheus operator, and the Helm chart's copies.
# A unit test (tests/tests/monitoring.rs) fails while either is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
source=deploy/monitoring
{
	cat <<'HEADER'
# Written by `make monitoring` from kube-retention.rules.yaml: edit that file, not this one.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kube-retention
  namespace: kube-retention
  labels:
    app.kubernetes.io/part-of: kube-retention
spec:
HEADER
	grep -v '^#' "$source/kube-retention.rules.yaml" | sed 's/^/  /'
} >"$source/prometheusrule.yaml"
cp "$source/kube-retention.rules.yaml" "$source/kube-retention.dashboard.json" charts/kube-retention/files/
echo "wrote $source/prometheusrule.yaml and charts/kube-retention/files/"
