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
{{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
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
{{- $namespaces := concat .Values.webhook.excludedNamespaces (list .Release.Namespace) | uniq -}}
[{{ join ", " $namespaces }}]
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
