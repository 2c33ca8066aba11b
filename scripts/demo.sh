#!/usr/bin/env bash
# A short narrated walkthrough of kube-retention on the local cluster `make up` started.
# Usage: scripts/demo.sh KUBECONFIG
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBECONFIG=${1:-.local/kubeconfig}
kubectl=tests/cluster/bin/kubectl
ns=retention-demo

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
show() { printf '$ kubectl %s\n' "$*"; "$kubectl" "$@"; }

say "A real Kubernetes control plane, built from Kubernetes' own Go modules, runs on 127.0.0.1"
show version

say "Shipwright's CRDs are installed"
show get crd builds.shipwright.io buildruns.shipwright.io

say "kube-retention's controller acts as its own ServiceAccount, with the RBAC deploy/ grants"
for verb in "delete buildruns.shipwright.io" "delete jobs.batch" "get secrets"; do
	printf 'can the controller %s? ' "$verb"
	"$kubectl" auth can-i $verb --all-namespaces \
		--as=system:serviceaccount:kube-retention:kube-retention-controller || true
done

say "A Build with a retention policy, and a BuildRun of it"
# A fresh namespace each time: wait out the previous demo's if it is still being deleted.
"$kubectl" delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
"$kubectl" create namespace "$ns" >/dev/null
cat <<YAML | tee /dev/stderr | "$kubectl" apply -n "$ns" -f -
apiVersion: shipwright.io/v1beta1
kind: Build
metadata:
  name: hello
spec:
  source: {type: Git, git: {url: https://github.com/shipwright-io/sample-go}}
  strategy: {kind: ClusterBuildStrategy, name: buildkit}
  output: {image: registry.example/hello:latest}
  retention: {ttlAfterSucceeded: 10m, ttlAfterFailed: 1h, succeededLimit: 5}
---
apiVersion: shipwright.io/v1beta1
kind: BuildRun
metadata:
  name: hello-1
spec:
  build: {name: hello}
YAML

say "Nothing in this cluster runs builds: tests set each status through the /status subresource"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
show patch buildrun hello-1 -n "$ns" --subresource=status --type=merge \
	-p "{\"status\":{\"completionTime\":\"$now\",\"conditions\":[{\"type\":\"Succeeded\",\"status\":\"True\",\"reason\":\"Succeeded\",\"message\":\"done\",\"lastTransitionTime\":\"$now\"}]}}"
show get buildrun hello-1 -n "$ns" \
	-o custom-columns=NAME:.metadata.name,SUCCEEDED:.status.conditions[0].status,COMPLETED:.status.completionTime

say "Cleaning up the demo namespace; the cluster keeps running (make down stops it)"
"$kubectl" delete namespace "$ns" --wait=false
printf '\nexport KUBECONFIG=%s\n' "$KUBECONFIG"
