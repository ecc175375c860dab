package controller

// Event reasons on source objects.
const (
	// ReasonMirrorsSynced: mirrors were created, updated or deleted.
	ReasonMirrorsSynced = "MirrorsSynced"
	// ReasonMirrorsRemoved: mirroring was turned off or the source deleted.
	ReasonMirrorsRemoved = "MirrorsRemoved"
	// ReasonTargetConflict: a target name is taken by an object we do not own.
	ReasonTargetConflict = "TargetConflict"
	// ReasonInvalidAnnotation: part of the fleetmirror annotations is invalid.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonTargetsOverLimit: more targets matched than max-targets allows.
	ReasonTargetsOverLimit = "TargetsOverLimit"
	// ReasonNamespaceRefused: a named target namespace is excluded or opted out.
	ReasonNamespaceRefused = "NamespaceRefused"
	// ReasonNamespaceMissing: a named target namespace does not exist (yet).
	ReasonNamespaceMissing = "NamespaceMissing"
	// ReasonSourceRefused: the object may never be a source.
	ReasonSourceRefused = "SourceRefused"
	// ReasonSyncFailed: writing some mirrors failed; they are retried.
	ReasonSyncFailed = "SyncFailed"
	// ReasonAdopted: objects in the way, proven copies of the source made
	// by another tool (fleetmirror.io/adopt), became its mirrors.
	ReasonAdopted = "Adopted"
)

// ReasonClusterUnreachable says a target cluster cannot be reached; its
// mirrors are written or removed when it is back.
const ReasonClusterUnreachable = "ClusterUnreachable"

// ReasonNotInShard says target clusters are served by another replica of
// a sharded hub, which does not read the source's cluster: a source in a
// member cluster reaches only the clusters of its own shard.
const ReasonNotInShard = "ClusterNotInShard"

// Event reasons of transform rules.
const (
	// ReasonInvalidTransform says the transform annotation does not parse;
	// nothing is written or removed until it is fixed.
	ReasonInvalidTransform = "InvalidTransform"
	// ReasonTransformFailed says rules failed for some targets.
	ReasonTransformFailed = "TransformFailed"
)
