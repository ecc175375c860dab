{{/*
What sets this chart apart from the hub chart; every other helper is in
_helpers.tpl, which both charts share.
*/}}

{{/* The binary the chart runs; also the Prometheus job of its metrics. */}}
{{- define "fleetmirror.binary" -}}
fleetmirror-member
{{- end }}

{{/* Name of the agent container. */}}
{{- define "fleetmirror.component" -}}
member
{{- end }}

{{/*
The --excluded-namespaces value: config.excludedNamespaces and, on the
hub's own cluster, the hub's cluster-secrets namespace, where a mirror
would be read as a cluster registration.
*/}}
{{- define "fleetmirror.excludedNamespaces" -}}
{{- $ns := default (list) .Values.config.excludedNamespaces }}
{{- with .Values.hubClusterSecretsNamespace }}
{{- $ns = append $ns . }}
{{- end }}
{{- join "," $ns }}
{{- end }}

{{/* Flags only the member has (none): a JSON list. */}}
{{- define "fleetmirror.chartArgs" -}}
[]
{{- end }}
