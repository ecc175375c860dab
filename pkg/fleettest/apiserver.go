package fleettest

import (
	"context"
	"testing"
)

// APIServer starts an API server for one test, stopped when it ends; the
// context ends first. With -short the test is skipped.
func APIServer(t testing.TB) (*Fleet, context.Context) {
	t.Helper()
	return APIServerWithFlags(t, nil)
}

// APIServerWithFlags is APIServer with kube-apiserver flags set or
// replaced: flag name without its dashes to value, such as
// {"feature-gates": "WatchList=false"} for an API server without
// something the agents use.
func APIServerWithFlags(t testing.TB, flags map[string]string) (*Fleet, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	fleet, err := start("", flags)
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
