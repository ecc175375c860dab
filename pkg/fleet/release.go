package fleet

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// releaseSources removes finalizer, which earlier versions of the writer
// held, from the sources of a cluster that leaves the fleet, while its
// connection still works, so that they can be deleted later. It tries for a
// bounded time; a cluster unreachable now keeps the finalizer, which is
// logged (kubectl fleetmirror cleanup removes it).
func releaseSources(ctx context.Context, c *clusters.Cluster, finalizer, fieldManager string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	log := logf.FromContext(ctx).WithValues("cluster", c.Name())
	for _, gvk := range c.Watched() {
		for _, src := range c.Sources(gvk) {
			fins := src.GetFinalizers()
			if !slices.Contains(fins, finalizer) {
				continue
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"resourceVersion": src.GetResourceVersion(),
				"finalizers":      slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == finalizer }),
			}})
			res, err := c.MetadataResource(gvk, src.GetNamespace())
			if err != nil {
				continue
			}
			_, err = res.Patch(ctx, src.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
			if err != nil && !apierrors.IsNotFound(err) {
				log.Info("Could not remove an earlier version's finalizer from a source of a cluster leaving the fleet; kubectl fleetmirror cleanup removes it",
					"gvk", gvk.String(), "namespace", src.GetNamespace(), "name", src.GetName(), "finalizer", finalizer, "error", err.Error())
			}
		}
	}
}

// reportMirrors keeps the mirrors gauge equal to the caches' counts until
// ctx ends. Series of kinds or clusters no longer watched are deleted.
func reportMirrors(ctx context.Context, list func() []*clusters.Cluster) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	type series struct{ kind, cluster string }
	reported := map[series]bool{}
	for {
		now := map[series]bool{}
		for _, c := range list() {
			for _, gvk := range c.Watched() {
				s := series{metrics.KindLabel(gvk), c.Name()}
				now[s] = true
				metrics.Mirrors.WithLabelValues(s.kind, s.cluster).Set(float64(len(c.AllMirrors(gvk))))
			}
		}
		for s := range reported {
			if !now[s] {
				metrics.Mirrors.DeleteLabelValues(s.kind, s.cluster)
			}
		}
		reported = now
		select {
		case <-ctx.Done():
			for s := range reported {
				metrics.Mirrors.DeleteLabelValues(s.kind, s.cluster)
			}
			return
		case <-t.C:
		}
	}
}
