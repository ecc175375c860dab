package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// PullReport is what status says of a pull mirror (docs/pull.md): the
// source it asks for, which agent serves it, and its state, decided with
// the agents' own checks (controller.CheckPullMirror, CheckPullSource).
type PullReport struct {
	// MirrorFrom is the fleetmirror.io/mirror-from annotation as written.
	MirrorFrom string `json:"mirrorFrom"`
	// ServedBy is "member" for NAMESPACE/NAME, "hub" for
	// CLUSTER/NAMESPACE/NAME; empty when no agent serves it.
	ServedBy string `json:"servedBy,omitempty"`
	// State is the pull mirror's state in the plugin's words; PullState
	// the agent's (the first word of its status annotation).
	State     State  `json:"state"`
	PullState string `json:"pullState"`
	// Reason says why.
	Reason string `json:"reason"`
	// Fix says what to do; empty when nothing needs doing.
	Fix string `json:"fix,omitempty"`
	// HoldsPulled is true when the pull mirror holds content an agent
	// pulled into it before: it keeps it while the pull is stopped.
	HoldsPulled bool `json:"holdsPulled"`
}

// notPullMirror is the PullState of an object with a mirror-from but no
// pull label: no agent reads it.
const notPullMirror = "NotPullMirror"

// isPullMirror reports whether obj asks, or seems to ask, for a source's
// content: labelled fleetmirror.io/pull=true, or annotated mirror-from
// without that label. An object that is also a source is reported as a
// source.
func isPullMirror(obj *unstructured.Unstructured) bool {
	if obj.GetLabels()[annotations.LabelEnabled] == "true" {
		return false
	}
	_, from := obj.GetAnnotations()[annotations.AnnotationMirrorFrom]
	return obj.GetLabels()[annotations.LabelPull] == "true" || from
}

// inspectPull reports on the pull mirror dst as the agent that serves it
// decides: the member agent for NAMESPACE/NAME, the hub (with --hub-context)
// for CLUSTER/NAMESPACE/NAME.
func (c *Client) inspectPull(ctx context.Context, mapping *meta.RESTMapping, dst *unstructured.Unstructured) (*Report, error) {
	gvk := mapping.GroupVersionKind
	r := &Report{Source: Source{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: dst.GetNamespace(), Name: dst.GetName(),
		Entries: []string{}, Status: dst.GetAnnotations()[annotations.AnnotationStatus], Agent: c.Agent.Describe(), Events: []Event{},
		UnknownKeys: append(UnknownKeys(dst.GetLabels()), UnknownKeys(dst.GetAnnotations())...)}, Targets: []Target{}}
	_, holds := dst.GetAnnotations()[annotations.AnnotationContentHash]
	p := &PullReport{MirrorFrom: dst.GetAnnotations()[annotations.AnnotationMirrorFrom], HoldsPulled: holds}
	r.Pull = p
	obj := fmt.Sprintf("%s/%s -n %s", strings.ToLower(gvk.Kind), dst.GetName(), dst.GetNamespace())
	if dst.GetLabels()[annotations.LabelPull] != "true" {
		p.State, p.PullState = Excluded, notPullMirror
		p.Reason = fmt.Sprintf("it has %s but not the label %s=true, so no agent reads it", annotations.AnnotationMirrorFrom, annotations.LabelPull)
		p.Fix = fmt.Sprintf("kubectl label %s %s=true", obj, annotations.LabelPull)
		return r, nil
	}
	v, err := c.pullVerdict(ctx, mapping, dst, p)
	if err != nil {
		return nil, err
	}
	p.PullState = string(v.State)
	p.State, p.Reason = pullRow(v, holds, r.Source.Status)
	p.Fix = pullFix(v, p, obj, gvk.Kind, c.Agent.Options.ClusterName, dst.GetNamespace())
	return r, nil
}

// pullVerdict decides as the agent serving dst does, and records which one
// it is in p.
func (c *Client) pullVerdict(ctx context.Context, mapping *meta.RESTMapping, dst *unstructured.Unstructured, p *PullReport) (controller.PullVerdict, error) {
	gvk := mapping.GroupVersionKind
	cluster := c.Agent.Options.ClusterName
	m := controller.PullMirror{Cluster: cluster, Object: dst}
	m.Ref, m.RefErr = controller.ParsePullMirror(dst)
	remote := m.Ref.Remote()
	p.ServedBy = map[bool]string{false: "member", true: "hub"}[remote]
	if ok, why := c.Agent.Watches(gvk); !ok {
		return controller.PullVerdict{State: controller.PullRefused, Message: fmt.Sprintf("the member agent does not watch %s: %s", gvk.Kind, why)}, nil
	}
	policy := c.Agent.Policy()
	var excluded glob.List
	var because string
	if remote {
		if c.Hub == nil {
			return controller.PullVerdict{State: controller.PullState(firstWord(dst.GetAnnotations()[annotations.AnnotationStatus])),
				Message: "the hub serves it; give --hub-context to have it checked here"}, nil
		}
		ho := c.Hub.Options
		policy = targets.Policy{Included: ho.IncludedNamespaces, Excluded: ho.ExcludedNamespaces}
		if rc := c.Hub.cluster(cluster); rc != nil {
			excluded, because = rc.Excluded, rc.ExcludedBecause
		}
		if m.RefErr == nil {
			m.SourceRefusal = controller.PullSourceRefusal(ho.AllowedSourceClusters, ho.AllowedSourceNamespaces, m.Ref)
		}
	}
	ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, dst.GetNamespace(), metav1.GetOptions{})
	if err != nil {
		return controller.PullVerdict{}, err
	}
	m.NamespaceRefusal = controller.PullNamespaceRefusal(policy, excluded, because, cluster, ns.Name, ns.Labels)
	if v := controller.CheckPullMirror(m); v != nil {
		return *v, nil
	}
	dyn, res, v := c.pullSourceClient(m.Ref, mapping)
	if v != nil {
		return *v, nil
	}
	src, err := dyn.Resource(res).Namespace(m.Ref.Namespace).Get(ctx, m.Ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return *controller.CheckFoundSource(m.Ref, nil), nil
	case err != nil && remote:
		return controller.PullVerdict{State: controller.PullUnreachable, Message: fmt.Sprintf("reading the source %s failed: %v", m.Ref, err)}, nil
	case err != nil:
		return controller.PullVerdict{}, err
	}
	if v := controller.CheckFoundSource(m.Ref, src); v != nil {
		return *v, nil
	}
	return controller.CheckPullSource(controller.PullSource{GVK: gvk, Mirror: m, Source: src}), nil
}

// pullSourceClient returns the client and resource of the source ref: in
// this cluster, or in the hub's cluster it names; or the verdict on a
// cluster the hub does not know or cannot read.
func (c *Client) pullSourceClient(ref annotations.MirrorFrom, mapping *meta.RESTMapping) (dynamic.Interface, schema.GroupVersionResource, *controller.PullVerdict) {
	if !ref.Remote() {
		return c.Dynamic, mapping.Resource, nil
	}
	rc := c.Hub.cluster(ref.Cluster)
	if rc == nil {
		v := controller.SourceMissing(fmt.Sprintf("the cluster %s of the source %s is not registered with the hub", ref.Cluster, ref))
		return nil, schema.GroupVersionResource{}, &v
	}
	if rc.Err != nil {
		return nil, schema.GroupVersionResource{}, &controller.PullVerdict{State: controller.PullUnreachable,
			Message: fmt.Sprintf("the cluster %s of the source %s cannot be read: %v", ref.Cluster, ref, rc.Err)}
	}
	gvk := mapping.GroupVersionKind
	m, err := rc.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		v := controller.SourceMissing(fmt.Sprintf("the cluster %s does not serve %s: %v", ref.Cluster, gvk, err))
		return nil, schema.GroupVersionResource{}, &v
	}
	return rc.Dynamic, m.Resource, nil
}

// cluster returns the hub's cluster named name, or nil.
func (h *Hub) cluster(name string) *RemoteCluster {
	for i := range h.Clusters {
		if h.Clusters[i].Name == name {
			return &h.Clusters[i]
		}
	}
	return nil
}

// pullRow maps the agent's verdict to the plugin's states: InSync, Pending
// (content never written yet) or Drifted (other content; the agent writes
// it), Excluded (refused, not allowed), Missing (no source), Conflict and
// Unreachable. A write the agent found in conflict or failing is known
// only from its status annotation.
func pullRow(v controller.PullVerdict, holds bool, agentStatus string) (State, string) {
	switch v.State {
	case controller.PullInSync:
		return InSync, v.Message
	case controller.PullOutOfSync:
		switch controller.PullState(firstWord(agentStatus)) {
		case controller.PullConflict:
			return Conflict, strings.TrimPrefix(agentStatus, string(controller.PullConflict)+": ")
		case controller.PullFailed:
			return Drifted, strings.TrimPrefix(agentStatus, string(controller.PullFailed)+": ")
		}
		if holds {
			return Drifted, v.Message + "; it holds other content, and the agent writes it when it next reconciles the pull mirror"
		}
		return Pending, v.Message + "; the agent has not written it yet"
	case controller.PullRefused, controller.PullNotAllowed:
		return Excluded, v.Message
	case controller.PullSourceMissing:
		return Missing, v.Message
	case controller.PullUnreachable:
		return Unreachable, v.Message
	}
	// The hub's verdict, read from its status without --hub-context.
	if agentStatus == "" {
		return Pending, v.Message + "; the hub has not reported yet"
	}
	return Pending, v.Message + "; the hub's status says: " + agentStatus
}

// pullFix says what to do about a verdict on the pull mirror obj (kubectl's
// words for it) in namespace ns of cluster, as why prints it.
func pullFix(v controller.PullVerdict, p *PullReport, obj, kind, cluster, ns string) string {
	ref, _ := annotations.ParseMirrorFrom(p.MirrorFrom)
	source := fmt.Sprintf("%s/%s -n %s", strings.ToLower(kind), ref.Name, ref.Namespace)
	into := ns
	if ref.Remote() {
		into = cluster + "/" + ns
	}
	switch {
	case v.Reason == controller.ReasonInvalidAnnotation:
		return fmt.Sprintf("kubectl annotate --overwrite %s %s=NAMESPACE/NAME (or CLUSTER/NAMESPACE/NAME through the hub)", obj, annotations.AnnotationMirrorFrom)
	case v.State == controller.PullNotAllowed:
		return fmt.Sprintf("ask the owner of the source to allow it: kubectl annotate --overwrite %s %s=%s (a comma list; keep the entries it has)",
			source, annotations.AnnotationAllowPullInto, into)
	case v.State == controller.PullSourceMissing && strings.Contains(v.Message, "is not a source"):
		return fmt.Sprintf("kubectl label %s %s=true (the source's owner)", source, annotations.LabelEnabled)
	case v.State == controller.PullSourceMissing:
		return fmt.Sprintf("check the source named in %s, or create it; the pull mirror keeps what it holds meanwhile", annotations.AnnotationMirrorFrom)
	case p.State == Conflict:
		return "drop those fields from the manifests of whoever manages them (kubectl get " + obj + " --show-managed-fields)"
	case p.State == Pending || p.State == Drifted:
		return "the agent writes it when it next reconciles the pull mirror; if it does not, check that the agent runs and the pull mirror's Events"
	case p.State == Unreachable:
		return stateFix(Unreachable, into)
	}
	return ""
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, ":")
	return w
}

// printPull writes the report of a pull mirror for people.
func printPull(w io.Writer, r *Report) error {
	s, p := r.Source, r.Pull
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "Pull mirror:\t%s %s/%s (%s)\n", s.Kind, s.Namespace, s.Name, s.APIVersion)
	fmt.Fprintf(tw, "Mirror from:\t%s\n", orNone(p.MirrorFrom))
	if p.ServedBy != "" {
		fmt.Fprintf(tw, "Served by:\t%s\n", p.ServedBy)
	}
	fmt.Fprintf(tw, "State:\t%s (%s)\n", p.State, p.PullState)
	fmt.Fprintf(tw, "Reason:\t%s\n", p.Reason)
	if p.HoldsPulled && p.State != InSync {
		fmt.Fprintf(tw, "Content:\tthe content pulled last is kept\n")
	}
	if p.Fix != "" {
		fmt.Fprintf(tw, "Fix:\t%s\n", p.Fix)
	}
	if s.Status != "" {
		fmt.Fprintf(tw, "Status:\t%s\n", s.Status)
	}
	for _, k := range s.UnknownKeys {
		fmt.Fprintf(tw, "Unknown key:\t%s%s\n", k, suggestion(k))
	}
	fmt.Fprintf(tw, "Agent:\t%s\n", s.Agent)
	if err := tw.Flush(); err != nil {
		return err
	}
	return printEvents(w, s.Events)
}

// explainPull answers why for a pull mirror.
func explainPull(r *Report) Answer {
	p := r.Pull
	if p.State == InSync {
		return Answer{Cause: fmt.Sprintf("It holds the content of %s (InSync).", p.MirrorFrom)}
	}
	cause := fmt.Sprintf("Not pulled from %s: %s.", orNone(p.MirrorFrom), p.Reason)
	if p.State == Pending || p.State == Drifted {
		cause = fmt.Sprintf("Pulled from %s, not in sync (%s): %s.", p.MirrorFrom, p.State, p.Reason)
	}
	if p.HoldsPulled {
		cause += " It keeps the content pulled last."
	}
	return Answer{Cause: cause, Fix: p.Fix}
}
