package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/member"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
	"github.com/fleetmirror/fleetmirror/pkg/policy"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// State is what the plugin finds at one target.
type State string

// States of a target, the values of "state" in the JSON output.
const (
	// InSync: our mirror exists with the desired content.
	InSync State = "InSync"
	// Pending: no mirror yet, and the source or the namespace changed after
	// the agent last wrote the source, within PendingWindow.
	Pending State = "Pending"
	// Drifted: our mirror exists with other content; the agent rewrites it.
	Drifted State = "Drifted"
	// Missing: a target without a mirror.
	Missing State = "Missing"
	// Conflict: an object of the mirror's name exists that is not our
	// mirror of this source.
	Conflict State = "Conflict"
	// Excluded: a candidate the agent drops (a Decision of targets.Plan).
	Excluded State = "Excluded"
	// Unreachable: the target's cluster does not answer (hub targets; not
	// reported as rows yet).
	Unreachable State = "Unreachable"
)

// States lists every state in the order counts are printed.
var States = []State{InSync, Pending, Drifted, Missing, Conflict, Excluded, Unreachable}

// PendingWindow bounds how long a missing mirror counts as Pending after
// the change that should create it: longer, the agent is late and it is
// Missing.
const PendingWindow = time.Minute

// Report is what status prints: the source and every target considered;
// for a pull mirror, Source describes the pull mirror and Pull its pull.
type Report struct {
	Source  Source      `json:"source"`
	Targets []Target    `json:"targets"`
	Pull    *PullReport `json:"pull,omitempty"`
	// HubClusters are the hub's clusters, with --hub-context.
	HubClusters []HubCluster `json:"hubClusters,omitempty"`
}

// Source is the source's parsed settings.
type Source struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	// Enabled is the fleetmirror.io/enabled label; Sync the sync annotation.
	Enabled bool `json:"enabled"`
	Sync    bool `json:"sync"`
	// Entries are the local entries of target-namespaces, as written;
	// RemoteEntries the CLUSTER/NS ones, served by the hub.
	Entries         []string `json:"entries"`
	RemoteEntries   []string `json:"remoteEntries,omitempty"`
	ClusterSelector string   `json:"clusterSelector,omitempty"`
	// NamespaceSelector is target-namespace-selector when it is valid (an
	// invalid one selects nothing and is among Problems).
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	MaxTargets        int    `json:"maxTargets,omitempty"`
	// Transform is "none", "present" or "invalid"; TransformError says why.
	Transform      string   `json:"transform"`
	TransformError string   `json:"transformError,omitempty"`
	Problems       []string `json:"problems,omitempty"`
	UnknownKeys    []string `json:"unknownKeys,omitempty"`
	// Refused says why the object may never be a source.
	Refused string `json:"refused,omitempty"`
	// NotWatched says why the agent does not mirror the kind.
	NotWatched string `json:"notWatched,omitempty"`
	// Status is the fleetmirror.io/status annotation the agents write.
	Status string `json:"status,omitempty"`
	// RemoteNote reports the remote entries from the hub's status part.
	RemoteNote string `json:"remoteNote,omitempty"`
	// Policy names the MirrorPolicy whose spec is the source's request:
	// the object is not labelled as a source, and of the policies that
	// name it this one came first. OtherPolicies also name it and do not
	// mirror it (docs/policies.md, A source named twice).
	Policy        string   `json:"policy,omitempty"`
	OtherPolicies []string `json:"otherPolicies,omitempty"`
	// Agent says where the agent's options come from.
	Agent  string  `json:"agent"`
	Events []Event `json:"events"`
}

// Event is one recent core/v1 Event of the source.
type Event struct {
	Type     string    `json:"type"`
	Reason   string    `json:"reason"`
	Message  string    `json:"message"`
	Count    int32     `json:"count"`
	LastSeen time.Time `json:"lastSeen"`
}

// Target is one target considered, with its state and why.
type Target struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	State     State  `json:"state"`
	Reason    string `json:"reason"`
}

// Client is what the commands read the cluster with.
type Client struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	Mapper  meta.RESTMapper
	Agent   Agent
	// Hub, when set (--hub-context), resolves the CLUSTER/NS entries as
	// the hub does, one row per target cluster and namespace.
	Hub *Hub
	// Now is the current time, for Pending.
	Now func() time.Time
}

// maxEvents bounds the Events a report carries, the most recent first.
const maxEvents = 10

// Inspect reads the source KIND/NAME in namespace and reports on it.
func (c *Client) Inspect(ctx context.Context, mapping *meta.RESTMapping, namespace, name string) (*Report, error) {
	src, err := c.Dynamic.Resource(mapping.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var r *Report
	if isPullMirror(src) {
		r, err = c.inspectPull(ctx, mapping, src)
	} else {
		var nss namespaces
		if nss, err = c.namespaces(ctx); err == nil {
			r, err = c.report(ctx, mapping, src, nss)
		}
	}
	if err != nil {
		return nil, err
	}
	if c.Hub != nil {
		r.HubClusters = c.Hub.Summary()
	}
	r.Source.Events, err = c.events(ctx, src)
	return r, err
}

// namespaces is the cluster's namespaces as the agent sees them
// (controller.Namespaces), and when each was created, for Pending.
type namespaces struct {
	list    []targets.Namespace
	created map[string]time.Time
}

func (c *Client) namespaces(ctx context.Context) (namespaces, error) {
	list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return namespaces{}, err
	}
	out := namespaces{list: make([]targets.Namespace, 0, len(list.Items)), created: map[string]time.Time{}}
	for _, ns := range list.Items {
		out.list = append(out.list, targets.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: ns.DeletionTimestamp != nil})
		out.created[ns.Name] = ns.CreationTimestamp.Time
	}
	return out, nil
}

// report computes the source's settings and its targets' states, as the
// agent's pipeline would decide them now.
func (c *Client) report(ctx context.Context, mapping *meta.RESTMapping, src *unstructured.Unstructured, nss namespaces) (*Report, error) {
	o := c.Agent.Options
	gvk := mapping.GroupVersionKind
	req := annotations.Parse(src.GetLabels(), src.GetAnnotations())
	via, others, err := c.policies(ctx, gvk, src)
	if apierrors.IsForbidden(err) {
		req.Problems = append(req.Problems, "MirrorPolicies could not be read, so a policy that names the object is not shown: "+err.Error())
	} else if err != nil {
		return nil, err
	}
	adopt, _ := peers.ParseAdopt(src.GetAnnotations()[annotations.AnnotationAdopt])
	if req.Enabled {
		others = append(namesOf(via), others...)
		via = nil // its own annotations come first
	} else if via != nil {
		req = policy.Request(&via.Spec)
		adopt, _ = policy.Adopt(&via.Spec)
	}
	s := Source{
		Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: src.GetNamespace(), Name: src.GetName(),
		Enabled: req.Enabled, Sync: req.Sync, Entries: []string{}, MaxTargets: req.MaxTargets, Transform: "none",
		Problems: req.Problems, Refused: desired.Refusal(gvk, src), Status: src.GetAnnotations()[annotations.AnnotationStatus],
		Agent: c.Agent.Describe(), Events: []Event{},
		UnknownKeys: append(UnknownKeys(src.GetLabels()), UnknownKeys(src.GetAnnotations())...),
	}
	if via != nil {
		s.Policy = via.Name
	}
	s.OtherPolicies = others
	for _, p := range req.Local {
		s.Entries = append(s.Entries, p.Raw)
	}
	for _, t := range req.Remote {
		s.RemoteEntries = append(s.RemoteEntries, t.String())
	}
	if req.ClusterSelector != nil {
		s.ClusterSelector = req.ClusterSelector.String()
	}
	if req.NamespaceSelector != nil {
		s.NamespaceSelector = req.NamespaceSelector.String()
	}
	switch {
	case req.TransformErr != nil:
		s.Transform, s.TransformError = "invalid", req.TransformErr.Error()
	case req.Transform != nil:
		s.Transform = "present"
	}
	if ok, why := c.Agent.Watches(gvk); !ok {
		s.NotWatched = why
	}
	if len(req.Remote) > 0 {
		s.RemoteNote = remoteNote(len(req.Remote), s.Status)
	}
	r := &Report{Source: s, Targets: []Target{}}
	// The agent acts on none of the targets of a source it does not watch,
	// refuses, is switched off, or has invalid rules.
	if s.NotWatched != "" || s.Refused != "" || !req.Active() || req.TransformErr != nil {
		return r, nil
	}
	local := targets.Cluster{Name: o.ClusterName, State: targets.Ready, KindSynced: true, Namespaces: nss.list}
	if via != nil && via.Spec.Trigger != nil {
		if local.Within, err = c.triggerNamespaces(ctx, via); err != nil {
			return nil, err
		}
		local.WithinBecause = policy.TriggerDescription(via.Spec.Trigger)
	}
	out := targets.Plan(req, targets.Source{Cluster: o.ClusterName, Namespace: src.GetNamespace(), Renamed: req.Renames(src.GetName())},
		targets.Fleet{Clusters: []targets.Cluster{local}}, c.Agent.Policy(), targets.Scope{Explain: true})
	for _, t := range out.Targets {
		row, err := c.target(ctx, c.Dynamic, mapping, src, req, adopt, t, writer{annotations.ManagedByMember, member.FieldManager})
		if err != nil {
			return nil, err
		}
		if row.State == Missing && c.pending(src, nss.created[t.Namespace]) {
			row.State = Pending
			row.Reason = "the agent has not written the mirror yet: the source or the namespace changed after the agent last wrote the source"
		}
		r.Targets = append(r.Targets, row)
	}
	for _, d := range out.Decisions {
		r.Targets = append(r.Targets, Target{Cluster: d.Cluster, Namespace: d.Namespace, State: Excluded, Reason: string(d.Reason) + ": " + d.Message})
	}
	if c.Hub != nil && (len(req.Remote) > 0 || req.RemoteNamespaceSelector() != nil) {
		rows, err := c.remoteTargets(ctx, mapping, src, req, adopt)
		if err != nil {
			return nil, err
		}
		r.Targets = append(r.Targets, rows...)
	}
	slices.SortStableFunc(r.Targets, func(a, b Target) int {
		return strings.Compare(a.Cluster+"/"+a.Namespace, b.Cluster+"/"+b.Namespace)
	})
	return r, nil
}

// triggerNamespaces returns the namespaces that hold an object of p's
// trigger, as the agent's watches of it see them.
func (c *Client) triggerNamespaces(ctx context.Context, p *v1alpha1.MirrorPolicy) (sets.Set[string], error) {
	gvk, sel, _, err := policy.Trigger(&p.Spec)
	if err != nil {
		return nil, err
	}
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("the trigger of MirrorPolicy %s: %w", p.Name, err)
	}
	opts := metav1.ListOptions{}
	if sel != nil {
		opts.LabelSelector = sel.String()
	}
	list, err := c.Dynamic.Resource(m.Resource).Namespace(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("the trigger of MirrorPolicy %s: %w", p.Name, err)
	}
	within := sets.New[string]()
	for _, o := range list.Items {
		if len(p.Spec.Trigger.Names) == 0 || slices.Contains(p.Spec.Trigger.Names, o.GetName()) {
			within.Insert(o.GetNamespace())
		}
	}
	return within, nil
}

// writer is whose mirror a target should hold: the member agent's or the
// hub's.
type writer struct{ managedBy, fieldManager string }

// remoteTargets resolves the CLUSTER/NS entries, and the namespace selector
// with a cluster selector, over the hub's fleet with the hub's policy, as
// the hub does, and decides each target's state with the hub's identity.
// Clusters that do not answer are Unreachable.
func (c *Client) remoteTargets(ctx context.Context, mapping *meta.RESTMapping, src *unstructured.Unstructured, req annotations.Request, adopt []peers.Tool) ([]Target, error) {
	ho := c.Hub.Options
	snap := targets.Fleet{}
	byName := map[string]*RemoteCluster{}
	for i := range c.Hub.Clusters {
		rc := &c.Hub.Clusters[i]
		if rc.DuplicateOf != "" {
			continue // the hub refuses it: no target
		}
		byName[rc.Name] = rc
		tc := targets.Cluster{Name: rc.Name, Labels: rc.Labels, State: targets.Ready, KindSynced: true, Namespaces: rc.Namespaces,
			Excluded: rc.Excluded, ExcludedBecause: rc.ExcludedBecause}
		if rc.Err != nil {
			tc.State = targets.Unreachable
		}
		snap.Clusters = append(snap.Clusters, tc)
	}
	slices.SortFunc(snap.Clusters, func(a, b targets.Cluster) int { return strings.Compare(a.Name, b.Name) })
	out := targets.Plan(req, targets.Source{Cluster: c.Agent.Options.ClusterName, Namespace: src.GetNamespace()}, snap,
		targets.Policy{Included: ho.IncludedNamespaces, Excluded: ho.ExcludedNamespaces, MaxTargets: ho.MaxTargets},
		targets.Scope{Remote: true, AllowedSourceClusters: ho.AllowedSourceClusters, AllowedSourceNamespaces: ho.AllowedSourceNamespaces, Explain: true})
	var rows []Target
	for _, t := range out.Targets {
		rc := byName[t.Cluster]
		m, err := rc.Mapper.RESTMapping(mapping.GroupVersionKind.GroupKind(), mapping.GroupVersionKind.Version)
		if err != nil {
			rows = append(rows, Target{Cluster: t.Cluster, Namespace: t.Namespace, State: Missing,
				Reason: "the cluster does not serve " + mapping.GroupVersionKind.String() + ": " + err.Error()})
			continue
		}
		row, err := c.target(ctx, rc.Dynamic, m, src, req, adopt, t, writer{annotations.ManagedByHub, hub.FieldManager})
		if err != nil {
			row = Target{Cluster: t.Cluster, Namespace: t.Namespace, State: Unreachable, Reason: "reading the target failed: " + err.Error()}
		}
		rows = append(rows, row)
	}
	for _, d := range out.Decisions {
		state := Excluded
		switch d.Reason {
		case targets.ClusterUnreachable:
			state = Unreachable
		case targets.ClusterPending:
			state = Pending
		}
		msg := d.Message
		if rc := byName[d.Cluster]; state == Unreachable && rc != nil && rc.Err != nil {
			msg += " (" + rc.Err.Error() + ")"
		}
		rows = append(rows, Target{Cluster: d.Cluster, Namespace: d.Namespace, State: state, Reason: string(d.Reason) + ": " + msg})
	}
	return rows, nil
}

// target decides the state of one target as the writer's apply stage would:
// desired.Build the mirror, read what is there (with dyn, the target
// cluster's client), check ownership and apply.InSync.
func (c *Client) target(ctx context.Context, dyn dynamic.Interface, mapping *meta.RESTMapping, src *unstructured.Unstructured, req annotations.Request, adopt []peers.Tool, t targets.Target, w writer) (Target, error) {
	o := c.Agent.Options
	row := Target{Cluster: t.Cluster, Namespace: t.Namespace}
	want, _, err := desired.Build(src, desired.Target{Cluster: t.Cluster, Namespace: t.Namespace},
		desired.Options{SourceCluster: o.ClusterName, ManagedBy: w.managedBy, Strip: o.StripKeys,
			Name: req.TargetName, CopyOnce: req.CopyOnce, Orphan: req.Orphan, KeepAdditions: req.KeepAdditions}, req.Transform)
	if err != nil {
		row.State, row.Reason = Missing, "the target gets no mirror: "+err.Error()
		return row, nil
	}
	live, err := dyn.Resource(mapping.Resource).Namespace(t.Namespace).Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && req.CopyOnce:
		row.State, row.Reason = Missing, "no copy exists; copy-once: the agent makes one unless it made one there before (deleted since, it is not made again)"
		return row, nil
	case apierrors.IsNotFound(err):
		row.State, row.Reason = Missing, "no mirror exists; the agent creates it when it next reconciles the source"
		return row, nil
	case err != nil:
		return row, err
	}
	ref := want.GetAnnotations()[annotations.AnnotationSource]
	if !desired.Owned(live.GetLabels(), live.GetAnnotations(), w.managedBy, ref) {
		ce := &apply.ConflictError{Namespace: live.GetNamespace(), Name: live.GetName()}
		if desired.IsMirror(live.GetLabels()) {
			ce.Owner = live.GetAnnotations()[annotations.AnnotationSource]
		}
		if len(adopt) > 0 {
			tool, why := apply.Adoptable(t.Cluster, live, want, adopt)
			if tool != "" {
				row.State, row.Reason = Drifted, fmt.Sprintf("a copy of the source made by %s; the agent adopts it as a mirror when it next reconciles the source", tool)
				return row, nil
			}
			ce.NotAdopted = why
		}
		row.State, row.Reason = Conflict, ce.Error()+"; the agent leaves it alone (delete or rename it to let the mirror in)"
		return row, nil
	}
	if req.CopyOnce {
		row.State, row.Reason = InSync, "copy-once: the copy was made once and is left to its namespace; the agent never writes to it again"
		return row, nil
	}
	if apply.InSync(live, want, w.fieldManager) {
		row.State, row.Reason = InSync, "the mirror has the source's content"
		return row, nil
	}
	row.State, row.Reason = Drifted, "the mirror's content differs from the source's (edited by hand, or the source changed); the agent rewrites it"
	return row, nil
}

// pending reports whether a missing mirror is one the agent has not had the
// time to write: the source (by anyone but the agent) or the namespace
// changed after the agent's last write to the source, within PendingWindow.
func (c *Client) pending(src *unstructured.Unstructured, nsCreated time.Time) bool {
	var agentWrote, changed time.Time
	for _, mf := range src.GetManagedFields() {
		if mf.Time == nil {
			continue
		}
		if mf.Manager == member.FieldManager {
			agentWrote = later(agentWrote, mf.Time.Time)
		} else {
			changed = later(changed, mf.Time.Time)
		}
	}
	changed = later(changed, nsCreated)
	return changed.After(agentWrote) && c.Now().Sub(changed) < PendingWindow
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// remoteNote reports the remote entries from the hub's part of the status.
func remoteNote(n int, status string) string {
	hub := "the hub has not reported yet"
	if i := strings.Index(status, "remote: "); i >= 0 {
		hub = status[i:]
	}
	return fmt.Sprintf("%d remote entries, served by the hub: %s", n, hub)
}

// policies returns the MirrorPolicies of src's namespace that name it: the
// one that mirrors it, unless it is labelled as a source, and the names of
// the others. A cluster that does not serve MirrorPolicies has none.
func (c *Client) policies(ctx context.Context, gvk schema.GroupVersionKind, src *unstructured.Unstructured) (*v1alpha1.MirrorPolicy, []string, error) {
	list, err := c.Dynamic.Resource(policiesGVR).Namespace(src.GetNamespace()).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var named []*v1alpha1.MirrorPolicy
	for i := range list.Items {
		p := &v1alpha1.MirrorPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, p); err != nil {
			return nil, nil, fmt.Errorf("MirrorPolicy %s: %w", list.Items[i].GetName(), err)
		}
		if policy.Names(p, gvk, src.GetName(), src.GetLabels()) {
			named = append(named, p)
		}
	}
	first, rest := policy.First(named)
	return first, namesOf(rest...), nil
}

// policiesGVR is the resource of MirrorPolicies.
var policiesGVR = v1alpha1.GroupVersion.WithResource("mirrorpolicies")

func namesOf(ps ...*v1alpha1.MirrorPolicy) []string {
	var out []string
	for _, p := range ps {
		if p != nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// events returns the most recent Events of src.
func (c *Client) events(ctx context.Context, src *unstructured.Unstructured) ([]Event, error) {
	sel := fields.Set{"involvedObject.name": src.GetName(), "involvedObject.kind": src.GetKind()}.AsSelector().String()
	list, err := c.Kube.CoreV1().Events(src.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	items := slices.DeleteFunc(list.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.UID != "" && e.InvolvedObject.UID != src.GetUID()
	})
	slices.SortFunc(items, func(a, b corev1.Event) int { return lastSeen(b).Compare(lastSeen(a)) })
	out := []Event{}
	for _, e := range items[:min(len(items), maxEvents)] {
		out = append(out, Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: max(e.Count, 1), LastSeen: lastSeen(e)})
	}
	return out, nil
}

func lastSeen(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
