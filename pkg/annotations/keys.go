package annotations

// Prefix starts every label and annotation key fleetmirror reads or writes.
// Keys under it are control keys: they are never copied onto a mirror.
const Prefix = "fleetmirror.io/"

// Labels and annotations on a source object.
const (
	// LabelEnabled must be "true" on every source. Watches of sources select
	// on it server side, so unlabelled objects are never listed or cached.
	LabelEnabled = Prefix + "enabled"
	// AnnotationSync turns mirroring on ("true") or off (anything else).
	AnnotationSync = Prefix + "sync"
	// AnnotationTargetNamespaces lists the targets, comma separated.
	AnnotationTargetNamespaces = Prefix + "target-namespaces"
	// AnnotationMaxTargets lowers the agent's --max-targets for one source.
	AnnotationMaxTargets = Prefix + "max-targets"
	// AnnotationTargetClusterSelector is a label selector over registered
	// clusters that limits where qualified (CLUSTER/NS) entries reach.
	AnnotationTargetClusterSelector = Prefix + "target-cluster-selector"
	// AnnotationTargetNamespaceSelector is a label selector over namespace
	// labels; the namespaces it selects are targets too, under the same
	// consent rules as AnnotationTargetNamespaces entries.
	AnnotationTargetNamespaceSelector = Prefix + "target-namespace-selector"
	// AnnotationAllowPullInto lists the namespace patterns (CLUSTER/NS
	// patterns through the hub) whose pull mirrors may copy this source.
	AnnotationAllowPullInto = Prefix + "allow-pull-into"
	// AnnotationAdopt lists the tools (reflector, replicator, kubemirror,
	// kyverno, and fleetmirror for copies it released itself) whose proven
	// copies of this source are adopted as mirrors.
	AnnotationAdopt = Prefix + "adopt"
	// AnnotationTransform holds YAML rules that change each mirror.
	AnnotationTransform = Prefix + "transform"
	// AnnotationTransformStrict "true" skips a target whose rules fail.
	AnnotationTransformStrict = Prefix + "transform-strict"
	// AnnotationStatus is written by the agent: a one-line summary for people.
	AnnotationStatus = Prefix + "status"
	// AnnotationExcludeNamespaces lists namespaces (names or globs, comma
	// separated) that are never targets of this source, whatever entry or
	// selector matches them.
	AnnotationExcludeNamespaces = Prefix + "exclude-namespaces"
	// AnnotationTargetName names the mirrors; by default they have the
	// source's name.
	AnnotationTargetName = Prefix + "target-name"
	// AnnotationCopyOnce "true" makes each mirror once and then leaves it
	// to its namespace (spec.copyOnce of a MirrorPolicy).
	AnnotationCopyOnce = Prefix + "copy-once"
	// AnnotationDeletionPolicy "Orphan" keeps the mirrors, made plain
	// objects, when the source stops asking for them while it still
	// exists (spec.deletionPolicy of a MirrorPolicy). On a mirror it is
	// stamped with the source's choice, so that the choice is known
	// after the policy that made it is gone.
	AnnotationDeletionPolicy = Prefix + "deletion-policy"
	// AnnotationKeepAdditions "true" lets the mirrors keep what other
	// writers add to them (keys, labels, fields the source does not set);
	// what the source sets is still corrected (spec.keepAdditions of a
	// MirrorPolicy). On a mirror it is stamped with the source's choice.
	AnnotationKeepAdditions = Prefix + "keep-additions"
	// AnnotationCopied is written by the agent on a copy-once source: the
	// targets it made a copy in (NAMESPACE, or CLUSTER/NAMESPACE for the
	// hub), so that a copy deleted there is not made again.
	AnnotationCopied = Prefix + "copied"
)

// Values of AnnotationDeletionPolicy.
const (
	DeletionPolicyDelete = "Delete"
	DeletionPolicyOrphan = "Orphan"
)

// Labels and annotations on a pull mirror: an object its namespace's owner
// created, which asks for the content of a source.
const (
	// LabelPull must be "true" on every pull mirror. Watches of pull mirrors
	// select on it server side, like sources on LabelEnabled.
	LabelPull = Prefix + "pull"
	// AnnotationMirrorFrom names the source: NS/NAME, or CLUSTER/NS/NAME
	// through the hub.
	AnnotationMirrorFrom = Prefix + "mirror-from"
)

// Labels on a namespace.
const (
	// LabelAllowMirrors "true" opts a namespace in to all-labeled; "false"
	// opts it out of every target entry, all included.
	LabelAllowMirrors = Prefix + "allow-mirrors"
)

// Labels and annotations the agent stamps on every mirror.
const (
	// LabelMirror marks a mirror; watches of mirrors select on it.
	LabelMirror = Prefix + "mirror"
	// LabelManagedBy names the writer of a mirror: ManagedByMember or ManagedByHub.
	LabelManagedBy = Prefix + "managed-by"
	// AnnotationSource is the source reference: cluster/namespace/name.
	AnnotationSource = Prefix + "source"
	// AnnotationSourceUID is the UID of the source the mirror was built from.
	AnnotationSourceUID = Prefix + "source-uid"
	// AnnotationSourceResourceVersion is the source's resourceVersion when the
	// mirror's content was last written; it guards against writing stale content.
	AnnotationSourceResourceVersion = Prefix + "source-resource-version"
	// AnnotationContentHash is the hash of everything propagated to the mirror.
	AnnotationContentHash = Prefix + "content-hash"
)

// Annotations the agent leaves on a synchronized mirror it releases as a
// plain object (deletion policy Orphan). They claim nothing: they record
// where the copy came from, so that a later claim of the same source that
// lists fleetmirror in AnnotationAdopt may take it back.
const (
	// AnnotationReleasedFrom is the source reference the object was a
	// mirror of: cluster/namespace/name.
	AnnotationReleasedFrom = Prefix + "released-from"
	// AnnotationReleasedFromUID is that source's UID.
	AnnotationReleasedFromUID = Prefix + "released-from-uid"
)

// Values of LabelManagedBy.
const (
	ManagedByMember = "member"
	ManagedByHub    = "hub"
)

// Labels on kubeconfig Secrets that register a cluster with the hub.
const (
	// LabelClusterName registers a plain kubeconfig Secret (data key "value").
	// Cluster API's own label, cluster.x-k8s.io/cluster-name, works too.
	LabelClusterName = Prefix + "cluster-name"
	// LabelReceiveOnly "true" declares a registered cluster that only
	// receives: the hub looks for no sources, pull mirrors or
	// MirrorPolicies there and watches only its own mirrors, which spares
	// the idle watches per kind a cluster without a member agent costs.
	LabelReceiveOnly = Prefix + "receive-only"
)

// Target keywords in AnnotationTargetNamespaces.
const (
	KeywordAll        = "all"
	KeywordAllLabeled = "all-labeled"
)
