package shard

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
)

// StepLeases is a replica's view of its group's Leases, without the rest of
// the replica: tests ask it what one step asks.
type StepLeases struct{ l *leases }

// NewStepLeases views the Leases of group in namespace as replica
// identity, reading them through cfg.
func NewStepLeases(cfg *rest.Config, namespace, group, identity string, duration time.Duration) (*StepLeases, error) {
	c, err := newLeaseClient(cfg, namespace)
	if err != nil {
		return nil, err
	}
	return &StepLeases{newLeases(c, group, identity, duration, func() {})}, nil
}

// ObserveSilent records lease as the watch would, last seen changing two
// lease durations ago: its replica has gone silent.
func (s *StepLeases) ObserveSilent(lease *coordinationv1.Lease) {
	s.l.observe(lease)
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	p := s.l.peers[lease.Name]
	p.seen = p.seen.Add(-2 * s.l.duration)
	p.since = p.seen
}

// ClaimedByOther asks, for each of clusters in turn, whether another
// replica may serve it, as one step does.
func (s *StepLeases) ClaimedByOther(ctx context.Context, clusters []string) []bool {
	checked := silentChecked{}
	out := make([]bool, len(clusters))
	for i, c := range clusters {
		out[i] = s.l.claimedByOther(ctx, c, checked)
	}
	return out
}
