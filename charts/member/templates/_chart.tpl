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

{{/* Flags only the member has (none): a JSON list. */}}
{{- define "fleetmirror.chartArgs" -}}
[]
{{- end }}
