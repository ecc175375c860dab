package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// runFloor measures the best any controller could do on this machine: on
// fresh API servers of the same shape (one for member workloads, the
// members for hub workloads), the target namespaces are created untimed,
// then every expected mirror is created, timed, by a plain client with no
// client-side rate limit and many concurrent writers. Same kinds, names,
// data sizes and mirror labels as the real mirrors.
func runFloor(ctx context.Context, b *bench, members int) (_ *floor, err error) {
	names := make([]string, members)
	for i := range names {
		names[i] = fmt.Sprintf("member-%d", i+1)
	}
	progress("%s: floor: starting %d fresh API server(s)", b.workload, members+1)
	f, err := fleettest.Start(filepath.Join(b.work, "floor-kubeconfigs"), names...)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Stop()) }()

	byName := map[string]*cluster{}
	for _, fc := range f.Clusters() {
		name := fc.Name
		if !b.hub() {
			name = memberClusterName
		}
		c, err := newCluster(name, fc)
		if err != nil {
			return nil, err
		}
		byName[name] = c
	}
	if err := parallel(ctx, len(b.targets), b.opts.workers, func(ctx context.Context, i int) error {
		t := b.targets[i]
		return createNamespace(ctx, byName[t.cluster], t.namespace)
	}); err != nil {
		return nil, err
	}

	type obj struct {
		c   *cluster
		t   target
		src *source
	}
	var objs []obj
	for _, t := range b.targets {
		for _, s := range b.sources {
			objs = append(objs, obj{byName[t.cluster], t, s})
		}
	}
	progress("%s: floor: creating %d objects with %d writers", b.workload, len(objs), b.opts.floorWorkers)
	start := time.Now()
	err = parallel(ctx, len(objs), b.opts.floorWorkers, func(ctx context.Context, i int) error {
		o := objs[i]
		meta := metav1.ObjectMeta{
			Namespace: o.t.namespace, Name: o.src.Name,
			Labels: map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: "floor"},
			Annotations: map[string]string{
				annotations.AnnotationSource:      o.src.Namespace + "/" + o.src.Name,
				annotations.AnnotationContentHash: o.src.digest,
			},
		}
		var err error
		if o.src.Kind == kindSecret {
			_, err = o.c.cs.CoreV1().Secrets(o.t.namespace).Create(ctx, &corev1.Secret{ObjectMeta: meta, Data: o.src.data}, metav1.CreateOptions{})
		} else {
			_, err = o.c.cs.CoreV1().ConfigMaps(o.t.namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: toStrings(o.src.data)}, metav1.CreateOptions{})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	fl := &floor{Objects: len(objs), Workers: b.opts.floorWorkers, Seconds: time.Since(start).Seconds()}
	progress("%s: floor: %d objects in %.3fs", b.workload, fl.Objects, fl.Seconds)
	return fl, nil
}
