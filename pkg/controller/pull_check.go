package controller

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// The checks of a pull mirror, pure so that the kubectl plugin decides as
// the agents do. The reconciler (pull.go) gathers their inputs from its
// caches; the plugin from the API server.

// PullState is what the agent finds at a pull mirror.
type PullState string

// States of a pull mirror; the first word of its status annotation.
const (
	// PullInSync: the pull mirror holds its source's content.
	PullInSync PullState = "InSync"
	// PullOutOfSync: the pull mirror may receive its source's content and
	// does not hold it yet; the agent writes it.
	PullOutOfSync PullState = "OutOfSync"
	// PullRefused: the agent never writes the pull mirror as it is set up.
	PullRefused PullState = "Refused"
	// PullNotAllowed: the source does not allow pulls into the pull
	// mirror's namespace.
	PullNotAllowed PullState = "NotAllowed"
	// PullSourceMissing: the source does not exist, is being deleted or is
	// not a source.
	PullSourceMissing PullState = "SourceMissing"
	// PullUnreachable: the hub cannot reach the source's cluster.
	PullUnreachable PullState = "Unreachable"
	// PullConflict: fields of the content are managed by others.
	PullConflict PullState = "Conflict"
	// PullFailed: the last write failed; it is retried.
	PullFailed PullState = "Failed"
)

// PullStates lists every state, for metrics.
var PullStates = []PullState{PullInSync, PullOutOfSync, PullRefused, PullNotAllowed, PullSourceMissing, PullUnreachable, PullConflict, PullFailed}

// PullVerdict is what the agent does with one pull mirror, and why.
type PullVerdict struct {
	State PullState
	// Reason is the Event reason of the state (ReasonPull*), "" for
	// PullInSync and PullOutOfSync.
	Reason string
	// Message says why, for the pull mirror's owner.
	Message string
	// Content is what the pull mirror receives and Hash its hash, for
	// PullInSync and PullOutOfSync.
	Content map[string]any
	Hash    string
}

// PullMirror is a pull mirror, as the writer that serves it sees it.
type PullMirror struct {
	// Cluster is the pull mirror's cluster.
	Cluster string
	// Object is the pull mirror.
	Object *unstructured.Unstructured
	// Ref and RefErr are its AnnotationMirrorFrom, parsed.
	Ref    annotations.MirrorFrom
	RefErr error
	// NamespaceRefusal says why the writer's policy or the namespace keeps
	// content out of the pull mirror's namespace; "" when it lets it in.
	NamespaceRefusal string
	// SourceRefusal says why the writer's policy keeps the source from
	// being copied at all (the hub's allowed source clusters and
	// namespaces); "" when it does not.
	SourceRefusal string
}

// ParsePullMirror reads the AnnotationMirrorFrom of a pull mirror.
func ParsePullMirror(obj *unstructured.Unstructured) (annotations.MirrorFrom, error) {
	v, ok := obj.GetAnnotations()[annotations.AnnotationMirrorFrom]
	if !ok {
		return annotations.MirrorFrom{}, fmt.Errorf("the label %s=true asks for a source's content, but %s does not name one; %w",
			annotations.LabelPull, annotations.AnnotationMirrorFrom, annotations.ErrMirrorFromForm)
	}
	return annotations.ParseMirrorFrom(v)
}

// Serves reports whether the writer of scope remote serves a pull mirror
// whose mirror-from parsed as ref: the member agent serves NS/NAME (and
// reports values of no form at all), the hub CLUSTER/NS/NAME.
func Serves(remote bool, ref annotations.MirrorFrom) bool { return ref.Remote() == remote }

// CheckPullMirror checks what concerns the pull mirror alone, before its
// source is looked up: nil when nothing stops it.
func CheckPullMirror(p PullMirror) *PullVerdict {
	labels := p.Object.GetLabels()
	refuse := func(format string, args ...any) *PullVerdict {
		return &PullVerdict{State: PullRefused, Reason: ReasonPullRefused, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case labels[annotations.LabelEnabled] == "true":
		return refuse("it is itself a source (label %s=true), and a source is never written by a pull; remove one of the labels %s and %s",
			annotations.LabelEnabled, annotations.LabelEnabled, annotations.LabelPull)
	case desired.IsMirror(labels):
		return refuse("it is a mirror written by fleetmirror (label %s=true), never a pull mirror; create a pull mirror of another name",
			annotations.LabelMirror)
	case p.RefErr != nil:
		return &PullVerdict{State: PullRefused, Reason: ReasonInvalidAnnotation, Message: p.RefErr.Error()}
	case !p.Ref.Remote() && p.Ref.Namespace == p.Object.GetNamespace() && p.Ref.Name == p.Object.GetName():
		return refuse("%s names the object itself", annotations.AnnotationMirrorFrom)
	case p.Ref.Remote() && p.Ref.Cluster == p.Cluster:
		return refuse("%s names the pull mirror's own cluster %s; write %s/%s, which the member agent serves",
			annotations.AnnotationMirrorFrom, p.Cluster, p.Ref.Namespace, p.Ref.Name)
	case p.SourceRefusal != "":
		return refuse("%s", p.SourceRefusal)
	case p.NamespaceRefusal != "":
		return refuse("%s", p.NamespaceRefusal)
	}
	return nil
}

// PullSource is a pull mirror and its source, found.
type PullSource struct {
	GVK    schema.GroupVersionKind
	Mirror PullMirror
	// Source is the source object.
	Source *unstructured.Unstructured
}

// CheckPullSource decides what the pull mirror gets from its source, once
// CheckPullMirror let it through and the source was found: the source's
// consent first, then what the kind allows, then whether the pull mirror
// holds the content already.
func CheckPullSource(p PullSource) PullVerdict {
	src, dst, ref := p.Source, p.Mirror.Object, p.Mirror.Ref
	refuse := func(format string, args ...any) PullVerdict {
		return PullVerdict{State: PullRefused, Reason: ReasonPullRefused, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case desired.IsMirror(src.GetLabels()):
		return SourceIsMirror(ref, src.GetAnnotations()[annotations.AnnotationSource])
	case src.GetLabels()[annotations.LabelPull] == "true":
		return refuse("the source %s is itself a pull mirror (label %s=true); name its source in %s", ref, annotations.LabelPull, annotations.AnnotationMirrorFrom)
	case desired.Refusal(p.GVK, src) != "":
		return refuse("the source %s is never mirrored: %s", ref, desired.Refusal(p.GVK, src))
	case src.GetDeletionTimestamp() != nil:
		return PullVerdict{State: PullSourceMissing, Reason: ReasonPullSourceMissing, Message: fmt.Sprintf("the source %s is being deleted", ref)}
	}
	if v := consent(src, ref, p.Mirror.Cluster, dst.GetNamespace()); v != nil {
		return *v
	}
	if why := desired.PullRefusal(p.GVK, dst, src); why != "" {
		return refuse("it cannot receive the content of %s: %s", ref, why)
	}
	content := desired.PullContent(src)
	hash := desired.PullHash(content)
	v := PullVerdict{State: PullOutOfSync, Content: content, Hash: hash, Message: fmt.Sprintf("the content of %s is to be written", ref)}
	if apply.PullInSync(dst, content, hash) {
		v.State, v.Message = PullInSync, fmt.Sprintf("it holds the content of %s", ref)
	}
	return v
}

// consent checks the source's AnnotationAllowPullInto for a pull mirror in
// namespace ns of cluster: nil when it allows the pull.
func consent(src *unstructured.Unstructured, ref annotations.MirrorFrom, cluster, ns string) *PullVerdict {
	value, ok := src.GetAnnotations()[annotations.AnnotationAllowPullInto]
	notAllowed := func(format string, args ...any) *PullVerdict {
		return &PullVerdict{State: PullNotAllowed, Reason: ReasonPullNotAllowed, Message: fmt.Sprintf(format, args...)}
	}
	if !ok {
		return notAllowed("the source %s allows no pulls: it has no %s annotation", ref, annotations.AnnotationAllowPullInto)
	}
	c := annotations.ParseAllowPullInto(value)
	allowed, into := c.AllowsLocal(ns), ns
	if ref.Remote() {
		allowed, into = c.AllowsRemote(cluster, ns), cluster+"/"+ns
	}
	if allowed {
		return nil
	}
	v := notAllowed("the source %s does not allow pulls into %s (%s: %q)", ref, into, annotations.AnnotationAllowPullInto, value)
	if len(c.Problems) > 0 {
		v.Message += "; it has invalid entries: " + joinLimited(c.Problems)
	}
	return v
}

// PullNamespaceRefusal says why a writer with policy never writes content
// into namespace ns (labelled labels) of cluster, or "": the operator's
// policy, the cluster's own exclusions (the hub's registration namespace,
// excluded because), and the namespace's opt-out label. They bind pull
// mirrors as they bind mirrors: a namespace kept free of mirrored content
// stays free of it, whoever asks.
func PullNamespaceRefusal(policy targets.Policy, excluded glob.List, because, cluster, ns string, labels map[string]string) string {
	switch {
	case !policy.Allows(ns):
		return fmt.Sprintf("its namespace %s is excluded by the agent's policy (--excluded-namespaces, --included-namespaces)", ns)
	case excluded.Match(ns):
		return fmt.Sprintf("the hub never writes into its namespace %s of cluster %s: %s", ns, cluster, because)
	case labels[annotations.LabelAllowMirrors] == "false":
		return fmt.Sprintf("its namespace %s is labelled %s=false", ns, annotations.LabelAllowMirrors)
	}
	return ""
}

// PullSourceRefusal says why the hub, allowing sources of clusters and
// namespaces only (empty: all), never copies the source ref to other
// clusters, or "".
func PullSourceRefusal(clusters, namespaces glob.List, ref annotations.MirrorFrom) string {
	if len(clusters) > 0 && !clusters.Match(ref.Cluster) || len(namespaces) > 0 && !namespaces.Match(ref.Namespace) {
		return fmt.Sprintf("the hub does not copy sources of cluster %s, namespace %s to other clusters (--allowed-source-clusters, --allowed-source-namespaces)",
			ref.Cluster, ref.Namespace)
	}
	return ""
}

// CheckFoundSource is the verdict on what the API server holds under the
// name of the source ref, when no cache had it as a source: nil when obj
// is a source after all (a cache that lags), else why the pull mirror
// gets nothing. obj is nil when nothing has that name.
func CheckFoundSource(ref annotations.MirrorFrom, obj metav1.Object) *PullVerdict {
	var v PullVerdict
	switch {
	case obj == nil:
		v = SourceMissing(fmt.Sprintf("the source %s does not exist", ref))
	case desired.IsMirror(obj.GetLabels()):
		v = SourceIsMirror(ref, obj.GetAnnotations()[annotations.AnnotationSource])
	case obj.GetLabels()[annotations.LabelEnabled] != "true":
		v = SourceMissing(fmt.Sprintf("%s is not a source: it has no label %s=true", ref, annotations.LabelEnabled))
	case obj.GetDeletionTimestamp() != nil:
		v = SourceMissing(fmt.Sprintf("the source %s is being deleted", ref))
	default:
		return nil
	}
	return &v
}

// SourceIsMirror is the verdict on a pull mirror whose source ref is itself
// a mirror of the source named by origin (its AnnotationSource value).
func SourceIsMirror(ref annotations.MirrorFrom, origin string) PullVerdict {
	return PullVerdict{State: PullRefused, Reason: ReasonPullRefused, Message: fmt.Sprintf("the source %s is itself a mirror (of %s); name that source in %s",
		ref, orUnknown(origin), annotations.AnnotationMirrorFrom)}
}

// SourceMissing is the verdict on a pull mirror whose source was not
// found; why says what was found instead.
func SourceMissing(why string) PullVerdict {
	return PullVerdict{State: PullSourceMissing, Reason: ReasonPullSourceMissing, Message: why}
}

// WriteVerdict is the verdict after a write of v's content failed with err.
func WriteVerdict(v PullVerdict, err error) PullVerdict {
	var ce *apply.PullConflictError
	if errors.As(err, &ce) {
		return PullVerdict{State: PullConflict, Reason: ReasonPullConflict,
			Message: fmt.Sprintf("%s; they are not taken over: remove them from the manifests of whoever manages them, or remove the label %s", ce.Error(), annotations.LabelPull)}
	}
	return PullVerdict{State: PullFailed, Reason: ReasonPullFailed, Message: fmt.Sprintf("writing the content failed, will retry: %v", err)}
}

// PullStatus is the status annotation of a pull mirror: the state, why,
// and for the states that write nothing whether the pull mirror keeps
// content pulled before. kept says it holds content the agent wrote.
func PullStatus(v PullVerdict, ref annotations.MirrorFrom, kept bool) string {
	switch v.State {
	case PullInSync, PullOutOfSync:
		return fmt.Sprintf("%s: pulled from %s", v.State, ref)
	}
	line := string(v.State) + ": " + v.Message
	if kept {
		return line + "; the content pulled last is kept"
	}
	return line + "; nothing pulled yet"
}

// holdsPulled reports whether obj holds content the agent pulled into it.
func holdsPulled(obj *unstructured.Unstructured) bool {
	_, ok := obj.GetAnnotations()[annotations.AnnotationContentHash]
	return ok
}

func orUnknown(s string) string {
	if strings.TrimSpace(s) == "" {
		return "an unknown source"
	}
	return s
}
