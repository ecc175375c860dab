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

{{/*
"true" when the boolean key (index . 1) of the values map (index . 0) is
true or absent, else empty: how templates read a value whose default is
true. `helm upgrade --reuse-values` renders with the values of the chart the
release was installed from, so a key added since is absent there and must
mean its default; `default true` would not do, as it takes false for empty.
The map may be absent too (a section added since). Use:
  include "fleetmirror.defaultTrue" (list .Values.rbac "aggregateClusterRoles")
*/}}
{{- define "fleetmirror.defaultTrue" -}}
{{- $values := default (dict) (index . 0) }}
{{- if hasKey $values (index . 1) | ternary (index $values (index . 1)) true }}true{{ end }}
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
Rules of the leader election Role: create the Lease, then read and renew
only that one, and delete it (the uninstall hook, its last holder).
*/}}
{{- define "fleetmirror.leaderElectionRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "fleetmirror.leaderElectionID" . | quote }}]
  verbs: ["get", "update", "delete"]
{{- end }}

{{/*
The agent's namespaced Roles, as a JSON list of dicts with "suffix" (of
their name), "namespace" and "rules" (a YAML list): the leader election
Lease's, then those of fleetmirror.chartRoles (_chart.tpl). The agent's
Roles (roles.yaml) and the uninstall hook's are both made from it.
*/}}
{{- define "fleetmirror.roles" -}}
{{- $roles := list }}
{{- if .Values.leaderElection.enabled }}
{{- $roles = append $roles (dict "suffix" "leader-election" "namespace" (include "fleetmirror.leaderElectionNamespace" .) "rules" (include "fleetmirror.leaderElectionRules" .)) }}
{{- end }}
{{- toJson (concat $roles (include "fleetmirror.chartRoles" . | fromJsonArray)) }}
{{- end }}

{{/*
A Role and its RoleBinding to a ServiceAccount: dict with "root", "name",
"namespace", "rules" (a YAML list) and, optionally, "serviceAccount" (its
name; the agent's by default), "component" (a label), "annotations" and
"bindingAnnotations" (maps).
*/}}
{{- define "fleetmirror.role" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "fleetmirror.labels" .root | nindent 4 }}
    {{- with .component }}
    app.kubernetes.io/component: {{ . }}
    {{- end }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "fleetmirror.labels" .root | nindent 4 }}
    {{- with .component }}
    app.kubernetes.io/component: {{ . }}
    {{- end }}
  {{- with .bindingAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .serviceAccount | default (include "fleetmirror.serviceAccountName" .root) }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}

{{/*
The agent's ServiceAccount: dict with "root" and, optionally, "name"
(the agent's by default), "component" (a label) and "annotations" (a map,
besides serviceAccount.annotations).
*/}}
{{- define "fleetmirror.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name | default (include "fleetmirror.serviceAccountName" .root) }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "fleetmirror.labels" .root | nindent 4 }}
    {{- with .component }}
    app.kubernetes.io/component: {{ . }}
    {{- end }}
  {{- with merge (dict) (default (dict) .annotations) .root.Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
The agent's container but for its ports and probes: dict with "root" and
"args" (arguments after the agent's, a list). The Deployment and the
uninstall Job run it alike.
*/}}
{{- define "fleetmirror.container" -}}
name: {{ include "fleetmirror.component" .root }}
image: {{ include "fleetmirror.image" .root | quote }}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
command:
  - /usr/local/bin/{{ include "fleetmirror.binary" .root }}
args:
  {{- include "fleetmirror.args" .root | trim | nindent 2 }}
  {{- range .args }}
  - {{ toJson . }}
  {{- end }}
env:
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  {{- with .root.Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
resources:
  {{- toYaml .root.Values.resources | nindent 2 }}
securityContext:
  {{- toYaml .root.Values.containerSecurityContext | nindent 2 }}
{{- with .root.Values.extraVolumeMounts }}
volumeMounts:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
What the agent's Pods and the uninstall Job's share: image pull secrets,
priority class, security context, volumes and where they may run.
*/}}
{{- define "fleetmirror.podSettings" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.extraVolumes }}
volumes:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Labels of a Pod of the chart that is no agent (dict with "root" and
"component"): not the agent's selector labels, so that the Service and the
PodDisruptionBudget never count it.
*/}}
{{- define "fleetmirror.otherPodLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "fleetmirror.name" .root | trunc (sub 62 (len .component) | int) | trimSuffix "-" }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: fleetmirror
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Name of the uninstall hook's objects; the Job's must fit a label value. */}}
{{- define "fleetmirror.uninstallName" -}}
{{- printf "%s-uninstall" (include "fleetmirror.fullname" . | trunc 53 | trimSuffix "-") }}
{{- end }}

{{/*
The uninstall hook's ServiceAccount: its own, or with serviceAccount.create
false the one given, which outlives the release.
*/}}
{{- define "fleetmirror.uninstallServiceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- include "fleetmirror.uninstallName" . }}
{{- else }}
{{- include "fleetmirror.serviceAccountName" . }}
{{- end }}
{{- end }}

{{/*
Annotations of an uninstall hook object of the given weight, as a map:
post-delete, deleted before it is created again and once every hook
succeeded. Objects of lower weights are created first.
*/}}
{{- define "fleetmirror.uninstallHook" -}}
{{- toJson (dict "helm.sh/hook" "post-delete" "helm.sh/hook-weight" (toString .) "helm.sh/hook-delete-policy" "before-hook-creation,hook-succeeded") }}
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
named NAME: "fleetmirror.io/aggregate-to-NAME". A label name has at most 63
characters, so a NAME over 50 becomes its first 41 and 8 hex digits of its
SHA-256: two long names (the agent's and the hub identity's, NAME-hub)
never share a label.
*/}}
{{- define "fleetmirror.aggregationLabel" -}}
{{- $name := . }}
{{- if gt (len $name) 50 }}
{{- $name = printf "%s-%s" (trunc 41 $name) (sha256sum . | trunc 8) }}
{{- end }}
{{- printf "fleetmirror.io/aggregate-to-%s" $name }}
{{- end }}

{{/*
Rules of the agent's ClusterRole (and its uninstall hook's) after the
mirroring ones, as a YAML list: the chart's own
(fleetmirror.chartClusterRules), then rbac.extraRules.
*/}}
{{- define "fleetmirror.agentExtraRules" -}}
{{- toYaml (concat (include "fleetmirror.chartClusterRules" . | fromYamlArray) (default (list) .Values.rbac.extraRules)) }}
{{- end }}

{{/*
The ClusterRoles of an identity that mirrors kinds in a cluster: dict with
"root" (the chart's context), "name", "component" (label, may be empty),
"types" (Kind.version[.group] list; empty means the agent discovers kinds),
"resourceNames" (rbac.resourceNames) and "extraRules"; optionally
"annotations" (a map, on each ClusterRole) and "aggregateTo" (the name whose
aggregation label is used instead of NAME's, see below).

With types, one ClusterRole NAME: one rule per API group with exactly the
kinds given, namespaces read, events create and patch (the event recorder
patches an event that repeats), then extraRules.

Without types the kinds are not known at install time. NAME is then an
aggregated ClusterRole: it holds the rules of every ClusterRole labelled
fleetmirror.aggregationLabel NAME: "true". NAME-base is one of them, with
Secrets, ConfigMaps, namespaces, events and extraRules; cluster admins add
kinds by labelling a ClusterRole of their own. With "aggregateTo", the label
is that name's: the uninstall hook's ClusterRole holds the rules the cluster
admins granted the agent.
*/}}
{{- define "fleetmirror.mirrorClusterRoles" -}}
{{- $verbs := list "get" "list" "watch" "create" "update" "patch" "delete" }}
{{- $types := .types }}
{{- $label := include "fleetmirror.aggregationLabel" (default .name .aggregateTo) }}
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
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
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
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
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

{{/*
Annotation keys fleetmirror reads on sources, and those the agents write
(the status on sources; the rest on mirrors), as JSON lists. Together they
are every Annotation* key of pkg/annotations/keys.go (test/charts checks it).
*/}}
{{- define "fleetmirror.sourceAnnotations" -}}
{{- toJson (list "fleetmirror.io/sync" "fleetmirror.io/target-namespaces" "fleetmirror.io/max-targets" "fleetmirror.io/target-cluster-selector" "fleetmirror.io/target-namespace-selector" "fleetmirror.io/allow-pull-into" "fleetmirror.io/adopt" "fleetmirror.io/mirror-from" "fleetmirror.io/transform" "fleetmirror.io/transform-strict" "fleetmirror.io/target-name" "fleetmirror.io/copy-once" "fleetmirror.io/deletion-policy" "fleetmirror.io/exclude-namespaces" "fleetmirror.io/keep-additions") }}
{{- end }}
{{- define "fleetmirror.agentAnnotations" -}}
{{- toJson (list "fleetmirror.io/status" "fleetmirror.io/copied" "fleetmirror.io/source" "fleetmirror.io/source-uid" "fleetmirror.io/source-resource-version" "fleetmirror.io/content-hash" "fleetmirror.io/released-from" "fleetmirror.io/released-from-uid") }}
{{- end }}

{{/* A JSON list of strings as a CEL list literal. */}}
{{- define "fleetmirror.celList" -}}
[{{ range $i, $s := . }}{{ if $i }}, {{ end }}'{{ $s }}'{{ end }}]
{{- end }}

{{/*
ValidatingAdmissionPolicy and binding that warn (admissionWarnings.action)
when an object of a mirrored kind carries fleetmirror.io/ annotations the
agent will ignore or refuse: no enabled label, an unknown key, a bad sync
value, target entries that do not parse. The entry rules are
pkg/annotations/parse.go's (test/charts compares them on an API server).
Mirrors (their label) and the agents' own writes are not checked.
*/}}
{{- define "fleetmirror.admissionPolicy" -}}
{{- if .Values.admissionWarnings.enabled }}
{{- $name := printf "%s-annotations" (include "fleetmirror.fullname" .) }}
{{- $types := default (list "Secret.v1" "ConfigMap.v1") .Values.config.resourceTypes }}
{{- $types = concat $types .Values.admissionWarnings.extraResourceTypes | uniq }}
{{- $byGroup := include "fleetmirror.resourcesByGroup" (dict "types" $types "resourceNames" .Values.rbac.resourceNames) | fromJson }}
{{- $label := "[a-z0-9]([-a-z0-9]*[a-z0-9])?" }}
{{- $glob := "[-a-z0-9.*?]*[*?][-a-z0-9.*?]*" }}
{{- $ns := printf "(%s|%s)" $label $glob }}
{{- $cluster := printf "(%s([.]%s)*|%s)" $label $label $glob }}
{{- $misspelled := include "fleetmirror.celList" (list "all-labelled" "all-label" "alllabeled" "labeled" "all-namespaces" "any") }}
{{- $tools := include "fleetmirror.celList" (list "reflector" "replicator" "kubemirror" "kyverno" "fleetmirror") }}
{{- $notPullInto := include "fleetmirror.celList" (list "all" "all-labeled" "all-labelled" "all-label" "alllabeled" "labeled" "all-namespaces" "any") }}
{{- $subdomain := printf "%s([.]%s)*" $label $label }}
{{- $pullKeys := include "fleetmirror.celList" (list "fleetmirror.io/status" "fleetmirror.io/mirror-from" "fleetmirror.io/content-hash") }}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $name }}
  labels:
    {{- include "fleetmirror.labels" . | nindent 4 }}
spec:
  # The policy only advises: an error evaluating it never blocks a write.
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
      {{- range $group := keys $byGroup | sortAlpha }}
      - apiGroups: [{{ $group | quote }}]
        apiVersions: ["*"]
        resources: {{ get $byGroup $group | toJson }}
        operations: ["CREATE", "UPDATE"]
      {{- end }}
    # Mirrors carry the agents' keys and no enabled label by design.
    objectSelector:
      matchExpressions:
        - key: fleetmirror.io/mirror
          operator: NotIn
          values: ["true"]
  matchConditions:
    # The agents write status annotations on sources; a Deny must not stop them.
    - name: not-written-by-fleetmirror
      expression: |-
        !(request.userInfo.username in {{ include "fleetmirror.writers" . }})
    - name: has-fleetmirror-annotations
      expression: |-
        has(object.metadata.annotations) &&
        object.metadata.annotations.exists(k, k.startsWith('fleetmirror.io/'))
  variables:
    - name: annotations
      expression: object.metadata.annotations
    - name: keys
      expression: variables.annotations.filter(k, k.startsWith('fleetmirror.io/'))
    - name: sourceKeys
      expression: {{ include "fleetmirror.celList" (include "fleetmirror.sourceAnnotations" . | fromJsonArray) | quote }}
    - name: unknown
      expression: |-
        variables.keys.filter(k, !(k in variables.sourceKeys) && !(k in {{ include "fleetmirror.celList" (include "fleetmirror.agentAnnotations" . | fromJsonArray) }}))
    - name: enabled
      expression: |-
        has(object.metadata.labels) && 'fleetmirror.io/enabled' in object.metadata.labels &&
        object.metadata.labels['fleetmirror.io/enabled'] == 'true'
    - name: targets
      expression: |-
        'fleetmirror.io/target-namespaces' in variables.annotations ?
          variables.annotations['fleetmirror.io/target-namespaces'].split(',').map(e, e.trim()).filter(e, e != '') :
          []
    # Entries as pkg/annotations parses them: a namespace (DNS-1123 label),
    # a glob, all, all-labeled, or CLUSTER/NAMESPACE with a DNS-1123
    # subdomain or glob as CLUSTER; misspelled keywords are refused.
    - name: badTargets
      expression: |-
        variables.targets.filter(e,
          !(e.matches('^{{ $ns }}$') && e.size() <= 63 && !(e in {{ $misspelled }})) &&
          !(e.matches('^{{ $cluster }}/{{ $ns }}$') &&
            e.split('/')[0].size() <= 253 && e.split('/')[1].size() <= 63 &&
            !(e.split('/')[1] in {{ $misspelled }})))
    # Entries of fleetmirror.io/adopt as pkg/peers.ParseAdopt reads them.
    - name: badAdopt
      expression: |-
        ('fleetmirror.io/adopt' in variables.annotations ?
          variables.annotations['fleetmirror.io/adopt'].split(',').map(e, e.trim()).filter(e, e != '') :
          []
        ).filter(e, !(e in {{ $tools }}))
    # Pull mirrors: the label fleetmirror.io/pull and a fleetmirror.io/mirror-from
    # as pkg/annotations.ParseMirrorFrom reads it: NAMESPACE/NAME (a DNS-1123
    # label and subdomain) or CLUSTER/NAMESPACE/NAME (CLUSTER a subdomain).
    - name: pull
      expression: |-
        has(object.metadata.labels) && 'fleetmirror.io/pull' in object.metadata.labels &&
        object.metadata.labels['fleetmirror.io/pull'] == 'true'
    - name: mirrorFrom
      expression: |-
        'fleetmirror.io/mirror-from' in variables.annotations ? variables.annotations['fleetmirror.io/mirror-from'].trim() : ''
    - name: badMirrorFrom
      expression: |-
        'fleetmirror.io/mirror-from' in variables.annotations &&
        !(variables.mirrorFrom.matches('^({{ $subdomain }}/)?{{ $label }}/{{ $subdomain }}$') &&
          (variables.mirrorFrom.split('/').size() == 2 ?
            variables.mirrorFrom.split('/')[0].size() <= 63 && variables.mirrorFrom.split('/')[1].size() <= 253 :
            variables.mirrorFrom.split('/')[0].size() <= 253 && variables.mirrorFrom.split('/')[1].size() <= 63 &&
            variables.mirrorFrom.split('/')[2].size() <= 253))
    # Entries of allow-pull-into as pkg/annotations.ParseAllowPullInto reads
    # them: those of target-namespaces without the keywords.
    - name: pullInto
      expression: |-
        'fleetmirror.io/allow-pull-into' in variables.annotations ?
          variables.annotations['fleetmirror.io/allow-pull-into'].split(',').map(e, e.trim()).filter(e, e != '') :
          []
    - name: badPullInto
      expression: |-
        variables.pullInto.filter(e,
          !(e.matches('^{{ $ns }}$') && e.size() <= 63 && !(e in {{ $notPullInto }})) &&
          !(e.matches('^{{ $cluster }}/{{ $ns }}$') &&
            e.split('/')[0].size() <= 253 && e.split('/')[1].size() <= 63 &&
            !(e.split('/')[1] in {{ $notPullInto }})))
  validations:
    - expression: |-
        variables.enabled || variables.keys.all(k, k in {{ $pullKeys }})
      message: >-
        fleetmirror ignores this object: it has fleetmirror.io/ annotations but
        not the label fleetmirror.io/enabled: "true". Add the label to mirror it
        (kubectl label <kind> <name> fleetmirror.io/enabled=true), or remove the
        annotations.
    - expression: variables.unknown.size() == 0
      message: >-
        An annotation under fleetmirror.io/ is not one fleetmirror reads, so it
        has no effect: fix its spelling (docs/annotations.md lists the keys).
      messageExpression: |-
        'fleetmirror does not know the annotation ' + variables.unknown.join(', ') +
        ', so it has no effect: fix the spelling; on sources fleetmirror reads ' +
        variables.sourceKeys.join(', ') +
        ('fleetmirror.io/enabled' in variables.unknown ? ' (fleetmirror.io/enabled is a label, not an annotation)' : '')
    - expression: |-
        !('fleetmirror.io/sync' in variables.annotations) ||
        variables.annotations['fleetmirror.io/sync'] in ['true', 'false']
      message: >-
        fleetmirror.io/sync must be "true" (mirror) or "false" (stop); any other
        value turns mirroring off.
      messageExpression: |-
        'fleetmirror.io/sync is ' +
        (variables.annotations['fleetmirror.io/sync'].matches('\\p{Cc}') ? 'a value with control characters' : '"' + variables.annotations['fleetmirror.io/sync'] + '"') +
        ', which turns mirroring off: write "true" to mirror or "false" to stop'
    - expression: |-
        !('fleetmirror.io/target-namespaces' in variables.annotations) ||
        variables.annotations['fleetmirror.io/target-namespaces'].size() <= 16384
      message: >-
        fleetmirror.io/target-namespaces is longer than 16384 bytes, so the agent
        ignores all of it: list fewer entries, or match namespaces with a glob,
        all or all-labeled.
    - expression: variables.badTargets.size() == 0
      message: >-
        fleetmirror.io/target-namespaces has entries the agent skips: write each
        comma-separated entry as a namespace name, a glob of a-z, 0-9, "-", ".",
        "*" and "?", all, all-labeled, or CLUSTER/NAMESPACE.
      messageExpression: |-
        'fleetmirror.io/target-namespaces: the agent skips the invalid entries ' +
        variables.badTargets.map(e, e.matches('\\p{Cc}') ? 'with control characters' : '"' + e + '"').join(', ') +
        '; write each comma-separated entry as a namespace name (a lowercase DNS label), a glob of a-z, 0-9, "-", ".", "*" and "?", all, all-labeled, or CLUSTER/NAMESPACE'
    - expression: variables.badAdopt.size() == 0
      message: >-
        fleetmirror.io/adopt has entries the agent ignores: write a
        comma-separated list of reflector, replicator, kubemirror, kyverno and fleetmirror.
      messageExpression: |-
        'fleetmirror.io/adopt: the agent ignores ' +
        variables.badAdopt.map(e, e.matches('\\p{Cc}') ? 'an entry with control characters' : '"' + e + '"').join(', ') +
        ', which are not tools; write a comma-separated list of reflector, replicator, kubemirror, kyverno and fleetmirror'
    - expression: |-
        !('fleetmirror.io/mirror-from' in variables.annotations) || variables.pull
      message: >-
        fleetmirror ignores fleetmirror.io/mirror-from without the label
        fleetmirror.io/pull: "true". Add the label to receive the source's
        content (kubectl label <kind> <name> fleetmirror.io/pull=true), or
        remove the annotation.
    - expression: "!variables.badMirrorFrom"
      message: >-
        fleetmirror.io/mirror-from must name the source as NAMESPACE/NAME, or
        CLUSTER/NAMESPACE/NAME through the hub, each a lowercase DNS name.
      messageExpression: |-
        'fleetmirror.io/mirror-from is ' +
        (variables.mirrorFrom.matches('\\p{Cc}') ? 'a value with control characters' : '"' + variables.mirrorFrom + '"') +
        ', which names no source: write NAMESPACE/NAME, or CLUSTER/NAMESPACE/NAME through the hub, each a lowercase DNS name'
    - expression: "!(variables.enabled && variables.pull)"
      message: >-
        An object labelled both fleetmirror.io/enabled and fleetmirror.io/pull
        is refused as a pull mirror: a source is never written by a pull.
        Remove one of the labels.
    - expression: |-
        !('fleetmirror.io/allow-pull-into' in variables.annotations) ||
        variables.annotations['fleetmirror.io/allow-pull-into'].size() <= 16384
      message: >-
        fleetmirror.io/allow-pull-into is longer than 16384 bytes, so the agent
        allows no pull at all: list fewer entries, or match namespaces with a glob.
    - expression: variables.badPullInto.size() == 0
      message: >-
        fleetmirror.io/allow-pull-into has entries the agent skips: write each
        comma-separated entry as a namespace name, a glob of a-z, 0-9, "-", ".",
        "*" and "?", or CLUSTER/NAMESPACE.
      messageExpression: |-
        'fleetmirror.io/allow-pull-into: the agent skips the invalid entries ' +
        variables.badPullInto.map(e, e.matches('\\p{Cc}') ? 'with control characters' : '"' + e + '"').join(', ') +
        '; write each comma-separated entry as a namespace name (a lowercase DNS label), a glob of a-z, 0-9, "-", ".", "*" and "?" ("*" for every namespace), or CLUSTER/NAMESPACE'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "fleetmirror.labels" . | nindent 4 }}
spec:
  policyName: {{ $name }}
  validationActions: [{{ .Values.admissionWarnings.action }}]
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
{{- /* Absent from a release installed before it (helm upgrade --reuse-values): its default; 0 is a value. */}}
{{- $args = append $args (printf "--cluster-max-in-flight=%d" (int (hasKey $c "clusterMaxInFlight" | ternary $c.clusterMaxInFlight 64))) }}
{{- /* Absent from a release installed before it (helm upgrade --reuse-values): the chart's default. */}}
{{- $args = append $args (printf "--max-procs=%d" (int (hasKey $c "maxProcs" | ternary $c.maxProcs (include "fleetmirror.maxProcs" .)))) }}
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

{{/*
What the hub needs of the MirrorPolicies of a cluster it serves (its own,
through its ServiceAccount; a member, through the hub-access identity):
read them, and apply its own part of their status. It never sets their
finalizer, creates or deletes one. A YAML list.
*/}}
{{- define "fleetmirror.hubPolicyRules" -}}
- apiGroups: ["fleetmirror.io"]
  resources: ["mirrorpolicies"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["fleetmirror.io"]
  resources: ["mirrorpolicies/status"]
  verbs: ["patch"]
{{- end }}
