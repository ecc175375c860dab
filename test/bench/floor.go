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
)

// runFloor measures the best any controller could do on this machine: on
// fresh API servers of the same shape (one for member workloads, the
// members for hub workloads), the target namespaces are created untimed,
// then every expected mirror is created, timed, by a plain client with no
// client-side rate limit and many concurrent writers. Same kinds, names,
// data sizes and mirror labels as the real mirrors.
//
// The bench's own watch, which times convergence, runs here too and the
// floor ends when it has seen every object: so both figures carry the same
// cost of observing them (on a 2-core machine a second watcher of 10,000
// objects is a sizeable share of the API server's CPU), and the ratio
// compares the writers alone.
func runFloor(ctx context.Context, b *bench, members int) (_ *floor, err error) {
	progress("%s: floor: starting %d fresh API server(s)", b.workload, members+1)
	f, clusters, err := b.startClusters(filepath.Join(b.work, "floor-kubeconfigs"), members)
	if f != nil {
		defer func() { err = errors.Join(err, f.Stop()) }()
	}
	if err != nil {
		return nil, err
	}
	byName := map[string]*cluster{}
	for _, c := range clusters {
		byName[c.name] = c
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
	tr := newTracker()
	defer tr.stop()
	for name, c := range byName {
		if err := tr.watch(ctx, name, c.cs); err != nil {
			return nil, err
		}
	}
	g := tr.expect(b.want(b.sources, b.targets))
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
	created := time.Since(start)
	seen, err := tr.wait(ctx, g, b.opts.timeout, nil)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	fl := &floor{Objects: len(objs), Workers: b.opts.floorWorkers, Seconds: seen.Sub(start).Seconds(), CreatedSeconds: created.Seconds()}
	progress("%s: floor: %d objects seen in %.3fs (creates returned after %.3fs)", b.workload, fl.Objects, fl.Seconds, fl.CreatedSeconds)
	return fl, nil
}
