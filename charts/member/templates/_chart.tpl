{{/*
What sets this chart apart from the hub chart; every other helper is in
_helpers.tpl, which both charts share.
*/}}

{{/* The binary the chart runs; also the Prometheus job of its metrics. */}}
{{- define "fleetmirror.binary" -}}
fleetmirror-member
{{- end }}

{{/* The default of config.maxProcs, for a release installed before it. */}}
{{- define "fleetmirror.maxProcs" -}}
2
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

{{/* Namespaced Roles only the member has, as fleetmirror.roles lists them: its kinds object's (created, then read, renewed and deleted by name). */}}
{{- define "fleetmirror.chartRoles" -}}
{{- $kinds := `
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: ["fleetmirror-member-kinds"]
  verbs: ["get", "update", "delete"]` }}
{{- toJson (list (dict "suffix" "kinds-object" "namespace" .Release.Namespace "rules" (trim $kinds))) }}
{{- end }}

{{/*
ClusterRole rules only the member's agent has (and so its uninstall hook),
as a YAML list, before rbac.extraRules: MirrorPolicies in every namespace
read and updated, never created or deleted (their authors do that), their
status written and their finalizer set.
*/}}
{{- define "fleetmirror.chartClusterRules" -}}
- apiGroups: ["fleetmirror.io"]
  resources: ["mirrorpolicies"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["fleetmirror.io"]
  resources: ["mirrorpolicies/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["fleetmirror.io"]
  resources: ["mirrorpolicies/finalizers"]
  verbs: ["update"]
{{- end }}

{{/* Flags only the member has (none): a JSON list. */}}
{{- define "fleetmirror.chartArgs" -}}
[]
{{- end }}

{{/*
Users whose writes the admission policy leaves alone, as JSON: the agent's
ServiceAccount and the hub's identity here (they write status annotations
on sources; a Deny must never stop them).
*/}}
{{- define "fleetmirror.writers" -}}
{{- $users := list (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "fleetmirror.serviceAccountName" .)) }}
{{- if .Values.hubAccess.enabled }}
{{- $users = append $users (printf "system:serviceaccount:%s:%s" .Release.Namespace (default (printf "%s-hub" (include "fleetmirror.fullname" .)) .Values.hubAccess.name)) }}
{{- end }}
{{- toJson $users }}
{{- end }}
