// Package peers knows the other mirroring tools fleetmirror replaces:
// emberstack's kubernetes-reflector, mittwald's kubernetes-replicator and
// kubemirror. It holds their label and annotation keys, translates their
// source annotations into ours (kubectl fleetmirror migrate) and reads
// their proof that an existing object is a copy of a given source
// (adoption). It is pure: no client.
package peers

// Tool names one peer tool. The values are those of the
// fleetmirror.io/adopt annotation.
type Tool string

// The tools.
const (
	Reflector  Tool = "reflector"
	Replicator Tool = "replicator"
	Kubemirror Tool = "kubemirror"
)

// Tools lists every tool, in the order they are documented.
var Tools = []Tool{Reflector, Replicator, Kubemirror}

// Key prefixes of the tools.
const (
	ReflectorPrefix  = "reflector.v1.k8s.emberstack.com/"
	ReplicatorPrefix = "replicator.v1.mittwald.de/"
	KubemirrorPrefix = "kubemirror.raczylo.com/"
)

// kubernetes-reflector's annotations. On sources: the Allowed and Auto
// keys; on copies (and on pull mirrors, where a person writes it): Reflects.
const (
	ReflectorAllowed           = ReflectorPrefix + "reflection-allowed"
	ReflectorAllowedNamespaces = ReflectorPrefix + "reflection-allowed-namespaces"
	ReflectorAutoEnabled       = ReflectorPrefix + "reflection-auto-enabled"
	ReflectorAutoNamespaces    = ReflectorPrefix + "reflection-auto-namespaces"
	// ReflectorReflects is NS/NAME of the source a copy reflects.
	ReflectorReflects = ReflectorPrefix + "reflects"
	// ReflectorAutoReflects marks a copy the reflector created itself.
	ReflectorAutoReflects     = ReflectorPrefix + "auto-reflects"
	ReflectorReflectedVersion = ReflectorPrefix + "reflected-version"
	ReflectorReflectedAt      = ReflectorPrefix + "reflected-at"
)

// kubernetes-replicator's annotations. On sources: ReplicateTo,
// ReplicateToMatching, ReplicationAllowed, ReplicationAllowedNamespaces,
// StripLabels; on pull copies: ReplicateFrom; written on every copy:
// ReplicatedAt, ReplicatedFromVersion (and ReplicatedBy on push copies).
const (
	ReplicatorReplicateFrom                = ReplicatorPrefix + "replicate-from"
	ReplicatorReplicateTo                  = ReplicatorPrefix + "replicate-to"
	ReplicatorReplicateToMatching          = ReplicatorPrefix + "replicate-to-matching"
	ReplicatorReplicationAllowed           = ReplicatorPrefix + "replication-allowed"
	ReplicatorReplicationAllowedNamespaces = ReplicatorPrefix + "replication-allowed-namespaces"
	ReplicatorStripLabels                  = ReplicatorPrefix + "strip-labels"
	ReplicatorStripAnnotations             = ReplicatorPrefix + "strip-annotations"
	ReplicatorReplicateOnce                = ReplicatorPrefix + "replicate-once"
	ReplicatorReplicatedAt                 = ReplicatorPrefix + "replicated-at"
	ReplicatorReplicatedBy                 = ReplicatorPrefix + "replicated-by"
	ReplicatorReplicatedFromVersion        = ReplicatorPrefix + "replicated-from-version"
	ReplicatorReplicatedKeys               = ReplicatorPrefix + "replicated-keys"
)

// kubemirror's labels and annotations: the source side mirrors ours (it is
// where our contract comes from); copies carry the mirror label and the
// source reference annotations.
const (
	KubemirrorEnabled          = KubemirrorPrefix + "enabled" // label
	KubemirrorSync             = KubemirrorPrefix + "sync"
	KubemirrorTargetNamespaces = KubemirrorPrefix + "target-namespaces"
	KubemirrorTransform        = KubemirrorPrefix + "transform"
	KubemirrorTransformStrict  = KubemirrorPrefix + "transform-strict"
	KubemirrorMaxTargets       = KubemirrorPrefix + "max-targets"
	KubemirrorAllowMirrors     = KubemirrorPrefix + "allow-mirrors" // namespace label
	KubemirrorMirror           = KubemirrorPrefix + "mirror"        // label on copies
	KubemirrorSourceNamespace  = KubemirrorPrefix + "source-namespace"
	KubemirrorSourceName       = KubemirrorPrefix + "source-name"
	KubemirrorSourceUID        = KubemirrorPrefix + "source-uid"
)
