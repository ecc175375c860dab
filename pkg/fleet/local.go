package fleet

import "context"

// Local is the provider of the agent's own cluster: engaged at start, for
// as long as the agent runs. It lives here, not in pkg/providers, so that
// the member agent, which needs no other provider, does not link the
// kubeconfig providers and Cluster API with them.
type Local struct {
	Spec
}

// Run engages the cluster and waits for ctx to end.
func (p Local) Run(ctx context.Context, e Engager) error {
	spec := p.Spec
	spec.Local = true
	if err := e.Engage(ctx, spec); err != nil {
		return err
	}
	e.Listed()
	<-ctx.Done()
	return nil
}
