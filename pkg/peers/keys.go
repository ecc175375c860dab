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

// kubernetes-reflector's annotations (src/ES.Kubernetes.Reflector/
// Mirroring/Core/Annotations.cs). On sources: the Allowed and Auto keys; on
// copies (and on pull mirrors, where a person writes it): Reflects. The
// namespace lists are comma lists of .NET regular expressions; a
// namespace matches when the first match found covers its whole name. A
// list and its selector are ORed; both empty allow every namespace.
const (
	ReflectorAllowed                   = ReflectorPrefix + "reflection-allowed"
	ReflectorAllowedNamespaces         = ReflectorPrefix + "reflection-allowed-namespaces"
	ReflectorAllowedNamespacesSelector = ReflectorPrefix + "reflection-allowed-namespaces-selector"
	ReflectorAutoEnabled               = ReflectorPrefix + "reflection-auto-enabled"
	ReflectorAutoNamespaces            = ReflectorPrefix + "reflection-auto-namespaces"
	ReflectorAutoNamespacesSelector    = ReflectorPrefix + "reflection-auto-namespaces-selector"
	// ReflectorReflects is NS/NAME of the source a copy reflects.
	ReflectorReflects = ReflectorPrefix + "reflects"
	// ReflectorAutoReflects is "True" on a copy the reflector created
	// itself (reflection-auto-enabled), "False" on one a person created
	// with Reflects (a pull mirror).
	ReflectorAutoReflects     = ReflectorPrefix + "auto-reflects"
	ReflectorReflectedVersion = ReflectorPrefix + "reflected-version"
	ReflectorReflectedAt      = ReflectorPrefix + "reflected-at"
)

// kubernetes-replicator's annotations (replicate/common/consts.go). On
// sources: ReplicateTo, ReplicateToMatching, ReplicationAllowed,
// ReplicationAllowedNamespaces, StripLabels, KeepOwnerReferences; on pull
// copies: ReplicateFrom; written on every copy, push or pull:
// ReplicatedAt, ReplicatedFromVersion and ReplicatedKeys. A push copy
// carries no reference to its source. The namespace lists are comma lists
// of Go regular expressions, each wrapped in ^ and $ unless it already
// starts or ends with them.
//
// StripAnnotations, ReplicateOnce and ReplicatedBy are not mittwald's
// (v2.12 reads none of them): forks of the replicator wrote them.
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
	ReplicatorKeepOwnerReferences          = ReplicatorPrefix + "keep-owner-references"
)

// kubemirror's labels and annotations (pkg/constants/constants.go): the
// source side mirrors ours (it is where our contract comes from); copies
// carry the mirror and managed-by ("kubemirror") labels and the source
// reference annotations. Its target entries are filepath.Match globs. MaxTargets is
// declared but not read by kubemirror: only its --max-targets flag limits.
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
	// KubemirrorFinalizer is the finalizer kubemirror puts on sources.
	KubemirrorFinalizer = KubemirrorPrefix + "finalizer"
)
