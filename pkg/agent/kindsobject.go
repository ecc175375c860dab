package agent

import (
	"context"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// kindsObjectCheck is how often the member compares what its kinds object
// says with what its kind watches know (in memory; no request).
const kindsObjectCheck = 250 * time.Millisecond

// kindsObject keeps the member's kinds object (clusters.MemberKindsName in
// --namespace) saying which kinds its cluster uses, so that the hub need
// not watch the others there. The leader writes it when that changes and
// every clusters.MemberKindsRenewal, and deletes it when it stops leading:
// the hub then watches every kind of the cluster, as it does without a
// member agent, until a leader writes it again.
type kindsObject struct {
	res       dynamic.ResourceInterface
	namespace string
	cluster   string
	fleet     *fleet.Fleet
}

func (o *Options) newKindsObject(cfg *rest.Config, f *fleet.Fleet) (*kindsObject, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kindsObject{res: dyn.Resource(configMapsGVR).Namespace(o.Namespace), namespace: o.Namespace, cluster: o.ClusterName, fleet: f}, nil
}

// run keeps the object until ctx ends, then deletes it.
func (k *kindsObject) run(ctx context.Context) {
	log := logf.FromContext(ctx).WithValues("namespace", k.namespace, "name", clusters.MemberKindsName)
	var last map[string]string // data written, renewedAt left out
	var written, failed time.Time
	var lastErr string
	t := time.NewTicker(kindsObjectCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if !written.IsZero() {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if err := k.delete(dctx); err != nil {
					log.Info("Cannot delete the kinds object; the hub stops trusting it within its staleness bound", "error", err.Error())
				}
				cancel()
			}
			return
		case <-t.C:
		}
		var local *clusters.Cluster
		for _, c := range k.fleet.Clusters() {
			if c.Name() == k.cluster {
				local = c
			}
		}
		if local == nil {
			continue
		}
		covered, used, ok := k.fleet.KindsCoverage(local)
		if !ok {
			continue
		}
		now := time.Now()
		data := clusters.FormatKindsHint(covered, used, now)
		unchanged := maps.Clone(data)
		delete(unchanged, clusters.MemberKindsRenewedAt)
		if maps.Equal(unchanged, last) && now.Sub(written) < clusters.MemberKindsRenewal {
			continue
		}
		if now.Sub(failed) < 5*time.Second {
			continue // a refused write is tried again at most every 5s
		}
		if err := k.write(ctx, data); err != nil {
			failed = now
			if err.Error() != lastErr && ctx.Err() == nil { // logged once, not every retry
				log.Info("Cannot write the kinds object; the hub watches every kind of this cluster meanwhile", "error", err.Error())
			}
			lastErr = err.Error()
			continue
		}
		last, written, lastErr = unchanged, now, ""
	}
}

// write creates or updates the object with data. An object of that name
// without our label is not ours: left alone.
func (k *kindsObject) write(ctx context.Context, data map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetName(clusters.MemberKindsName)
	obj.SetNamespace(k.namespace)
	obj.SetLabels(map[string]string{clusters.LabelMemberKinds: "true"})
	if err := unstructured.SetNestedStringMap(obj.Object, data, "data"); err != nil {
		return err
	}
	_, err := k.res.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur, err := k.res.Get(ctx, clusters.MemberKindsName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.GetLabels()[clusters.LabelMemberKinds] != "true" {
		return fmt.Errorf("configmap %s/%s exists without the label %s=true: not ours, left alone", k.namespace, clusters.MemberKindsName, clusters.LabelMemberKinds)
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	_, err = k.res.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// delete deletes the object if it is ours.
func (k *kindsObject) delete(ctx context.Context) error {
	cur, err := k.res.Get(ctx, clusters.MemberKindsName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.GetLabels()[clusters.LabelMemberKinds] != "true" {
		return nil
	}
	uid := cur.GetUID()
	err = k.res.Delete(ctx, clusters.MemberKindsName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
