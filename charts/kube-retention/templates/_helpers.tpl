{{/* The labels Helm adds to every object; the objects themselves are those of deploy/. */}}
{{- define "kube-retention.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "kube-retention.coreLabels" -}}
{{ include "kube-retention.labels" . }}
app.kubernetes.io/part-of: kube-retention
{{- end -}}

{{- define "kube-retention.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else -}}
{{ printf "%s:%s" .Values.image.repository $tag }}
{{- end -}}
{{- end -}}

{{- define "kube-retention.selfManagedCerts" -}}
{{- if eq .Values.certificates.mode "self-managed" -}}true{{- else if ne .Values.certificates.mode "cert-manager" -}}
{{- fail (printf "certificates.mode %q: use self-managed or cert-manager" .Values.certificates.mode) -}}
{{- end -}}
{{- end -}}

{{/* The webhook Service the registrations call. */}}
{{- define "kube-retention.webhookService" -}}
service: {name: kube-retention-webhook, namespace: {{ .Release.Namespace }}, path: {{ .path }}, port: 443}
{{- end -}}

{{- define "kube-retention.caInjection" -}}
{{- if not (include "kube-retention.selfManagedCerts" .) }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/kube-retention-webhook
{{- end }}
{{- end -}}

{{- define "kube-retention.excludedNamespaces" -}}
{{- $namespaces := concat (.Values.webhook.excludedNamespaces | default list) (list .Release.Namespace) | uniq -}}
{{- toJson $namespaces -}}
{{- end -}}

{{/* The sink policy's flags, given to the controller and the webhook alike. */}}
{{- define "kube-retention.sinkPolicyArgs" -}}
- --cloud-event-sink-schemes={{ join "," .Values.controller.sinkPolicy.schemes }}
{{- range .Values.controller.sinkPolicy.allow }}
- --cloud-event-sink-allow={{ . }}
{{- end }}
{{- range .Values.controller.sinkPolicy.deny }}
- --cloud-event-sink-deny={{ . }}
{{- end }}
{{- end -}}

{{/* The built-in kinds (common/src/kinds/builtin.rs) by their `Kind.group` names, each with the
resource the registrations match it by. `runs`: matched by the runs.* hooks' explicit rules;
otherwise through the annotated.* hooks' `*` rule. */}}
{{- define "kube-retention.builtinKinds" -}}
kinds:
  - {name: Build.shipwright.io, group: shipwright.io, resource: builds, runs: true}
  - {name: BuildRun.shipwright.io, group: shipwright.io, resource: buildruns, runs: true}
  - {name: Build.build.openshift.io, group: build.openshift.io, resource: builds, runs: true}
  - {name: BuildConfig.build.openshift.io, group: build.openshift.io, resource: buildconfigs, runs: true}
  - {name: Job.batch, group: batch, resource: jobs, runs: false}
  - {name: Pod, group: "", resource: pods, runs: false}
{{- end -}}

{{/* The built-in kinds of controller.disabledKinds (named in any case, as the binaries accept
them), in the table's order, as YAML {kinds: [...]}; an unknown name fails the render. */}}
{{- define "kube-retention.disabledKinds" -}}
{{- $builtin := (include "kube-retention.builtinKinds" . | fromYaml).kinds -}}
{{- $names := .Values.controller.disabledKinds | default list -}}
{{- if not (kindIs "slice" $names) -}}
{{- fail (printf "controller.disabledKinds %q: a list is expected, e.g. --set 'controller.disabledKinds={Job.batch,Pod}'" (toString $names)) -}}
{{- end -}}
{{- $accepted := list -}}
{{- range $builtin }}{{ $accepted = append $accepted .name }}{{ end -}}
{{- $wanted := list -}}
{{- range $names -}}
{{- $name := toString . -}}
{{- $found := false -}}
{{- range $builtin -}}
{{- if eq (lower .name) (lower $name) }}{{ $found = true }}{{ $wanted = append $wanted .name }}{{ end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "controller.disabledKinds: %q is not a built-in kind; use %s (Kind.group, any case)" $name (join ", " $accepted)) -}}
{{- end -}}
{{- end -}}
{{- $disabled := list -}}
{{- range $builtin }}{{ if has .name $wanted }}{{ $disabled = append $disabled . }}{{ end }}{{ end -}}
{{ dict "kinds" $disabled | toYaml }}
{{- end -}}

{{/* The runs.* hooks' rules: each group's resources but the disabled ones; empty when every
run kind is disabled (the hook is then left out). */}}
{{- define "kube-retention.runRules" -}}
{{- $builtin := (include "kube-retention.builtinKinds" . | fromYaml).kinds -}}
{{- $disabled := list -}}
{{- range (include "kube-retention.disabledKinds" . | fromYaml).kinds }}{{ $disabled = append $disabled .name }}{{ end -}}
{{- range $group := list "shipwright.io" "build.openshift.io" -}}
{{- $resources := list -}}
{{- range $builtin -}}
{{- if and (eq .group $group) (not (has .name $disabled)) }}{{ $resources = append $resources (quote .resource) }}{{ end -}}
{{- end -}}
{{- if $resources }}
- apiGroups: [{{ quote $group }}]
  apiVersions: ["*"]
  resources: [{{ join ", " $resources }}]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The annotated.* hooks' matchConditions keeping disabled kinds of other groups away. */}}
{{- define "kube-retention.disabledKindConditions" -}}
{{- range (include "kube-retention.disabledKinds" . | fromYaml).kinds -}}
{{- if not .runs }}
- name: not-disabled-{{ .name }}
  expression: "!(request.resource.group == '{{ .group }}' && request.resource.resource == '{{ .resource }}')"
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The writer policy binding's excludeResourceRules: the disabled kinds the annotated hook's
matchConditions keep away (Shipwright's and OpenShift's kinds never reach the policy). */}}
{{- define "kube-retention.disabledKindResourceRules" -}}
{{- range (include "kube-retention.disabledKinds" . | fromYaml).kinds -}}
{{- if not .runs }}
- {apiGroups: [{{ quote .group }}], apiVersions: ["*"], resources: [{{ quote .resource }}], operations: ["*"], scope: "*"}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* The NetworkPolicy peers the API server calls the webhook from, as YAML ({peers: [...],
learned: bool}): webhook.networkPolicy.apiServerCIDRs where given; else, at install and
upgrade, the addresses of the `kubernetes` Service's EndpointSlice in `default` (each a /32 or
/128), with a konnectivity proxy's agent pods in kube-system where one runs (the API server
then reaches pods through them). Empty where neither is known: `helm template` and renderers
without a cluster (Argo CD) look nothing up. */ -}}
{{- define "kube-retention.webhookCallers" -}}
{{- $peers := list -}}
{{- range .Values.webhook.networkPolicy.apiServerCIDRs -}}
{{- $peers = append $peers (dict "ipBlock" (dict "cidr" .)) -}}
{{- end -}}
{{- $learned := false -}}
{{- if not $peers -}}
{{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" -}}
{{- range ($slice.endpoints | default list) -}}
{{- range .addresses -}}
{{- $peers = append $peers (dict "ipBlock" (dict "cidr" (printf "%s/%s" . (ternary "128" "32" (contains ":" .))))) -}}
{{- end -}}
{{- end -}}
{{- if $peers -}}
{{- $learned = true -}}
{{- range $kind := list "DaemonSet" "Deployment" -}}
{{- with lookup "apps/v1" $kind "kube-system" "konnectivity-agent" -}}
{{- $peers = append $peers (dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" "kube-system")) "podSelector" .spec.selector) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "peers" $peers "learned" $learned) -}}
{{- end -}}
