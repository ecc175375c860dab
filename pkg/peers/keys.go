// Package peers knows the other mirroring tools fleetmirror replaces:
// emberstack's kubernetes-reflector, mittwald's kubernetes-replicator,
// kubemirror and Kyverno's generate rules. It holds their label and annotation keys, translates their
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
	Kyverno    Tool = "kyverno"
	// Fleetmirror stands for fleetmirror itself: the copies it made of a
	// source and then released as plain objects (deletion policy Orphan),
	// which a claim of the same source may take back.
	Fleetmirror Tool = "fleetmirror"
)

// Tools lists every tool whose copies may be adopted, in the order they
// are documented.
var Tools = []Tool{Reflector, Replicator, Kubemirror, Kyverno, Fleetmirror}

// Annotated lists the tools driven by annotations on their sources, which
// Translate turns into ours. Kyverno's rules are policies of their own
// (kubectl fleetmirror migrate kyverno).
var Annotated = []Tool{Reflector, Replicator, Kubemirror}

// AcrossClusters reports whether tool copies from one cluster into
// another, so that its copies may live in another cluster than their
// source: only fleetmirror's hub does.
func (t Tool) AcrossClusters() bool { return t == Fleetmirror }

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

// Kyverno's labels on the objects a generate rule makes
// (pkg/background/common/constants.go and labels.go, generate/source.go):
// every generated object is labelled managed-by "kyverno" with the policy
// and rule that made it, and a clone with its source's namespace, kind
// and UID (not its name).
const (
	KyvernoManagedByLabel  = "app.kubernetes.io/managed-by"
	KyvernoManagedByValue  = "kyverno"
	KyvernoPolicyName      = "generate.kyverno.io/policy-name"
	KyvernoSourceNamespace = "generate.kyverno.io/source-namespace"
	KyvernoSourceUID       = "generate.kyverno.io/source-uid"
	KyvernoLabelPrefix     = "generate.kyverno.io/"
)
