package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
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

	if fl.Updates, err = b.updateFloor(ctx, tr, byName); err != nil {
		return nil, fmt.Errorf("update floor: %w", err)
	}
	if u := fl.Updates; u != nil {
		progress("%s: floor: updates p50 %.3fs p95 %.3fs max %.3fs", b.workload, u.P50, u.P95, u.Max)
	}
	return fl, nil
}

// floorUpdateRounds bounds the rounds of the update floor: its p95 needs a
// few dozen, the agent's updates are the figure that needs a hundred.
const floorUpdateRounds = 40

// updateFloor measures the best update propagation on this machine: one
// source's objects in every target are rewritten by the plain client, a
// whole object each (a PUT, as the agent writes a changed mirror),
// floorWorkers at a time, and each round is timed until the bench's watch
// has seen them all, as an update of the agent is timed. The agent adds
// to that the source's own write and event, and its reconcile.
func (b *bench) updateFloor(ctx context.Context, tr *tracker, byName map[string]*cluster) (*latencies, error) {
	rounds := min(b.scale.Updates, floorUpdateRounds)
	clusters := slices.Collect(maps.Values(byName))
	cpuBefore, err := controlPlaneCPU(clusters)
	if err != nil {
		return nil, err
	}
	var lat []float64
	for i := range rounds {
		src := b.sources[i%len(b.sources)]
		data := maps.Clone(src.data) // the sources are seeded later with their own data
		data[fmt.Sprintf("key-%d", i%sourceKeys)] = b.value()
		s := *src
		s.data, s.digest = data, digest(data)
		g := tr.expect(b.want([]*source{&s}, b.targets))
		start := time.Now()
		err := parallel(ctx, len(b.targets), b.opts.floorWorkers, func(ctx context.Context, j int) error {
			t := b.targets[j]
			c := byName[t.cluster]
			meta := metav1.ObjectMeta{
				Namespace: t.namespace, Name: s.Name,
				Labels: map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: "floor"},
				Annotations: map[string]string{
					annotations.AnnotationSource:      s.Namespace + "/" + s.Name,
					annotations.AnnotationContentHash: s.digest,
				},
			}
			var err error
			if s.Kind == kindSecret {
				_, err = c.cs.CoreV1().Secrets(t.namespace).Update(ctx, &corev1.Secret{ObjectMeta: meta, Data: data}, metav1.UpdateOptions{})
			} else {
				_, err = c.cs.CoreV1().ConfigMaps(t.namespace).Update(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: toStrings(data)}, metav1.UpdateOptions{})
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		at, err := tr.wait(ctx, g, b.opts.timeout, nil)
		if err != nil {
			return nil, err
		}
		lat = append(lat, at.Sub(start).Seconds())
	}
	if len(lat) == 0 {
		return nil, nil
	}
	cpuAfter, err := controlPlaneCPU(clusters)
	if err != nil {
		return nil, err
	}
	l := summarize(lat)
	l.MirrorsPerUpdate = len(b.targets)
	l.ControlPlaneCPU = (cpuAfter - cpuBefore) / float64(len(lat))
	return l, nil
}
