package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// Migration is what migrate reports: every object annotated for
// kubernetes-reflector, kubernetes-replicator or kubemirror that has
// something to migrate, to remove, to note or to decide.
type Migration struct {
	Objects []Migrated `json:"objects"`
	// Copies counts the copies the old tools made. migrate leaves them
	// alone; the agent adopts them once their source carries
	// fleetmirror.io/adopt.
	Copies int `json:"copies"`
	// Notes concern the whole run.
	Notes []string `json:"notes,omitempty"`
	// Kyverno holds the translation of Kyverno's generate rules into
	// MirrorPolicies (migrate_kyverno.go), left out when there are none.
	Kyverno []KyvernoRule `json:"kyverno,omitempty"`
}

// Migrated is one object of a Migration.
type Migrated struct {
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace,omitempty"`
	Name      string       `json:"name"`
	Tools     []peers.Tool `json:"tools"`
	Role      peers.Role   `json:"role"`
	// Add are the fleetmirror labels and annotations --apply sets: those
	// of the translation the object does not carry yet.
	Add []peers.Key `json:"add"`
	// Remove and RemoveFinalizers are the old tool's keys and finalizers
	// --remove-old removes once nothing is left to add.
	Remove           []peers.Key `json:"remove"`
	RemoveFinalizers []string    `json:"removeFinalizers,omitempty"`
	Notes            []string    `json:"notes,omitempty"`
	// Decisions say why the object is not translated; nothing is written
	// to it.
	Decisions []string `json:"decisions,omitempty"`
	// Result is what --apply or --remove-old did: applied, removed,
	// "skipped: why" or "failed: error".
	Result string `json:"result,omitempty"`

	resource        schema.GroupVersionResource
	apiVersion      string
	uid             types.UID
	resourceVersion string
	set             []peers.Key
	finalizers      []string
}

// DefaultMigrateKinds are the kinds migrate scans by default: those the
// three tools mirror by default.
var DefaultMigrateKinds = []string{"secrets", "configmaps"}

type migrateOptions struct {
	*options
	allNamespaces bool
	kinds         []string
	apply         bool
	removeOld     bool
	output        string
}

func (o *options) migrateCommand() *cobra.Command {
	m := &migrateOptions{options: o}
	cmd := &cobra.Command{
		Use:   "migrate [-n NAMESPACE | -A] [--kinds secrets,configmaps] [--apply | --remove-old] [-o json]",
		Short: "Translate kubernetes-reflector, kubernetes-replicator and kubemirror annotations, and Kyverno generate rules, into fleetmirror's",
		Long: `migrate scans objects of --kinds for the annotations of kubernetes-reflector, kubernetes-replicator
and kubemirror and prints, per object, the fleetmirror labels and annotations that give the same result
(+ lines) and the old tool's keys they replace (- lines). It writes nothing unless told to:

  --apply       server-side applies the + keys (field manager ` + FieldManager + `); the old keys stay,
                so both tools work side by side. Sources get fleetmirror.io/adopt, so that the agent
                adopts the copies the old tool made.
  --remove-old  removes the - keys (and kubemirror's finalizer) from objects that carry every + key
                already. It refuses while the old tool still runs: it would delete its copies, which
                the agent has adopted, once their source loses its annotations.

An object whose annotations have no exact translation (a regular expression that is not a glob, a
setting fleetmirror does not have) is listed under "Needs a decision" with the reason; nothing is
written to it. With -A, namespaces labelled kubemirror.raczylo.com/allow-mirrors are migrated too.

It also reads Kyverno's ClusterPolicies and Policies and prints, never creates, the MirrorPolicies that
do what their generate rules with clone or cloneList do when a Namespace is created, or when an object
of one other kind is (a trigger, by exact names and a label selector: spec.trigger, copying into its
namespace, {{request.object.metadata.namespace}}, or into the one namespace match restricts triggers
to; a Policy copies into its own): a copy under another name (generate.name) gets spec.targetName,
synchronize: false spec.copyOnce, and orphanDownstreamOnPolicyDelete spec.deletionPolicy: Orphan,
useServerSideApply spec.keepAdditions. A rule gets spec.adopt: [kyverno]: the copies Kyverno made of
its source become the MirrorPolicy's mirrors in place (with copyOnce they count as the copies made
once, never written), and a synchronized rule whose copies outlive it gets [kyverno, fleetmirror], so
that applied again it takes back the copies it left. A rule without an exact equivalent (a trigger of
several kinds, or by wildcard names, namespaceSelector or annotations; preconditions; a fixed
generate.namespace while triggers may be in other namespaces; another variable as the namespace; a
cluster-scoped kind) is listed with the reason and gets no MirrorPolicy; a kind the agent refuses by
default (Role, RoleBinding, ServiceAccount) is named with the flag that allows it.`,
		Example: `  kubectl fleetmirror migrate -A
  kubectl fleetmirror migrate -n platform --kinds secrets,configmaps,ingresses.networking.k8s.io
  kubectl fleetmirror migrate -A --apply
  kubectl fleetmirror migrate -A --remove-old`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return m.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.BoolVarP(&m.allNamespaces, "all-namespaces", "A", false, "Scan every namespace (and migrate kubemirror's namespace labels)")
	f.StringSliceVar(&m.kinds, "kinds", DefaultMigrateKinds, "Kinds to scan: resource names as kubectl takes them, or Kind.version[.group]")
	f.BoolVar(&m.apply, "apply", false, "Write the fleetmirror labels and annotations (server-side apply); the old ones stay")
	f.BoolVar(&m.removeOld, "remove-old", false, "Remove the old tool's labels, annotations and finalizers from objects already migrated")
	f.StringVarP(&m.output, "output", "o", "", "Output format: empty for text, or json")
	return cmd
}

// Migrator scans a cluster for objects of the peer tools and writes
// their migration: the clients migrate uses.
type Migrator struct {
	meta metadata.Interface
	kube kubernetes.Interface
	// dyn reads Kyverno's policies, whose specs the translation needs.
	dyn dynamic.Interface
}

// NewMigrator connects to the cluster of cfg.
func NewMigrator(cfg *rest.Config) (*Migrator, error) {
	c := &Migrator{}
	var err error
	if c.meta, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func (m *migrateOptions) run(ctx context.Context) error {
	if err := checkOutput(m.output); err != nil {
		return err
	}
	if m.apply && m.removeOld {
		return errors.New("--apply and --remove-old are separate steps: apply, let the agent adopt the copies, uninstall the old tool, then remove the old keys")
	}
	ns := ""
	if !m.allNamespaces {
		var err error
		if ns, err = m.namespace(); err != nil {
			return err
		}
	}
	cfg, err := m.config.ToRESTConfig()
	if err != nil {
		return err
	}
	c, err := NewMigrator(cfg)
	if err != nil {
		return err
	}
	mapper, err := m.config.ToRESTMapper()
	if err != nil {
		return err
	}
	var mappings []*meta.RESTMapping
	for _, k := range m.kinds {
		mp, err := ResolveKind(mapper, strings.TrimSpace(k))
		if err != nil {
			return err
		}
		if mp.Scope.Name() != meta.RESTScopeNameNamespace {
			return fmt.Errorf("--kinds %s: %s is not namespaced", k, mp.GroupVersionKind.Kind)
		}
		mappings = append(mappings, mp)
	}
	mig, err := c.Scan(ctx, ns, mappings)
	if err != nil {
		return err
	}
	switch {
	case m.apply:
		c.Apply(ctx, mig)
	case m.removeOld:
		if err := c.RemoveOld(ctx, mig); err != nil {
			return err
		}
	}
	if err := m.print(m.output, mig, func(w io.Writer) error { return printMigration(w, mig, m.apply || m.removeOld) }); err != nil {
		return err
	}
	failed := 0
	for _, o := range mig.Objects {
		if strings.HasPrefix(o.Result, "failed") {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d objects failed", failed)
	}
	return nil
}

// Scan lists the objects of mappings in namespace ("" for all; namespaces
// themselves are scanned then too) and translates each, and Kyverno's
// generate rules that copy from namespace into MirrorPolicies.
func (c *Migrator) Scan(ctx context.Context, namespace string, mappings []*meta.RESTMapping) (*Migration, error) {
	mig := &Migration{Objects: []Migrated{}}
	var kubemirrorSources []metav1.Object
	for _, mp := range mappings {
		err := listMetadata(ctx, c.meta, mp.Resource, namespace, "", func(obj *metav1.PartialObjectMetadata) {
			tr := peers.Translate(mp.GroupVersionKind.Kind, obj)
			switch {
			case len(tr.Tools) == 0:
				return
			case tr.Role == peers.RoleCopy:
				mig.Copies++
				return
			case len(tr.Tools) == 1 && tr.Tools[0] == peers.Kubemirror:
				kubemirrorSources = append(kubemirrorSources, obj)
			}
			mig.add(mp.GroupVersionKind, mp.Resource, obj, tr)
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", mp.Resource.GroupResource(), err)
		}
	}
	nsResource := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	switch {
	case namespace == "":
		err := listMetadata(ctx, c.meta, nsResource, "", peers.KubemirrorAllowMirrors, func(ns *metav1.PartialObjectMetadata) {
			var targetedBy []string
			for _, src := range kubemirrorSources {
				if peers.KubemirrorTargets(src, ns.Name) {
					targetedBy = append(targetedBy, src.GetNamespace()+"/"+src.GetName())
				}
			}
			mig.add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, nsResource, ns, peers.TranslateNamespace(ns, targetedBy))
		})
		if err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
	case len(kubemirrorSources) > 0:
		mig.Notes = append(mig.Notes, fmt.Sprintf("namespaces were not scanned: run with -A to migrate their %s labels, which kubemirror's all and all-labeled entries read", peers.KubemirrorAllowMirrors))
	}
	slices.SortStableFunc(mig.Objects, func(a, b Migrated) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	if err := c.scanKyverno(ctx, namespace, mig); err != nil {
		return nil, err
	}
	return mig, nil
}

// listMetadata pages through the metadata of resource in namespace ("" for
// all), 500 objects a request, optionally only objects matching the label
// selector.
func listMetadata(ctx context.Context, meta metadata.Interface, resource schema.GroupVersionResource, namespace, selector string, each func(*metav1.PartialObjectMetadata)) error {
	opts := metav1.ListOptions{Limit: 500, LabelSelector: selector}
	for {
		var (
			l   *metav1.PartialObjectMetadataList
			err error
		)
		if namespace == "" {
			l, err = meta.Resource(resource).List(ctx, opts)
		} else {
			l, err = meta.Resource(resource).Namespace(namespace).List(ctx, opts)
		}
		if err != nil {
			return err
		}
		for i := range l.Items {
			each(&l.Items[i])
		}
		if l.Continue == "" {
			return nil
		}
		opts.Continue = l.Continue
	}
}

// add records obj's translation when it has anything to show.
func (mig *Migration) add(gvk schema.GroupVersionKind, resource schema.GroupVersionResource, obj *metav1.PartialObjectMetadata, tr peers.Translation) {
	m := Migrated{
		Kind: gvk.Kind, Namespace: obj.Namespace, Name: obj.Name, Tools: tr.Tools, Role: tr.Role,
		Add: []peers.Key{}, Remove: tr.Old, RemoveFinalizers: tr.Finalizers, Notes: tr.Notes, Decisions: tr.Decisions,
		resource: resource, apiVersion: gvk.GroupVersion().String(), uid: obj.UID, resourceVersion: obj.ResourceVersion,
		set: tr.Set, finalizers: obj.Finalizers,
	}
	if m.Remove == nil {
		m.Remove = []peers.Key{}
	}
	for _, k := range tr.Set {
		have, ok := obj.Annotations[k.Key]
		if k.Label {
			have, ok = obj.Labels[k.Key]
		}
		if !ok || have != k.Value {
			m.Add = append(m.Add, k)
		}
	}
	if len(m.Add)+len(m.Remove)+len(m.RemoveFinalizers)+len(m.Notes)+len(m.Decisions) == 0 {
		return
	}
	mig.Objects = append(mig.Objects, m)
}

// Apply server-side applies each translated object's fleetmirror keys:
// a partial object holding only them, under the plugin's field manager,
// so the old tool's keys and everything else stay. The uid and
// resourceVersion seen by the scan are preconditions: an object that
// changed since is not written, and one deleted since is not created
// (apply creates what is missing; a uid refuses that).
func (c *Migrator) Apply(ctx context.Context, mig *Migration) {
	for i := range mig.Objects {
		o := &mig.Objects[i]
		if len(o.Decisions) > 0 || len(o.Add) == 0 {
			continue
		}
		labels, annots := map[string]string{}, map[string]string{}
		for _, k := range o.set {
			if k.Label {
				labels[k.Key] = k.Value
			} else {
				annots[k.Key] = k.Value
			}
		}
		md := map[string]any{"name": o.Name, "uid": o.uid, "resourceVersion": o.resourceVersion, "labels": labels, "annotations": annots}
		if o.Namespace != "" {
			md["namespace"] = o.Namespace
		}
		body, err := json.Marshal(map[string]any{"apiVersion": o.apiVersion, "kind": o.Kind, "metadata": md})
		if err == nil {
			_, err = c.resource(o).Patch(ctx, o.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		}
		o.Result = result("applied", err, applyRaced(err))
	}
}

// RemoveOld removes the old tool's keys and finalizers from objects whose
// translation is on them in full, with a JSON patch that tests every
// value it relies on: ours present, theirs unchanged since the scan. It
// refuses for a tool whose controller still runs.
func (c *Migrator) RemoveOld(ctx context.Context, mig *Migration) error {
	running, err := c.runningTools(ctx)
	if err != nil {
		return err
	}
	for i := range mig.Objects {
		o := &mig.Objects[i]
		switch {
		case len(o.Decisions) > 0 || len(o.Remove)+len(o.RemoveFinalizers) == 0:
			continue
		case len(o.Add) > 0:
			o.Result = "skipped: not migrated yet (run --apply first)"
			continue
		case running[o.Tools[0]] != "":
			o.Result = fmt.Sprintf("skipped: %s still runs (Deployment %s); uninstall it first, or it deletes its copies, which the agent has adopted, when their source loses its annotations", o.Tools[0], running[o.Tools[0]])
			continue
		}
		body, err := json.Marshal(removePatch(o))
		if err == nil {
			_, err = c.resource(o).Patch(ctx, o.Name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		}
		// The patch is well formed: it is refused (422) only when a test
		// fails, when the object changed since the scan.
		o.Result = result("removed", err, apierrors.IsInvalid(err) || apierrors.IsNotFound(err))
	}
	return nil
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Value is nil for remove; a test of "" must still send it.
	Value *string `json:"value,omitempty"`
}

// removePatch tests our keys and the old values, then removes the old
// keys and finalizers.
func removePatch(o *Migrated) []jsonPatchOp {
	path := func(k peers.Key) string {
		field := "annotations"
		if k.Label {
			field = "labels"
		}
		return "/metadata/" + field + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k.Key)
	}
	var ops []jsonPatchOp
	for _, k := range o.set {
		ops = append(ops, jsonPatchOp{Op: "test", Path: path(k), Value: &k.Value})
	}
	for _, k := range o.Remove {
		ops = append(ops, jsonPatchOp{Op: "test", Path: path(k), Value: &k.Value}, jsonPatchOp{Op: "remove", Path: path(k)})
	}
	// Remove finalizers from the highest index down, so each index holds.
	for i := len(o.finalizers) - 1; i >= 0; i-- {
		for _, f := range o.RemoveFinalizers {
			if o.finalizers[i] == f {
				p := "/metadata/finalizers/" + strconv.Itoa(i)
				ops = append(ops, jsonPatchOp{Op: "test", Path: p, Value: &f}, jsonPatchOp{Op: "remove", Path: p})
			}
		}
	}
	return ops
}

func (c *Migrator) resource(o *Migrated) metadata.ResourceInterface {
	if o.Namespace == "" {
		return c.meta.Resource(o.resource)
	}
	return c.meta.Resource(o.resource).Namespace(o.Namespace)
}

// result is done, or the failure: raced when the object changed or went
// away since the scan, which running migrate again resolves.
func result(done string, err error, raced bool) string {
	switch {
	case err == nil:
		return done
	case raced:
		return "failed: it changed or went away since the scan; run migrate again (" + err.Error() + ")"
	}
	return "failed: " + err.Error()
}

// applyRaced reports whether an apply failed on its preconditions: the
// resourceVersion (a Conflict), the uid of a deleted object (a Conflict)
// or of one deleted and created again (metadata.uid is immutable).
func applyRaced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// peerImages are the image names (the last path element, without tag) of
// the three tools' controllers.
var peerImages = map[string]peers.Tool{
	"kubernetes-reflector":  peers.Reflector,
	"kubernetes-replicator": peers.Replicator,
	"kubemirror":            peers.Kubemirror,
}

// runningTools finds the Deployments, with replicas, that run one of the
// tools' controllers: tool to NAMESPACE/NAME.
func (c *Migrator) runningTools(ctx context.Context) (map[peers.Tool]string, error) {
	l, err := c.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("--remove-old must first check that the old tools are uninstalled: listing Deployments: %w", err)
	}
	out := map[peers.Tool]string{}
	for _, d := range l.Items {
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			continue
		}
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if tool, ok := peerImages[imageName(ctr.Image)]; ok && out[tool] == "" {
				out[tool] = d.Namespace + "/" + d.Name
			}
		}
	}
	return out, nil
}

// imageName is the last path element of an image reference, without its
// tag or digest: quay.io/mittwald/kubernetes-replicator:v2.12.4 gives
// kubernetes-replicator.
func imageName(image string) string {
	image, _, _ = strings.Cut(image, "@")
	image = image[strings.LastIndex(image, "/")+1:]
	image, _, _ = strings.Cut(image, ":")
	return image
}

// printMigration writes mig for people: objects to migrate with their
// diff, then those that need a decision.
func printMigration(w io.Writer, mig *Migration, wrote bool) error {
	var b strings.Builder
	var migrate, decide []Migrated
	for _, o := range mig.Objects {
		if len(o.Decisions) > 0 {
			decide = append(decide, o)
		} else {
			migrate = append(migrate, o)
		}
	}
	if !wrote {
		b.WriteString("Dry run: nothing is written. + keys are set by --apply; - keys are removed by --remove-old once the + keys are there.\n\n")
	}
	for _, o := range migrate {
		fmt.Fprintf(&b, "%s\n", header(o))
		for _, k := range o.Add {
			fmt.Fprintf(&b, "  + %s\n", keyLine(k))
		}
		for _, k := range o.Remove {
			fmt.Fprintf(&b, "  - %s\n", keyLine(k))
		}
		for _, f := range o.RemoveFinalizers {
			fmt.Fprintf(&b, "  - finalizer %s\n", f)
		}
		for _, n := range o.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
		if o.Result != "" {
			fmt.Fprintf(&b, "  => %s\n", o.Result)
		}
		b.WriteString("\n")
	}
	if len(decide) > 0 {
		b.WriteString("Needs a decision (nothing is written to these):\n")
		for _, o := range decide {
			fmt.Fprintf(&b, "  %s\n", header(o))
			for _, d := range o.Decisions {
				fmt.Fprintf(&b, "    why: %s\n", d)
			}
			for _, n := range o.Notes {
				fmt.Fprintf(&b, "    note: %s\n", n)
			}
		}
		b.WriteString("\n")
	}
	if err := printKyverno(&b, mig.Kyverno); err != nil {
		return err
	}
	for _, n := range mig.Notes {
		fmt.Fprintf(&b, "Note: %s\n", n)
	}
	fmt.Fprintf(&b, "%d objects to migrate, %d need a decision, %d copies made by the old tools (the agent adopts them once their source carries fleetmirror.io/adopt).\n",
		len(migrate), len(decide), mig.Copies)
	_, err := io.WriteString(w, b.String())
	return err
}

func header(o Migrated) string {
	name := o.Name
	if o.Namespace != "" {
		name = o.Namespace + "/" + name
	}
	tools := make([]string, len(o.Tools))
	for i, t := range o.Tools {
		tools[i] = string(t)
	}
	return fmt.Sprintf("%s %s (%s %s)", o.Kind, name, strings.Join(tools, ", "), o.Role)
}

// keyLine is "label KEY: VALUE" or "annotation KEY: VALUE", the value
// quoted when it is empty or spans lines.
func keyLine(k peers.Key) string {
	what := "annotation"
	if k.Label {
		what = "label"
	}
	v := k.Value
	if v == "" || strings.ContainsAny(v, "\n\r\t") || strings.TrimSpace(v) != v {
		v = strconv.Quote(v)
	}
	return fmt.Sprintf("%s %s: %s", what, k.Key, v)
}
