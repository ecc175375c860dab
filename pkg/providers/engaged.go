package providers

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/fleetmirror/fleetmirror/pkg/fleet"
)

// engaged is one cluster a provider engaged, with the hash of the
// registration it was engaged from.
type engaged struct {
	hash   string
	cancel context.CancelCauseFunc
}

// engagedSet is what a provider engaged, by cluster name.
type engagedSet map[string]*engaged

// retire ends the engagements whose registration is gone (the name is not
// in want) or changed (want has another hash for it); a changed one ends
// with fleet.ErrReplaced, so that the fleet knows it comes back at once.
func (s engagedSet) retire(log logr.Logger, want map[string]string) {
	for name, en := range s {
		switch hash, ok := want[name]; {
		case !ok:
			log.Info("Unregistering cluster", "cluster", name)
			en.cancel(nil)
			delete(s, name)
		case hash != en.hash:
			log.Info("Registration changed; connecting to the cluster again", "cluster", name)
			en.cancel(fleet.ErrReplaced)
			delete(s, name)
		}
	}
}

// engage engages the cluster of spec until its registration is retired.
func (s engagedSet) engage(ctx context.Context, e fleet.Engager, spec fleet.Spec, hash string) error {
	cctx, cancel := context.WithCancelCause(ctx)
	if err := e.Engage(cctx, spec); err != nil {
		cancel(nil)
		return err
	}
	s[spec.Name] = &engaged{hash: hash, cancel: cancel}
	return nil
}
