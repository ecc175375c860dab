package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// CleanupReport is what cleanup found in one cluster and, with --apply,
// did there.
type CleanupReport struct {
	// Objects hold something of the agents', by namespace, kind and name.
	Objects []CleanupObject `json:"objects"`
	// NotScanned are the resources (and group versions discovery could not
	// read) whose objects were not looked at: what they hold stays.
	NotScanned []NotScanned `json:"notScanned,omitempty"`
	// Running are the agents that still run in the cluster: they would
	// put back what cleanup removes.
	Running []RunningAgent `json:"running,omitempty"`
	// Notes concern the whole run.
	Notes []string `json:"notes,omitempty"`
}

// NotScanned is a resource cleanup could not list.
type NotScanned struct {
	Resource string `json:"resource"`
	Reason   string `json:"reason"`
}

// RunningAgent is a Deployment of an agent with replicas.
type RunningAgent struct {
	// Writer is member or hub.
	Writer     string `json:"writer"`
	Deployment string `json:"deployment"`
	Replicas   int32  `json:"replicas"`
}

type cleanupOptions struct {
	*options
	allNamespaces bool
	apply         bool
	keepMirrors   bool
	managedBy     []string
	output        string
}

func (o *options) cleanupCommand() *cobra.Command {
	c := &cleanupOptions{options: o}
	cmd := &cobra.Command{
		Use:   "cleanup [--apply] [--keep-mirrors] [--managed-by member,hub] [-A | -n NAMESPACE] [-o json]",
		Short: "Remove what the fleetmirror agents left in a cluster whose agent is gone",
		Long: `cleanup does for the cluster of the current context what the charts' uninstall hook does, for a cluster
whose agent went without it: its namespace deleted, helm uninstall --no-hooks, a GitOps tool pruning its
manifests, a Deployment scaled to zero. In every namespace (-n NAMESPACE: that one only) and every
namespaced kind the cluster serves, it

  - deletes the agents' mirrors: only objects proven theirs by their labels and their source reference,
    as the agents check before every delete; a name never makes an object a mirror (--keep-mirrors
    keeps them all);
  - removes the agents' finalizers (fleetmirror.io/member-cleanup, fleetmirror.io/hub-cleanup,
    fleetmirror.io/policy-cleanup) from every object, also from objects being deleted, which then go;
  - removes the status they wrote: their part of fleetmirror.io/status on sources, the whole annotation
    on the pull mirrors they serve;
  - deletes the member agent's kinds object (ConfigMap fleetmirror-member-kinds).

It writes nothing unless run with --apply: first it prints what it would do. --managed-by limits it to
one agent's marks (member or hub): the member and the hub each own a part of a source's status.

One cluster at a time: the hub's mirrors live in its member clusters, so run it against each
(--context). --apply refuses while an agent of --managed-by still runs in the cluster (a Deployment
with replicas): it would put back what cleanup removes. It exits non-zero when a kind could not be
listed (RBAC) or an object not be written, naming them.`,
		Example: `  kubectl fleetmirror cleanup
  kubectl fleetmirror cleanup --apply
  kubectl fleetmirror cleanup --context eu-1 --managed-by hub --apply
  kubectl fleetmirror cleanup --keep-mirrors --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.run(cmd.Context(), cmd.Flags().Changed("all-namespaces"))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&c.apply, "apply", false, "Make the changes; without it, cleanup only prints them")
	f.BoolVar(&c.keepMirrors, "keep-mirrors", false, "Keep the mirrors: remove only the agents' finalizers and statuses")
	f.StringSliceVar(&c.managedBy, "managed-by", []string{annotations.ManagedByMember, annotations.ManagedByHub}, "Whose marks to remove: member, hub, or both")
	f.BoolVarP(&c.allNamespaces, "all-namespaces", "A", true, "Every namespace; -n NAMESPACE without -A cleans that namespace only")
	f.StringVarP(&c.output, "output", "o", "", "Output format: empty for text, or json")
	return cmd
}

func (c *cleanupOptions) run(ctx context.Context, allNamespacesSet bool) error {
	if err := checkOutput(c.output); err != nil {
		return err
	}
	writers, err := ParseWriters(c.managedBy)
	if err != nil {
		return err
	}
	ns := ""
	if !c.allNamespaces || (!allNamespacesSet && c.config.Namespace != nil && *c.config.Namespace != "") {
		if ns, err = c.namespace(); err != nil {
			return err
		}
	}
	cfg, err := c.config.ToRESTConfig()
	if err != nil {
		return err
	}
	cl, err := NewCleaner(cfg, writers, c.keepMirrors)
	if err != nil {
		return err
	}
	rep, err := cl.Scan(ctx, ns)
	if err != nil {
		return err
	}
	refused := c.apply && len(rep.Running) > 0
	if c.apply && !refused {
		cl.Apply(ctx, rep)
	}
	if err := c.print(c.output, rep, func(w io.Writer) error { return printCleanup(w, rep, c.apply && !refused) }); err != nil {
		return err
	}
	if refused {
		return fmt.Errorf("nothing written: %s still runs here and would put back what cleanup removes; uninstall it (helm uninstall cleans up itself), scale it to 0, or leave its marks out with --managed-by",
			describeRunning(rep.Running))
	}
	return rep.Err()
}

// Cleaner scans one cluster for what the agents of its writers left there
// and removes it: the clients cleanup uses.
type Cleaner struct {
	meta        metadata.Interface
	kube        kubernetes.Interface
	discovery   *clusters.Discovery
	writers     []Writer
	keepMirrors bool
}

// NewCleaner connects to the cluster of cfg, to remove the marks of
// writers (and their mirrors, unless keepMirrors).
func NewCleaner(cfg *rest.Config, writers []Writer, keepMirrors bool) (*Cleaner, error) {
	c := &Cleaner{writers: writers, keepMirrors: keepMirrors}
	cfg = rest.CopyConfig(cfg)
	// A list of every kind warns of each deprecated one (Endpoints), which
	// cleanup reads only to look for the agents' marks.
	cfg.WarningHandler = rest.NoWarnings{}
	// client-go's default of 5 requests a second would stretch a scan of
	// every kind, and the writes, into minutes; kubectl allows 50.
	if cfg.QPS == 0 && cfg.Burst == 0 {
		cfg.QPS, cfg.Burst = cleanupQPS, cleanupBurst
	}
	var err error
	if c.meta, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	if c.discovery, err = clusters.NewDiscovery(cfg, httpClient); err != nil {
		return nil, err
	}
	return c, nil
}

// Scan lists the metadata of every object of every namespaced resource
// the cluster serves with the list verb, in namespace ("" for all), and
// plans what to change on each (PlanCleanup). It reads every object, not
// only those labelled as mirrors, sources or pull mirrors: a finalizer or
// a status outlives the label that made an object a source (taken off, or
// the object named by a MirrorPolicy instead), and no selector finds
// finalizers or annotations. Mirrors are among the objects read, so no
// second, label-selected list is needed.
//
// The list verb is all it asks of a resource: a MirrorPolicy of a CRD being
// deleted is still patched (its finalizer removed), though discovery no
// longer lists patch for it. A resource it cannot list (RBAC, an
// aggregated API down) is reported in NotScanned, and the scan goes on.
func (c *Cleaner) Scan(ctx context.Context, namespace string) (*CleanupReport, error) {
	rep := &CleanupReport{Objects: []CleanupObject{}}
	lists, err := c.discovery.PreferredNamespacedResources(ctx)
	var partial *clusters.PartialDiscoveryError
	switch {
	case errors.As(err, &partial):
		for gv, e := range partial.Failed {
			rep.NotScanned = append(rep.NotScanned, NotScanned{Resource: gv.String(), Reason: e.Error()})
		}
	case err != nil:
		return nil, fmt.Errorf("discovery: %w", err)
	}
	// One object may be served by several resources (Events by core/v1
	// and events.k8s.io): it is changed once.
	seen := map[types.UID]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") {
				continue // nothing of the agents' there: they list every kind they write
			}
			resource := gv.WithResource(r.Name)
			err := listMetadata(ctx, c.meta, resource, namespace, "", func(obj *metav1.PartialObjectMetadata) {
				if seen[obj.UID] {
					return
				}
				seen[obj.UID] = true
				if o, ok := PlanCleanup(r.Kind, obj, c.writers, c.keepMirrors); ok {
					o.resource = resource
					rep.Objects = append(rep.Objects, o)
				}
			})
			switch {
			case apierrors.IsForbidden(err):
				rep.NotScanned = append(rep.NotScanned, NotScanned{Resource: resource.GroupResource().String(), Reason: "forbidden (RBAC)"})
			case err != nil:
				rep.NotScanned = append(rep.NotScanned, NotScanned{Resource: resource.GroupResource().String(), Reason: err.Error()})
			}
		}
	}
	running, err := c.runningAgents(ctx)
	if err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("could not look for agents that still run (%v): make sure none does, or it puts back what cleanup removes", err))
	}
	rep.Running = running
	slices.SortStableFunc(rep.Objects, func(a, b CleanupObject) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(rep.NotScanned, func(a, b NotScanned) int { return strings.Compare(a.Resource, b.Resource) })
	return rep, nil
}

// runningAgents finds the Deployments, with replicas, of the agents of
// the cleaner's writers, in any namespace.
func (c *Cleaner) runningAgents(ctx context.Context) ([]RunningAgent, error) {
	l, err := c.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Deployments: %w", err)
	}
	binaries := map[string]string{annotations.ManagedByMember: memberBinary, annotations.ManagedByHub: hubBinary}
	var out []RunningAgent
	for i := range l.Items {
		d := &l.Items[i]
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		if replicas == 0 {
			continue
		}
		for _, w := range c.writers {
			if container(d, binaries[w.Name]) != nil {
				out = append(out, RunningAgent{Writer: w.Name, Deployment: d.Namespace + "/" + d.Name, Replicas: replicas})
			}
		}
	}
	return out, nil
}

// The client-side rate limit of cleanup's requests, as kubectl's.
const (
	cleanupQPS   = 50
	cleanupBurst = 100
)

// cleanupParallelism bounds the writes in flight.
const cleanupParallelism = 8

// maxCleanAttempts bounds the writes of one object that conflict with
// others' writes.
const maxCleanAttempts = 5

// Apply makes the changes of rep, each object's Result saying how it went.
func (c *Cleaner) Apply(ctx context.Context, rep *CleanupReport) {
	workqueue.ParallelizeUntil(ctx, cleanupParallelism, len(rep.Objects), func(i int) {
		rep.Objects[i].Result = c.clean(ctx, rep.Objects[i])
	})
	for i := range rep.Objects {
		if rep.Objects[i].Result == "" {
			rep.Objects[i].Result = "skipped: " + context.Cause(ctx).Error()
		}
	}
}

// clean makes the changes planned for o and says how it went. Each write
// is made against the version the plan was made from (a patch carries its
// resourceVersion, a delete its uid and resourceVersion as
// preconditions): an object changed since is read again and planned
// afresh, so that no change of somebody else's is lost, and an object no
// longer proven a mirror is not deleted.
func (c *Cleaner) clean(ctx context.Context, o CleanupObject) string {
	res := c.meta.Resource(o.resource).Namespace(o.Namespace)
	dropped := false
	for attempt := 1; ; attempt++ {
		err := write(ctx, res, &o)
		switch {
		case err == nil && dropped:
			return "done, but not deleted: it changed since the scan and is no longer proven a mirror of the agents'"
		case err == nil:
			return "done"
		case apierrors.IsNotFound(err):
			return "gone"
		case !apierrors.IsConflict(err) || attempt == maxCleanAttempts:
			return "failed: " + err.Error()
		}
		fresh, err := res.Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "gone"
		case err != nil:
			return "failed: " + err.Error()
		}
		next, ok := PlanCleanup(o.Kind, fresh, c.writers, c.keepMirrors)
		if !ok {
			return "skipped: it changed since the scan and holds nothing of the agents' any more"
		}
		dropped = dropped || (o.Delete != "" && next.Delete == "")
		next.resource = o.resource
		o = next
	}
}

// write patches o's metadata (finalizers, status), then deletes it when
// planned.
func write(ctx context.Context, res metadata.ResourceInterface, o *CleanupObject) error {
	if len(o.RemoveFinalizers) > 0 || o.NewStatus != nil {
		md := map[string]any{"resourceVersion": o.resourceVersion}
		if len(o.RemoveFinalizers) > 0 {
			md["finalizers"] = slices.DeleteFunc(slices.Clone(o.finalizers), func(f string) bool { return slices.Contains(o.RemoveFinalizers, f) })
			if len(md["finalizers"].([]string)) == 0 {
				md["finalizers"] = []string{}
			}
		}
		if o.NewStatus != nil {
			var v any = *o.NewStatus
			if *o.NewStatus == "" {
				v = nil // a merge patch's null deletes the key
			}
			md["annotations"] = map[string]any{annotations.AnnotationStatus: v}
		}
		patch, err := json.Marshal(map[string]any{"metadata": md})
		if err != nil {
			return err
		}
		written, err := res.Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		if err != nil {
			return err
		}
		o.resourceVersion, o.finalizers, o.RemoveFinalizers, o.NewStatus = written.ResourceVersion, written.Finalizers, nil, nil
	}
	if o.Orphan != "" {
		orphan := &metav1.ObjectMeta{ResourceVersion: o.resourceVersion, Labels: o.labels, Annotations: o.annotations}
		patch, err := json.Marshal(map[string]any{"metadata": apply.OrphanPatch(orphan)})
		if err != nil {
			return err
		}
		if _, err := res.Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
			return err
		}
		o.Orphan = ""
	}
	if o.Delete == "" {
		return nil
	}
	uid, rv := o.uid, o.resourceVersion
	return res.Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
}

// Err is the error cleanup exits with: what it could not look at or
// could not change, or nil.
func (r *CleanupReport) Err() error {
	var errs []error
	if len(r.NotScanned) > 0 {
		names := make([]string, len(r.NotScanned))
		for i, n := range r.NotScanned {
			names[i] = n.Resource
		}
		errs = append(errs, fmt.Errorf("%s not scanned (%s): what they hold of the agents' is left; run cleanup again with the rights to list them",
			count(len(names), "resource"), joinFirst(names)))
	}
	var failed []string
	for _, o := range r.Objects {
		if strings.HasPrefix(o.Result, "failed") {
			failed = append(failed, o.Kind+" "+o.Namespace+"/"+o.Name)
		}
	}
	if len(failed) > 0 {
		errs = append(errs, fmt.Errorf("%s not cleaned (%s): see their RESULT above, and run cleanup again", count(len(failed), "object"), joinFirst(failed)))
	}
	return errors.Join(errs...)
}

// joinFirst lists the first names, saying how many more the output above
// lists.
func joinFirst(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more, listed above", strings.Join(names[:most], ", "), len(names)-most)
}

func describeRunning(running []RunningAgent) string {
	out := make([]string, len(running))
	for i, r := range running {
		out[i] = fmt.Sprintf("the %s agent (Deployment %s, %s)", r.Writer, r.Deployment, count(int(r.Replicas), "replica"))
	}
	return strings.Join(out, " and ")
}

// printCleanup writes rep for people: one row per object, then what was
// not scanned, and the counts.
func printCleanup(w io.Writer, rep *CleanupReport, applied bool) error {
	var b strings.Builder
	if !applied {
		b.WriteString("Dry run: nothing is written.\n\n")
	}
	if len(rep.Objects) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		header := "KIND\tNAMESPACE\tNAME\tACTION"
		if applied {
			header += "\tRESULT"
		}
		fmt.Fprintln(tw, header)
		for _, o := range rep.Objects {
			row := o.Kind + "\t" + o.Namespace + "\t" + o.Name + "\t" + o.Action()
			if applied {
				row += "\t" + o.Result
			}
			fmt.Fprintln(tw, row)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	if len(rep.NotScanned) > 0 {
		b.WriteString("Not scanned (what they hold of the agents' stays):\n")
		for _, n := range rep.NotScanned {
			fmt.Fprintf(&b, "  %s: %s\n", n.Resource, n.Reason)
		}
		b.WriteString("\n")
	}
	if len(rep.Running) > 0 {
		fmt.Fprintf(&b, "Still running: %s; it would put back what cleanup removes.\n", describeRunning(rep.Running))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "Note: %s\n", n)
	}
	var deletes, finalizers, statuses, failed int
	for _, o := range rep.Objects {
		if applied && o.Result != "done" && o.Result != "gone" {
			failed++
			continue
		}
		if o.Delete != "" {
			deletes++
		}
		if len(o.RemoveFinalizers) > 0 {
			finalizers++
		}
		if o.NewStatus != nil {
			statuses++
		}
	}
	switch {
	case len(rep.Objects) == 0:
		b.WriteString("Nothing of the fleetmirror agents' found.\n")
	case applied:
		fmt.Fprintf(&b, "%s deleted, finalizers removed from %s, %s changed; %d not done.\n",
			count(deletes, "object"), count(finalizers, "object"), count(statuses, "status annotation"), failed)
	default:
		fmt.Fprintf(&b, "%s to delete, finalizers to remove from %s, %s to change.\nRun again with --apply to make these changes.\n",
			count(deletes, "object"), count(finalizers, "object"), count(statuses, "status annotation"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// count says n things: "1 object", "2 objects".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
