package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// How the member workloads ask for their mirrors (-source-modes): by the
// sources' own label and annotations, or by MirrorPolicies naming sources
// that carry none of ours. Every phase is the same in both: no phase of
// runMirroring changes a source's annotations, so none has to change a
// policy instead.
const (
	sourceAnnotations = "annotations"
	sourcePolicies    = "policies"
)

// sourceModeDocs say what each source mode does, in the order they run.
var sourceModeDocs = map[string]string{
	sourceAnnotations: "sources labelled fleetmirror.io/enabled and annotated with their targets",
	sourcePolicies:    "sources without our label or annotations, named by one MirrorPolicy per kind (label selector " + benchSourceLabel + "=true), the same targets",
}

var sourceModeOrder = []string{sourceAnnotations, sourcePolicies}

// benchSourceLabel marks the bench's sources in policy mode, where they
// carry none of fleetmirror's labels: the policies select them by it, as
// a user would select the Secrets an operator writes by the operator's
// labels.
const benchSourceLabel = "bench-source"

// scheme is the bench clients': the built-in kinds and MirrorPolicy.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()

// policies reports whether the workload's sources are driven by
// MirrorPolicies.
func (b *bench) policies() bool {
	return b.opts.sourceMode == sourcePolicies
}

// installPolicyCRD installs the MirrorPolicy CRD as make generate writes
// it into c, through the bench's counted client: the member agent serves
// policies only when the CRD is there when it starts.
func installPolicyCRD(c *cluster) error {
	_, err := fleettest.InstallPolicyCRD(c.counter.instrument(c.fc.Config))
	return err
}

// policiesFor returns the MirrorPolicies that ask for the mirrors the
// annotations targets (fleetmirror.io/target-namespaces' value) would ask
// for srcs: one per namespace and kind, selecting the sources by
// benchSourceLabel, so that one policy covers many sources as a user would
// write it. The bench's sources all have the same targets; sources with
// other targets would need a label value of their own per target list.
func policiesFor(srcs []*source, targets string) []*v1alpha1.MirrorPolicy {
	type group struct{ namespace, kind string }
	var groups []group
	for _, s := range srcs {
		if g := (group{s.Namespace, s.Kind}); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	slices.SortFunc(groups, func(a, b group) int {
		return strings.Compare(a.namespace+"/"+a.kind, b.namespace+"/"+b.kind)
	})
	entries := strings.Split(targets, ",")
	var out []*v1alpha1.MirrorPolicy
	for _, g := range groups {
		out = append(out, &v1alpha1.MirrorPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: g.namespace, Name: "bench-" + strings.ToLower(g.kind) + "s"},
			Spec: v1alpha1.MirrorPolicySpec{
				Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: g.kind,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{benchSourceLabel: "true"}}},
				TargetNamespaces: slices.Clone(entries),
			},
		})
	}
	return out
}

// createPolicies creates the policies of the workload's sources.
func (b *bench) createPolicies(ctx context.Context) error {
	ps := policiesFor(b.sources, b.targetsAsked())
	progress("%s: creating %d MirrorPolicies", b.workload, len(ps))
	for _, p := range ps {
		if err := b.srcC.ctrl.Create(ctx, p); err != nil {
			return fmt.Errorf("MirrorPolicy %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}
