package fleet

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/events"
)

// ReasonInvalidKindsObject is the Warning Event on a member kinds object the
// hub does not trust (clusters.ParseKindsHint says why).
const ReasonInvalidKindsObject = "InvalidKindsObject"

// KindsCoverage is what the member agent writes into its kinds object
// about c: see clusters.Kinds.Coverage.
func (f *Fleet) KindsCoverage(c *clusters.Cluster) (covered, used []schema.GroupVersionKind, ok bool) {
	return f.kinds.Coverage(c)
}

// invalidKindsObject logs an invalid member kinds object of c and records a
// Warning Event on it: its cluster's kinds are then all watched.
func (f *Fleet) invalidKindsObject(c *clusters.Cluster, obj *unstructured.Unstructured, err error) {
	logf.FromContext(f.ctx).Info("Invalid member kinds object; watching every kind of the cluster", "cluster", c.Name(),
		"namespace", obj.GetNamespace(), "name", obj.GetName(), "error", err.Error())
	if rec := f.Recorder(c); rec != nil {
		rec.Eventf(obj, events.Warning, ReasonInvalidKindsObject, "Not used, every kind of this cluster is watched instead: %v", err)
	}
}
