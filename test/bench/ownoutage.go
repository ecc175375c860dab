package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// ownOutageFaults are the faults of the member agent's own API server: a
// partition (connections cut, new ones refused) and its kube-apiserver
// process stopped and started again on the same etcd and address.
var ownOutageFaults = []string{"partition", "restart"}

// ownOutageTargets is how many namespaces the member agent's source
// targets before its outage; one more appears during each.
const ownOutageTargets = 4

// ownOutage is what hub-faults' last phase measured: a member agent whose
// own API server is unreachable for -member-outage, once per fault of
// ownOutageFaults. A source changes and a namespace its targets match
// appears: during a partition, while the agent cannot see it; right after
// a restart (nobody can write to a stopped API server). CatchUp is from the
// API server's return until every mirror has the change and the new
// namespace its mirror.
//
// The phase runs on an API server of its own, which only the agent and the
// bench use: the sick member's, with the hub's watches on it too, outlived
// envtest's stop timeout when stopped.
type ownOutage struct {
	OutageSeconds float64 `json:"outageSeconds"`
	// CatchUp is by fault: "partition", "restart".
	CatchUp map[string]float64 `json:"catchUpSeconds"`
}

func (o *ownOutage) print(row func(name, value, detail string)) {
	for _, fault := range ownOutageFaults {
		if s, ok := o.CatchUp[fault]; ok {
			row("member agent's catch-up after its API server's "+fault, fmt.Sprintf("%.3fs", s),
				fmt.Sprintf("unreachable %.0fs while its source changed and a matching namespace appeared", o.OutageSeconds))
		}
	}
}

func (o *ownOutage) check(check func(name, target, value string, ok bool)) {
	for _, fault := range ownOutageFaults {
		if s, ok := o.CatchUp[fault]; ok {
			check("member agent's catch-up after its API server's "+fault, "<= 5s", fmt.Sprintf("%.3fs", s), s <= 5)
		}
	}
}

// runOwnOutage starts an API server of its own and runs a member agent in
// it, as the member chart runs it (leader election on), through a proxy in
// front of that API server, and times its catch-up after each outage.
func (b *bench) runOwnOutage(ctx context.Context) (*ownOutage, error) {
	progress("%s: starting the member agent's own API server", b.workload)
	own, err := fleettest.Start("")
	if err != nil {
		return nil, err
	}
	defer func() { _ = own.Stop() }()
	c, err := newCluster("own-outage", own.Hub)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.fc.Config.Host)
	if err != nil {
		return nil, err
	}
	proxy, err := fleettest.NewFaultProxy(u.Host)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	kc, err := c.fc.Kubeconfig()
	if err != nil {
		return nil, err
	}
	if kc, err = proxy.Through(kc); err != nil {
		return nil, err
	}
	kcPath := filepath.Join(b.work, "own-outage.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return nil, err
	}
	const srcNS, prefix = "own-outage-src", "own-outage-t"
	for _, ns := range []string{systemNS, srcNS} {
		if err := createNamespace(ctx, c, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	for i := range ownOutageTargets {
		if err := createNamespace(ctx, c, fmt.Sprintf("%s%d", prefix, i)); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "cfg",
		Labels:      map[string]string{annotations.LabelEnabled: "true"},
		Annotations: map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: prefix + "*"}},
		Data: map[string][]byte{"k": []byte("v0")}}
	if _, err := c.cs.CoreV1().Secrets(srcNS).Create(ctx, src, metav1.CreateOptions{}); err != nil {
		return nil, err
	}

	a, err := newAgent("fleetmirror-member", b.bins.Member, filepath.Join(b.opts.out, "logs", b.workload+"-own-outage-member.log"), false,
		[]string{"--kubeconfig", kcPath, "--cluster-name", c.name, "--namespace", systemNS,
			"--resource-types", "Secret.v1,ConfigMap.v1", "--resync-period", "0",
			"--leader-elect", "--leader-election-namespace", systemNS})
	if err != nil {
		return nil, err
	}
	if err := a.start(); err != nil {
		return nil, err
	}
	defer func() { _ = a.stop() }()

	// landed waits until the mirrors in the first n target namespaces have
	// data v, and returns when that was seen.
	landed := func(v string, n int) (time.Time, error) {
		deadline := time.Now().Add(b.opts.timeout)
		for {
			ok := true
			for i := range n {
				m, err := c.cs.CoreV1().Secrets(fmt.Sprintf("%s%d", prefix, i)).Get(ctx, "cfg", metav1.GetOptions{})
				if err != nil || string(m.Data["k"]) != v {
					ok = false
					break
				}
			}
			if ok {
				return time.Now(), nil
			}
			if err := a.failed(); err != nil {
				return time.Time{}, err
			}
			if time.Now().After(deadline) {
				return time.Time{}, fmt.Errorf("own outage: the mirrors did not all get %q within %s", v, b.opts.timeout)
			}
			select {
			case <-ctx.Done():
				return time.Time{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if _, err := landed("v0", ownOutageTargets); err != nil {
		return nil, err
	}
	// down waits until the agent says its API server is unreachable.
	down := func() error {
		deadline := time.Now().Add(b.opts.timeout)
		for time.Now().Before(deadline) {
			if fams, err := a.scrape(ctx); err == nil && fams["fleetmirror_cluster_up"] != nil && sum(fams, "fleetmirror_cluster_up") == 0 {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		return fmt.Errorf("own outage: the member agent never said its API server was unreachable")
	}
	change := func(n int) error {
		v := fmt.Sprintf("v%d", n)
		patch := fmt.Appendf(nil, `{"stringData":{"k":%q}}`, v)
		if _, err := c.cs.CoreV1().Secrets(srcNS).Patch(ctx, "cfg", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		return createNamespace(ctx, c, fmt.Sprintf("%s%d", prefix, ownOutageTargets+n-1))
	}
	// The faults, in ownOutageFaults' order: cut makes the API server
	// unreachable, heal makes it answer again; after a partition the
	// source changed meanwhile (nobody else is cut off), after a restart
	// it changes as the API server answers (nobody could write to it).
	faults := map[string]struct {
		cut, heal   func() error
		changeAfter bool
	}{
		"partition": {cut: func() error { proxy.Cut(); return nil }, heal: proxy.Heal},
		"restart":   {cut: c.fc.Stop, heal: c.fc.Restart, changeAfter: true}, // Restart returns once it serves
	}
	res := &ownOutage{OutageSeconds: b.opts.memberOutage.Seconds(), CatchUp: map[string]float64{}}
	for i, name := range ownOutageFaults {
		n, fault := i+1, faults[name]
		progress("%s: the member agent's API server: %s for %s", b.workload, name, b.opts.memberOutage)
		if err := fault.cut(); err != nil {
			return nil, err
		}
		if err := down(); err != nil {
			return nil, err
		}
		if !fault.changeAfter {
			if err := change(n); err != nil {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(b.opts.memberOutage):
		}
		if err := fault.heal(); err != nil {
			return nil, err
		}
		back := time.Now()
		if fault.changeAfter {
			if err := change(n); err != nil {
				return nil, err
			}
		}
		at, err := landed(fmt.Sprintf("v%d", n), ownOutageTargets+n)
		if err != nil {
			return nil, err
		}
		res.CatchUp[name] = at.Sub(back).Seconds()
		progress("%s: the member agent caught up %.3fs after its API server's %s", b.workload, res.CatchUp[name], name)
	}
	return res, nil
}
