#!/usr/bin/env bash
# A short narrated walkthrough of kube-retention on the local cluster `make up` started.
# Usage: scripts/demo.sh KUBECONFIG
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBECONFIG=${1:-.local/kubeconfig}
# The minor's kubectl: `make demo` exports KUBERNETES; run alone, the newest pinned.
kubectl=tests/cluster/bin/${KUBERNETES:-$(tests/cluster/kubernetes/minors.sh | tail -n 1)}/kubectl
helm=tests/cluster/bin/helm
ns=retention-demo

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
show() { printf '$ kubectl %s\n' "$*"; "$kubectl" "$@"; }
# Prints what it passes on, through the narration's own stderr. `tee /dev/stderr` would reopen
# the file behind it, truncating `make demo > demo.log 2>&1` to the last screen.
echoed() { local text; text=$(cat); printf '%s\n' "$text" >&2; printf '%s\n' "$text"; }

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

# A fresh namespace each time: wait out the previous demo's if it is still being deleted.
"$kubectl" delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
"$kubectl" create namespace "$ns" >/dev/null

say "kube-retention's webhook refuses what Shipwright's Go controller could not read, naming each field"
cat <<YAML | echoed | "$kubectl" apply -n "$ns" -f - || true
apiVersion: shipwright.io/v1beta1
kind: Build
metadata:
  name: hello
spec:
  source: {type: Git, git: {url: https://github.com/shipwright-io/sample-go}}
  strategy: {kind: ClusterBuildStrategy, name: buildkit}
  output: {image: registry.example/hello:latest}
  retention: {ttlAfterFailed: 1d, succeededLimit: 101}
YAML

say "Fixed: Go durations (h, m, s, ms, us, ns) and a limit of at most 100"
cat <<YAML | echoed | "$kubectl" apply -n "$ns" -f -
apiVersion: shipwright.io/v1beta1
kind: Build
metadata:
  name: hello
spec:
  source: {type: Git, git: {url: https://github.com/shipwright-io/sample-go}}
  strategy: {kind: ClusterBuildStrategy, name: buildkit}
  output: {image: registry.example/hello:latest}
  retention: {ttlAfterSucceeded: 10m, ttlAfterFailed: 36h, succeededLimit: 5}
YAML

say "A BuildRun of it inherits the Build's TTLs at creation"
printf 'apiVersion: shipwright.io/v1beta1\nkind: BuildRun\nmetadata: {name: hello-1}\nspec: {build: {name: hello}}\n' \
	| "$kubectl" apply -n "$ns" -f -
show get buildrun hello-1 -n "$ns" -o jsonpath='{.spec.retention}{"\n"}'

say "Any object can carry a TTL; the webhook stamps when it expires"
"$kubectl" create configmap scratch -n "$ns" --from-literal=k=v --dry-run=client -o yaml \
	| "$kubectl" annotate -f - retention.dev/ttl=10m --local -o yaml | "$kubectl" apply -n "$ns" -f - >/dev/null
show get configmap scratch -n "$ns" -o jsonpath='{.metadata.annotations.retention\.dev/expires-at}{"\n"}'

finish() { # finish NAME: mark a BuildRun succeeded now, through its status subresource
	local now
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	"$kubectl" patch buildrun "$1" -n "$ns" --subresource=status --type=merge -p \
		"{\"status\":{\"completionTime\":\"$now\",\"conditions\":[{\"type\":\"Succeeded\",\"status\":\"True\",\"reason\":\"Succeeded\",\"message\":\"done\",\"lastTransitionTime\":\"$now\"}]}}" >/dev/null
}

say "Nothing here runs builds: the demo sets statuses itself. A run with its own 5s TTL finishes..."
printf 'apiVersion: shipwright.io/v1beta1\nkind: BuildRun\nmetadata: {name: quick}\nspec: {build: {name: hello}, retention: {ttlAfterSucceeded: 5s}}\n' \
	| "$kubectl" apply -n "$ns" -f - >/dev/null
finish quick
sleep 1
show get buildrun quick -n "$ns" -o jsonpath='completed {.status.completionTime}, expires-at {.metadata.annotations.retention\.dev/expires-at}{"\n"}'
say "...this cluster's controller runs with --stamp=finished (off by default: one request per deletion), so it stamped when it expires (finish + 5s); it deletes it then"
for _ in $(seq 1 10); do
	"$kubectl" get buildrun quick -n "$ns" >/dev/null 2>&1 || break
	printf '%s still there\n' "$(date -u +%T)"
	sleep 1
done
printf '%s gone\n' "$(date -u +%T)"
show get events -n "$ns" --field-selector reason=RetentionExpired

say "Limits: Build \"hello\" keeps 5 succeeded runs; lower it to 2 and finish four runs"
"$kubectl" patch builds.shipwright.io hello -n "$ns" --type=merge -p '{"spec":{"retention":{"succeededLimit":2}}}' >/dev/null
for run in run-a run-b run-c run-d; do
	printf 'apiVersion: shipwright.io/v1beta1\nkind: BuildRun\nmetadata: {name: %s}\nspec: {build: {name: hello}}\n' "$run" \
		| "$kubectl" apply -n "$ns" -f - >/dev/null
	sleep 1
	finish "$run"
done
sleep 2
say "The newest two succeeded runs remain (hello-1 is still running, so it never counts or goes)"
show get buildruns.shipwright.io -n "$ns"

say "A RetentionPolicy governs Jobs without annotating any: failed ones live 3s, one succeeded per app"
printf 'apiVersion: retention.dev/v1alpha1\nkind: RetentionPolicy\nmetadata: {name: jobs}\nspec:\n  resources: [{apiVersion: batch/v1, kind: Job}]\n  ttlAfterFailed: 3s\n  succeededLimit: 1\n  groupBy: app\n' \
	| "$kubectl" apply -n "$ns" -f - >/dev/null
job() { # job NAME APP succeeded|failed: a Job that never runs, its status set as the job controller would
	local now status
	printf 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: %s, labels: {app: %s}}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n' "$1" "$2" \
		| "$kubectl" apply -n "$ns" -f - >/dev/null
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	if [ "$3" = succeeded ]; then
		status="\"completionTime\":\"$now\",\"succeeded\":1,\"conditions\":[{\"type\":\"SuccessCriteriaMet\",\"status\":\"True\",\"lastTransitionTime\":\"$now\"},{\"type\":\"Complete\",\"status\":\"True\",\"lastTransitionTime\":\"$now\"}]"
	else
		status="\"failed\":1,\"conditions\":[{\"type\":\"FailureTarget\",\"status\":\"True\",\"lastTransitionTime\":\"$now\"},{\"type\":\"Failed\",\"status\":\"True\",\"lastTransitionTime\":\"$now\"}]"
	fi
	"$kubectl" patch job "$1" -n "$ns" --subresource=status --type=merge -p "{\"status\":{\"startTime\":\"$now\",$status}}" >/dev/null
}
job nightly-1 nightly succeeded
sleep 1.1
job nightly-2 nightly succeeded
job broken batch failed
show get jobs -n "$ns"
for _ in $(seq 1 15); do # the leader writes policy statuses every 5 s
	[ "$("$kubectl" get retentionpolicy jobs -n "$ns" -o jsonpath='{.status.deletions}')" = 2 ] && break
	sleep 1
done
say "nightly-1 went at once by the limit; the failed Job goes by its TTL; the policy reports it all"
show get jobs -n "$ns"
show get retentionpolicies -n "$ns"
show get retentionpolicy jobs -n "$ns" -o jsonpath='{.status.conditions[0].message}, {.status.deletions} deletions{"\n"}'

say "A Cleaner removes a preview environment as a group: its Helm release, settings and revisions"
export HELM_CACHE_HOME="$PWD/.local/helm" HELM_CONFIG_HOME="$PWD/.local/helm" HELM_DATA_HOME="$PWD/.local/helm"
printf '$ helm install preview-7 tests/charts/preview\n'
"$helm" install preview-7 tests/charts/preview -n "$ns" >/dev/null
"$kubectl" apply -n "$ns" -f deploy/optional/cleaner-helm.yaml >/dev/null # Helm's records are Secrets
"$kubectl" create configmap preview-7-settings -n "$ns" >/dev/null
for revision in 1 2; do
	"$kubectl" create configmap "preview-7-rev-$revision" -n "$ns" --from-literal=phase=Active >/dev/null
	"$kubectl" label configmap "preview-7-rev-$revision" -n "$ns" app=preview-7 >/dev/null
done
cat <<EOF | echoed | "$kubectl" apply -n "$ns" -f - >/dev/null
apiVersion: retention.dev/v1alpha1
kind: Cleaner
metadata: {name: preview-7}
spec:
  ttl: 2s
  retry: {period: 1h}
  helm: {release: preview-7, delete: true}
  targets:
  - {name: revisions, includeWhenEvaluating: true, delete: true,
     reference: {version: v1, kind: ConfigMap, matchLabels: {app: preview-7}}}
  - {name: settings, delete: true, reference: {version: v1, kind: ConfigMap, name: preview-7-settings}}
  conditions: ['!revisions.items.exists(r, r.data.phase == "Active")']
EOF
sleep 4
say "Its TTL has passed, but a revision is still Active: the Cleaner waits and says why"
show get cleaner preview-7 -n "$ns" -o jsonpath='{.status.conditions[?(@.type=="Waiting")].message}{"\n"}'
say "Retiring the revisions wakes it at once (its period is an hour): the whole group goes"
for revision in 1 2; do
	"$kubectl" patch configmap "preview-7-rev-$revision" -n "$ns" --type=merge -p '{"data":{"phase":"Retired"}}' >/dev/null
done
sleep 2
printf '$ helm list\n'
"$helm" list -n "$ns"
show get configmaps,services,cleaners -n "$ns"
printf '(preview-7-kept stays: the chart marks it helm.sh/resource-policy: keep)\n'

say "Cleaning up the demo namespace; the cluster keeps running (make down stops it)"
"$kubectl" delete namespace "$ns" --wait=false
printf '\nexport KUBECONFIG=%s\n' "$KUBECONFIG"
