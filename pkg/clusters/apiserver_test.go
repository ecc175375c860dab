package clusters

import (
	"context"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// APIServer starts an API server for one test, stopped when it ends; the
// context ends first.
func APIServer(t *testing.T) (*fleettest.Fleet, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	fleet, err := fleettest.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return fleet, ctx
}
