package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MirrorPolicy mirrors objects of its own namespace that cannot carry the
// fleetmirror annotations (another controller owns their metadata). Its
// fields mean exactly what the annotations of the same names mean on an
// annotated source (docs/annotations.md): a policy is another way to ask for
// the same mirrors. Whoever may create a MirrorPolicy in a namespace may
// copy that namespace's objects out of it; a policy cannot name objects of
// another namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mirrorpol,categories=fleetmirror
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.source.kind`
// +kubebuilder:printcolumn:name="Sources",type=integer,JSONPath=`.status.sources`
// +kubebuilder:printcolumn:name="Synced",type=integer,JSONPath=`.status.targetsSynced`
// +kubebuilder:printcolumn:name="Conflicts",type=integer,JSONPath=`.status.conflicts`,priority=1
// +kubebuilder:printcolumn:name="Remote",type=integer,JSONPath=`.status.remoteTargetsSynced`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MirrorPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MirrorPolicySpec `json:"spec"`
	// +optional
	Status MirrorPolicyStatus `json:"status,omitempty"`
}

// MirrorPolicySpec says which objects are mirrored and where.
//
// +kubebuilder:validation:XValidation:rule="!has(self.targetName) || (has(self.source.names) && size(self.source.names) == 1)",message="targetName names the copies of one source: set it only with source.names of one name"
// +kubebuilder:validation:XValidation:rule="!has(self.trigger) || (!has(self.targetClusterSelector) && (!has(self.targetNamespaces) || self.targetNamespaces.all(t, !t.contains('/'))))",message="a trigger narrows the targets of the source's own cluster: not with CLUSTER/NAMESPACE entries or targetClusterSelector"
type MirrorPolicySpec struct {
	// Source names the objects to mirror: of one kind, in the policy's
	// namespace.
	Source PolicySource `json:"source"`

	// TargetNamespaces lists where the mirrors go, one entry each, as
	// fleetmirror.io/target-namespaces does: a namespace, a glob (app-*),
	// all, all-labeled, or CLUSTER/NAMESPACE (either part a glob) through
	// the hub.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[^,\s]+$`
	TargetNamespaces []string `json:"targetNamespaces,omitempty"`

	// TargetNamespaceSelector is a label selector (env=prod,team in
	// (a,b)) over namespace labels, as fleetmirror.io/target-namespace-selector:
	// the namespaces it selects are targets too, under the same consent
	// rules. Empty selects nothing; write targetNamespaces: [all] for
	// every namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	TargetNamespaceSelector *string `json:"targetNamespaceSelector,omitempty"`

	// TargetClusterSelector is a label selector over the hub's registered
	// clusters, as fleetmirror.io/target-cluster-selector: it limits where
	// CLUSTER/NAMESPACE entries reach.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	TargetClusterSelector *string `json:"targetClusterSelector,omitempty"`

	// MaxTargets lowers the agent's --max-targets for each source of the
	// policy, as fleetmirror.io/max-targets.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTargets *int32 `json:"maxTargets,omitempty"`

	// Transform holds the rules that change each mirror, in the YAML of
	// fleetmirror.io/transform.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Transform string `json:"transform,omitempty"`

	// TransformStrict skips a target for which any rule fails, as
	// fleetmirror.io/transform-strict.
	// +optional
	TransformStrict bool `json:"transformStrict,omitempty"`

	// ExcludeNamespaces are never targets, whatever entry or selector
	// matches them, as fleetmirror.io/exclude-namespaces: names or globs
	// (team-*), in every cluster.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9*?]([-a-z0-9*?]*[a-z0-9*?])?$`
	ExcludeNamespaces []string `json:"excludeNamespaces,omitempty"`

	// TargetName names the copies, as fleetmirror.io/target-name: by
	// default a copy has its source's name. Only for a policy of one
	// source (source.names with one name).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	TargetName string `json:"targetName,omitempty"`

	// CopyOnce makes each copy once, as fleetmirror.io/copy-once: in each
	// target the first time it is one, and then leaves it to its
	// namespace: never updated or corrected, not made again once deleted,
	// and kept, as a plain object, when its source or the policy goes.
	// By default (false) a copy follows its source (docs/policies.md).
	// +optional
	CopyOnce bool `json:"copyOnce,omitempty"`

	// DeletionPolicy says what deleting the policy (or a change that
	// stops it naming a source that still exists) does to the copies:
	// Delete (the default) deletes them; Orphan keeps them as plain
	// objects, with fleetmirror's labels and source reference removed so
	// that nothing of ours claims them any more. A deleted source always
	// takes its synchronized copies with it.
	// +optional
	// +kubebuilder:validation:Enum=Delete;Orphan
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// KeepAdditions lets the copies keep what other writers add to them,
	// as fleetmirror.io/keep-additions: a key, label or field the source
	// does not set, written by another field manager, stays; what the
	// source sets is still kept to the source's values, and what the
	// agent wrote and the source no longer has is removed. By default
	// (false) a copy is an exact copy (docs/policies.md).
	// +optional
	KeepAdditions bool `json:"keepAdditions,omitempty"`

	// Adopt lists the tools whose copies of a source the policy takes
	// over as its mirrors where it finds them, as fleetmirror.io/adopt:
	// reflector, replicator, kubemirror, kyverno (a clone a generate rule
	// made), and fleetmirror (a copy a policy or source with deletion
	// policy Orphan released). A copy is taken over only when it carries
	// its tool's own proof that it was made from that very source (UID);
	// anything else in a copy's place stays a TargetConflict.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Enum=reflector;replicator;kubemirror;kyverno;fleetmirror
	Adopt []string `json:"adopt,omitempty"`

	// Trigger narrows the targets to the namespaces that hold an object
	// it selects (Kyverno's generate rules triggered by such an object):
	// a namespace the entries or the selector reach gets its copy once a
	// matching object is there, and loses it (unless copyOnce) once the
	// last one is gone or no longer matches. Only in the source's
	// cluster: not with CLUSTER/NAMESPACE entries or
	// targetClusterSelector.
	// +optional
	Trigger *PolicyTrigger `json:"trigger,omitempty"`
}

// PolicyTrigger selects the objects whose namespaces a policy's copies go
// to: of one namespaced kind, by name, by label, or both (an object must
// match both); neither takes every object of the kind.
type PolicyTrigger struct {
	// APIVersion of the kind: v1, or GROUP/VERSION.
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`

	// Kind of the objects, such as ConfigMap.
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]{0,62}$`
	Kind string `json:"kind"`

	// Names the objects may have.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Names []string `json:"names,omitempty"`

	// Selector selects the objects by label.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// DeletionPolicy is spec.deletionPolicy of a MirrorPolicy.
type DeletionPolicy string

// Values of spec.deletionPolicy.
const (
	DeletionPolicyDelete DeletionPolicy = "Delete"
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// PolicySource names the objects of a policy: by name or by label, never
// both.
//
// +kubebuilder:validation:XValidation:rule="has(self.names) != has(self.selector)",message="set exactly one of names and selector"
type PolicySource struct {
	// APIVersion of the kind: v1, or GROUP/VERSION.
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`

	// Kind of the objects, such as Secret.
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]{0,62}$`
	Kind string `json:"kind"`

	// Names of the objects.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Names []string `json:"names,omitempty"`

	// Selector selects the objects by label. It must select something:
	// an empty selector would take every object of the kind.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="an empty selector would select every object of the kind; name what it selects"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// MirrorPolicyStatus is what the agent last made of the policy.
type MirrorPolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (every source mirrored where asked) and Degraded
	// (something refused or failing; its reason and message say what),
	// written by the member agent; RemoteReady and RemoteDegraded, the
	// same for the targets in other clusters, written by the hub.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Sources counts the objects the policy names that exist.
	// +optional
	Sources int32 `json:"sources,omitempty"`

	// TargetsSynced counts the mirrors that are current.
	// +optional
	TargetsSynced int32 `json:"targetsSynced,omitempty"`

	// Conflicts counts the targets refused because an object that is not
	// our mirror holds the name there, and the sources mirrored by their
	// own annotations or by an older policy instead of this one.
	// +optional
	Conflicts int32 `json:"conflicts,omitempty"`

	// RemoteTargetsSynced counts the mirrors in other clusters (the
	// CLUSTER/NS entries, written by the hub) that are current.
	// +optional
	RemoteTargetsSynced int32 `json:"remoteTargetsSynced,omitempty"`

	// RemoteConflicts is Conflicts for the targets in other clusters.
	// +optional
	RemoteConflicts int32 `json:"remoteConflicts,omitempty"`

	// Copied remembers, for spec.copyOnce, where a copy was made: one
	// entry NAMESPACE/SOURCE per copy the member agent made, and
	// CLUSTER/NAMESPACE/SOURCE per copy the hub made in another
	// cluster. A copy deleted there is not made again; an entry goes when
	// its namespace does.
	// +optional
	// +listType=set
	Copied []string `json:"copied,omitempty"`
}

// MirrorPolicyList is a list of MirrorPolicies.
//
// +kubebuilder:object:root=true
type MirrorPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MirrorPolicy `json:"items"`
}

// Condition types of a MirrorPolicy: Ready and Degraded are the member
// agent's, about the targets in the policy's own cluster; RemoteReady and
// RemoteDegraded the hub's, about the targets in other clusters. Each
// writer applies only its own (server-side apply), so neither overwrites
// the other's.
const (
	ConditionReady          = "Ready"
	ConditionDegraded       = "Degraded"
	ConditionRemoteReady    = "RemoteReady"
	ConditionRemoteDegraded = "RemoteDegraded"
)
