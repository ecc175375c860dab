package providers

import (
	"context"

	"github.com/fleetmirror/fleetmirror/pkg/fleet"
)

// Local is the agent's own cluster: engaged at start, for as long as the
// agent runs.
type Local struct {
	fleet.Spec
}

// Run engages the cluster and waits for ctx to end.
func (p Local) Run(ctx context.Context, e fleet.Engager) error {
	spec := p.Spec
	spec.Local = true
	if err := e.Engage(ctx, spec); err != nil {
		return err
	}
	e.Listed()
	<-ctx.Done()
	return nil
}
