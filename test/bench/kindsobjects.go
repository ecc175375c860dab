package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// memberKindsObjects writes into every member cluster the kinds object its
// member agent would keep there (clusters.MemberKindsName), and renews it
// every clusters.MemberKindsRenewal until ctx ends: hub-fleet's mode
// discovery measures a hub that discovers every kind in clusters whose
// member agents say which kinds are used. The members hold the hub's
// mirrors and neither sources nor pull mirrors, so no kind is used there:
// what their agents would say.
func (b *bench) memberKindsObjects(ctx context.Context) error {
	write := func(ctx context.Context, c *cluster) error {
		lists, err := c.cs.Discovery().ServerPreferredNamespacedResources()
		if err != nil {
			return err
		}
		var covered []schema.GroupVersionKind
		for _, l := range lists {
			gv, err := schema.ParseGroupVersion(l.GroupVersion)
			if err != nil {
				continue
			}
			for _, r := range l.APIResources {
				covered = append(covered, gv.WithKind(r.Kind))
			}
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: clusters.MemberKindsName,
			Labels: map[string]string{clusters.LabelMemberKinds: "true"}}, Data: clusters.FormatKindsHint(covered, nil, time.Now())}
		_, err = c.cs.CoreV1().ConfigMaps(systemNS).Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			_, err = c.cs.CoreV1().ConfigMaps(systemNS).Create(ctx, cm, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("cluster %s: kinds object: %w", c.name, err)
		}
		return nil
	}
	var members []*cluster
	for _, c := range b.clusters {
		if c != b.srcC {
			members = append(members, c)
		}
	}
	renew := func(ctx context.Context) error {
		return parallel(ctx, len(members), b.opts.workers, func(ctx context.Context, i int) error { return write(ctx, members[i]) })
	}
	if err := renew(ctx); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(clusters.MemberKindsRenewal)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := renew(ctx); err != nil && ctx.Err() == nil {
					progress("%s: renewing the kinds objects: %v", b.workload, err)
				}
			}
		}
	}()
	return nil
}
