{{/*
What sets this chart apart from the member chart; every other helper is in
_helpers.tpl, which both charts share.
*/}}

{{/* The binary the chart runs; also the Prometheus job of its metrics. */}}
{{- define "fleetmirror.binary" -}}
fleetmirror-hub
{{- end }}

{{/* The default of config.maxProcs, for a release installed before it. */}}
{{- define "fleetmirror.maxProcs" -}}
0
{{- end }}

{{/* Name of the agent container. */}}
{{- define "fleetmirror.component" -}}
hub
{{- end }}

{{/* Namespace of the kubeconfig Secrets that register clusters. */}}
{{- define "fleetmirror.clusterSecretsNamespace" -}}
{{- default .Release.Namespace .Values.config.clusterSecretsNamespace }}
{{- end }}

{{/*
The --excluded-namespaces value. The hub excludes its cluster-secrets
namespace in its own cluster by itself.
*/}}
{{- define "fleetmirror.excludedNamespaces" -}}
{{- include "fleetmirror.csv" .Values.config.excludedNamespaces }}
{{- end }}

{{/*
Namespaced Roles only the hub has, as fleetmirror.roles lists them.

The kubeconfig Secrets that register clusters are read in one namespace
only: a Role, not a cluster-wide Secret read. Registration is
label-selected, which resourceNames cannot express, so every Secret of that
namespace is readable: keep the namespace for registrations. Events: Warnings
on Secrets the hub refuses.

Sharding: each replica creates and renews a Lease named after its Pod, and
lists and watches the others' (their names are not known ahead, so get,
update and delete cannot be limited by name: a replica deletes the Leases of
replicas gone for good).
*/}}
{{- define "fleetmirror.chartRoles" -}}
{{- $secrets := `
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]` }}
{{- $roles := list (dict "suffix" "cluster-secrets" "namespace" (include "fleetmirror.clusterSecretsNamespace" .) "rules" (trim $secrets)) }}
{{- if .Values.sharding.enabled }}
{{- $shards := `
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create", "get", "list", "watch", "update", "delete"]` }}
{{- $roles = append $roles (dict "suffix" "shards" "namespace" .Release.Namespace "rules" (trim $shards)) }}
{{- end }}
{{- toJson $roles }}
{{- end }}

{{/* ClusterRole rules only the hub has: the MirrorPolicies of its own cluster. A YAML list. */}}
{{- define "fleetmirror.chartClusterRules" -}}
{{ include "fleetmirror.hubPolicyRules" . }}
{{- end }}

{{/* Flags only the hub has: a JSON list. */}}
{{- define "fleetmirror.chartArgs" -}}
{{- $c := .Values.config }}
{{- $args := list (printf "--cluster-secrets-namespace=%s" (include "fleetmirror.clusterSecretsNamespace" .)) }}
{{- $args = append $args (printf "--cluster-provider=%s" $c.clusterProvider) }}
{{- if $c.kubeconfigDir }}
{{- $args = append $args (printf "--kubeconfig-dir=%s" $c.kubeconfigDir) }}
{{- end }}
{{- $args = append $args (printf "--allow-kubeconfig-plugins=%t" $c.allowKubeconfigPlugins) }}
{{- $args = append $args (printf "--allowed-source-clusters=%s" (include "fleetmirror.csv" $c.allowedSourceClusters)) }}
{{- $args = append $args (printf "--allowed-source-namespaces=%s" (include "fleetmirror.csv" $c.allowedSourceNamespaces)) }}
{{- $args = append $args (printf "--remote-cleanup-timeout=%s" $c.remoteCleanupTimeout) }}
{{- $args = append $args (printf "--unregistered-source-mirrors=%s" $c.unregisteredSourceMirrors) }}
{{- $args = append $args (printf "--cluster-probe-interval=%s" $c.clusterProbeInterval) }}
{{- $args = append $args (printf "--cluster-probe-timeout=%s" $c.clusterProbeTimeout) }}
{{- $args = append $args (printf "--member-kinds=%t" $c.memberKinds) }}
{{- $args = append $args (printf "--shards=%s" (ternary "auto" "off" .Values.sharding.enabled)) }}
{{- $args = append $args (printf "--shard-group=%s" (include "fleetmirror.fullname" .)) }}
{{- $args = append $args (printf "--shard-lease-duration=%s" .Values.sharding.leaseDuration) }}
{{- toJson $args }}
{{- end }}

{{/*
Users whose writes the admission policy leaves alone, as JSON: the hub's
ServiceAccount (it writes status annotations on sources; a Deny must never
stop it).
*/}}
{{- define "fleetmirror.writers" -}}
{{- toJson (list (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "fleetmirror.serviceAccountName" .))) }}
{{- end }}
