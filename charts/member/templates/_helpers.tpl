{{/*
Helpers shared by the member and hub charts. This file is identical in
charts/member and charts/hub (test/charts checks it); what differs between
the charts lives in _chart.tpl.
*/}}

{{/* Chart name, overridable. */}}
{{- define "fleetmirror.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, unless the release name already holds the chart name. */}}
{{- define "fleetmirror.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "fleetmirror.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetmirror.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetmirror
{{- end }}

{{/* Labels that select the agent's Pods. */}}
{{- define "fleetmirror.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetmirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Name of the agent's ServiceAccount. */}}
{{- define "fleetmirror.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetmirror.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference: repository@digest, or repository:tag (tag defaults to appVersion). */}}
{{- define "fleetmirror.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Name of the leader election Lease. */}}
{{- define "fleetmirror.leaderElectionID" -}}
{{- default (include "fleetmirror.fullname" .) .Values.leaderElection.id }}
{{- end }}

{{/* Namespace of the leader election Lease. */}}
{{- define "fleetmirror.leaderElectionNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/*
Resource (plural) names of kinds, as discovery serves them, for the kinds
whose plural the regular rule below gets wrong or that are common enough to
spell out. test/charts checks every entry against a real API server's
discovery. Kind names are unique across these groups.
*/}}
{{- define "fleetmirror.knownPlurals" -}}
{{- toJson (dict
  "Binding" "bindings" "ConfigMap" "configmaps" "Endpoints" "endpoints"
  "Event" "events" "LimitRange" "limitranges" "PersistentVolumeClaim" "persistentvolumeclaims"
  "Pod" "pods" "PodTemplate" "podtemplates" "ReplicationController" "replicationcontrollers"
  "ResourceQuota" "resourcequotas" "Secret" "secrets" "Service" "services"
  "ServiceAccount" "serviceaccounts" "ControllerRevision" "controllerrevisions"
  "DaemonSet" "daemonsets" "Deployment" "deployments" "ReplicaSet" "replicasets"
  "StatefulSet" "statefulsets" "HorizontalPodAutoscaler" "horizontalpodautoscalers"
  "CronJob" "cronjobs" "Job" "jobs" "Lease" "leases" "EndpointSlice" "endpointslices"
  "Ingress" "ingresses" "NetworkPolicy" "networkpolicies"
  "PodDisruptionBudget" "poddisruptionbudgets" "Role" "roles" "RoleBinding" "rolebindings"
  "CSIStorageCapacity" "csistoragecapacities" "ResourceClaim" "resourceclaims"
  "ResourceClaimTemplate" "resourceclaimtemplates"
  "Gateway" "gateways" "HTTPRoute" "httproutes" "GRPCRoute" "grpcroutes"
  "TLSRoute" "tlsroutes" "TCPRoute" "tcproutes" "UDPRoute" "udproutes"
  "ReferenceGrant" "referencegrants" "BackendTLSPolicy" "backendtlspolicies"
  "ListenerSet" "listenersets") }}
{{- end }}

{{/*
Resource (plural) name of a kind: list KIND OVERRIDES. OVERRIDES
(rbac.resourceNames) maps Kind to its plural; then the table above; then the
rule Kubernetes uses for a kind without a declared plural: lower case, "es"
after x/z/ch/sh, "ies" instead of a "y" after a consonant, else "s". A kind
ending in "s" is refused there: its plural cannot be told from its name
(Ingress -> ingresses, but Endpoints -> endpoints), and a wrong plural
would be a grant of nothing.
*/}}
{{- define "fleetmirror.plural" -}}
{{- $kind := index . 0 }}
{{- $overrides := index . 1 }}
{{- $known := include "fleetmirror.knownPlurals" . | fromJson }}
{{- if hasKey $overrides $kind }}
{{- index $overrides $kind }}
{{- else if hasKey $known $kind }}
{{- index $known $kind }}
{{- else }}
{{- $l := lower $kind }}
{{- if hasSuffix "s" $l }}
{{- fail (printf "the resource (plural) name of kind %s cannot be derived from its name: set rbac.resourceNames.%s to the name `kubectl api-resources` shows" $kind $kind) }}
{{- else if regexMatch "(x|z|ch|sh)$" $l }}
{{- printf "%ses" $l }}
{{- else if regexMatch "[^aeiou]y$" $l }}
{{- printf "%sies" (trimSuffix "y" $l) }}
{{- else }}
{{- printf "%ss" $l }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Resources of kinds by API group, as JSON: dict with "types"
(Kind.version[.group] list) and "resourceNames" (rbac.resourceNames).
*/}}
{{- define "fleetmirror.resourcesByGroup" -}}
{{- $byGroup := dict }}
{{- range .types }}
{{- if not (regexMatch "^[A-Z][A-Za-z0-9]*\\.v[0-9]+((alpha|beta)[0-9]+)?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" .) }}
{{- fail (printf "resource type %q is not Kind.version[.group], e.g. Ingress.v1.networking.k8s.io" .) }}
{{- end }}
{{- $parts := splitn "." 3 . }}
{{- $group := default "" $parts._2 }}
{{- $resource := include "fleetmirror.plural" (list $parts._0 $.resourceNames) }}
{{- $_ := set $byGroup $group (append (default (list) (get $byGroup $group)) $resource | uniq | sortAlpha) }}
{{- end }}
{{- toJson $byGroup }}
{{- end }}

{{/*
Label that aggregates a ClusterRole into the discovery-mode ClusterRole
named NAME: "fleetmirror.io/aggregate-to-<NAME, cut to 50 characters>".
*/}}
{{- define "fleetmirror.aggregationLabel" -}}
{{- printf "fleetmirror.io/aggregate-to-%s" (. | trunc 50 | trimSuffix "-" | trimSuffix ".") }}
{{- end }}

{{/*
The ClusterRoles of an identity that mirrors kinds in a cluster: dict with
"root" (the chart's context), "name", "component" (label, may be empty),
"types" (Kind.version[.group] list; empty means the agent discovers kinds),
"resourceNames" (rbac.resourceNames) and "extraRules".

With types, one ClusterRole NAME: one rule per API group with exactly the
kinds given, namespaces read, events create and patch (the event recorder
patches an event that repeats), then extraRules.

Without types the kinds are not known at install time. NAME is then an
aggregated ClusterRole: it holds the rules of every ClusterRole labelled
fleetmirror.aggregationLabel NAME: "true". NAME-base is one of them, with
Secrets, ConfigMaps, namespaces, events and extraRules; cluster admins add
kinds by labelling a ClusterRole of their own.
*/}}
{{- define "fleetmirror.mirrorClusterRoles" -}}
{{- $verbs := list "get" "list" "watch" "create" "update" "patch" "delete" }}
{{- $types := .types }}
{{- $label := include "fleetmirror.aggregationLabel" .name }}
{{- if not $types }}
{{- $types = list "Secret.v1" "ConfigMap.v1" }}
{{- end }}
{{- $byGroup := include "fleetmirror.resourcesByGroup" (dict "types" $types "resourceNames" .resourceNames) | fromJson }}
{{- if not .types }}
# Kinds are discovered at run time: this ClusterRole holds the rules
# of every ClusterRole labelled {{ $label }}: "true".
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}
  labels:
    {{- include "fleetmirror.labels" .root | nindent 4 }}
    {{- with .component }}
    app.kubernetes.io/component: {{ . }}
    {{- end }}
aggregationRule:
  clusterRoleSelectors:
    - matchLabels:
        {{ $label }}: "true"
rules: []
---
{{- end }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}{{ if not .types }}-base{{ end }}
  labels:
    {{- include "fleetmirror.labels" .root | nindent 4 }}
    {{- with .component }}
    app.kubernetes.io/component: {{ . }}
    {{- end }}
    {{- if not .types }}
    {{ $label }}: "true"
    {{- end }}
rules:
  {{- range $group := keys $byGroup | sortAlpha }}
  - apiGroups: [{{ $group | quote }}]
    resources: {{ get $byGroup $group | toJson }}
    verbs: {{ toJson $verbs }}
  {{- end }}
  - apiGroups: [""]
    resources: ["namespaces"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["", "events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
  {{- with .extraRules }}
  {{- toYaml . | trim | nindent 2 }}
  {{- end }}
{{- end }}

{{/* A list value as one comma-separated flag value. */}}
{{- define "fleetmirror.csv" -}}
{{- join "," (default (list) .) }}
{{- end }}

{{/*
Command-line flags shared by both binaries, then the chart's own
(fleetmirror.chartArgs in _chart.tpl), then extraArgs: one YAML list item each.
*/}}
{{- define "fleetmirror.args" -}}
{{- $c := .Values.config }}
{{- $args := list (printf "--namespace=%s" .Release.Namespace) }}
{{- $args = append $args (printf "--cluster-name=%s" $c.clusterName) }}
{{- with $c.kubeconfig }}
{{- $args = append $args (printf "--kubeconfig=%s" .) }}
{{- end }}
{{- with $c.resourceTypes }}
{{- $args = append $args (printf "--resource-types=%s" (include "fleetmirror.csv" .)) }}
{{- end }}
{{- $args = append $args (printf "--deny-kinds=%s" (include "fleetmirror.csv" $c.denyKinds)) }}
{{- $args = append $args (printf "--allow-privilege-kinds=%t" $c.allowPrivilegeKinds) }}
{{- $args = append $args (printf "--discovery-interval=%s" $c.discoveryInterval) }}
{{- $args = append $args (printf "--lazy-watchers=%t" $c.lazyWatchers) }}
{{- $args = append $args (printf "--lazy-probe-interval=%s" $c.lazyProbeInterval) }}
{{- $args = append $args (printf "--watch-idle-timeout=%s" $c.watchIdleTimeout) }}
{{- $args = append $args (printf "--circuit-breaker-failures=%d" (int $c.circuitBreakerFailures)) }}
{{- $args = append $args (printf "--circuit-breaker-base-delay=%s" $c.circuitBreakerBaseDelay) }}
{{- $args = append $args (printf "--circuit-breaker-max-delay=%s" $c.circuitBreakerMaxDelay) }}
{{- $args = append $args (printf "--excluded-namespaces=%s" (include "fleetmirror.excludedNamespaces" .)) }}
{{- $args = append $args (printf "--included-namespaces=%s" (include "fleetmirror.csv" $c.includedNamespaces)) }}
{{- $args = append $args (printf "--max-targets=%d" (int $c.maxTargets)) }}
{{- $args = append $args (printf "--strip-keys=%s" (include "fleetmirror.csv" $c.stripKeys)) }}
{{- $args = append $args (printf "--workers=%d" (int $c.workers)) }}
{{- $args = append $args (printf "--write-parallelism=%d" (int $c.writeParallelism)) }}
{{- $args = append $args (printf "--kube-api-qps=%v" $c.kubeAPIQPS) }}
{{- $args = append $args (printf "--kube-api-burst=%d" (int $c.kubeAPIBurst)) }}
{{- $args = append $args (printf "--resync-period=%s" $c.resyncPeriod) }}
{{- $args = append $args (printf "--status-annotation=%t" $c.statusAnnotation) }}
{{- $args = append $args (printf "--verify-source-freshness=%t" $c.verifySourceFreshness) }}
{{- $args = append $args (printf "--api-call-timeout=%s" $c.apiCallTimeout) }}
{{- $args = append $args (printf "--graceful-shutdown-timeout=%s" $c.gracefulShutdownTimeout) }}
{{- with $c.pprofBindAddress }}
{{- $args = append $args (printf "--pprof-bind-address=%s" .) }}
{{- end }}
{{- $args = append $args (printf "--leader-elect=%t" .Values.leaderElection.enabled) }}
{{- if .Values.leaderElection.enabled }}
{{- $args = append $args (printf "--leader-election-id=%s" (include "fleetmirror.leaderElectionID" .)) }}
{{- $args = append $args (printf "--leader-election-namespace=%s" (include "fleetmirror.leaderElectionNamespace" .)) }}
{{- $args = append $args (printf "--leader-election-lease-duration=%s" .Values.leaderElection.leaseDuration) }}
{{- $args = append $args (printf "--leader-election-renew-deadline=%s" .Values.leaderElection.renewDeadline) }}
{{- $args = append $args (printf "--leader-election-retry-period=%s" .Values.leaderElection.retryPeriod) }}
{{- end }}
{{- if .Values.metrics.enabled }}
{{- $args = append $args (printf "--metrics-bind-address=:%d" (int .Values.metrics.port)) }}
{{- else }}
{{- $args = append $args "--metrics-bind-address=0" }}
{{- end }}
{{- $args = append $args (printf "--health-probe-bind-address=:%d" (int .Values.health.port)) }}
{{- with $c.log.level }}
{{- $args = append $args (printf "--zap-log-level=%v" .) }}
{{- end }}
{{- with $c.log.encoder }}
{{- $args = append $args (printf "--zap-encoder=%s" .) }}
{{- end }}
{{- $args = append $args (printf "--zap-devel=%t" $c.log.development) }}
{{- with $c.log.stacktraceLevel }}
{{- $args = append $args (printf "--zap-stacktrace-level=%s" .) }}
{{- end }}
{{- with $c.log.timeEncoding }}
{{- $args = append $args (printf "--zap-time-encoding=%s" .) }}
{{- end }}
{{- $args = concat $args (fromYamlArray (include "fleetmirror.chartArgs" .)) }}
{{- $args = concat $args .Values.extraArgs }}
{{- range $args }}
- {{ toJson . }}
{{- end }}
{{- end }}

{{/* Checks of value combinations the schema cannot express. */}}
{{- define "fleetmirror.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount > 1 requires leaderElection.enabled: replicas without leader election would all write" }}
{{- end }}
{{- end }}
