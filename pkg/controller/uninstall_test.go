package controller

import (
	"errors"
	"testing"
)

// The writer's mirrors of a source are where it writes them: the member
// in the source's cluster, the hub in every other one.
func TestScopeMirrorsIn(t *testing.T) {
	for _, tc := range []struct {
		scope           Scope
		source, cluster string
		want            bool
	}{
		{ScopeLocal, "eu-1", "eu-1", true},
		{ScopeLocal, "eu-1", "eu-2", false},
		{ScopeRemote, "eu-1", "eu-1", false},
		{ScopeRemote, "eu-1", "eu-2", true},
	} {
		if got := tc.scope.mirrorsIn(tc.source, tc.cluster); got != tc.want {
			t.Errorf("scope %d: mirrors of a source in %s in %s: %v, want %v", tc.scope, tc.source, tc.cluster, got, tc.want)
		}
	}
}

// What an uninstall says of each cluster: what it did, or what is left.
func TestClusterCleanupString(t *testing.T) {
	for _, tc := range []struct {
		c    ClusterCleanup
		want string
	}{
		{ClusterCleanup{Cluster: "eu-2", Err: errors.New("deadline")}, "eu-2: not reached"},
		{ClusterCleanup{Cluster: "hub", Reached: true, Done: true, MirrorsDeleted: 3, FinalizersRemoved: 1, StatusesCleared: 1},
			"hub: 3 mirrors deleted, 1 finalizer removed, 1 status cleared"},
		{ClusterCleanup{Cluster: "hub", Reached: true, Done: true, StatusesCleared: 1, PullStatusesCleared: 1},
			"hub: 0 mirrors deleted, 0 finalizers removed, 2 statuses cleared"},
		{ClusterCleanup{Cluster: "eu-1", Reached: true, MirrorsLeft: 1, SourcesLeft: 2, Err: errors.New("connection refused")},
			"eu-1: incomplete, 1 mirror not deleted, 2 sources not released (connection refused)"},
		{ClusterCleanup{Cluster: "eu-1", Reached: true, Err: errors.New("conflict")},
			"eu-1: incomplete (conflict)"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.c, got, tc.want)
		}
	}
}

// What an uninstall says is left where it could not finish, and how to
// find it.
func TestClusterCleanupRemains(t *testing.T) {
	id := Identity{ManagedBy: "hub", Finalizer: "fleetmirror.io/hub-cleanup"}
	for _, tc := range []struct {
		c    ClusterCleanup
		kept bool
		want string
	}{
		{ClusterCleanup{Cluster: "eu-2"}, false,
			"cluster eu-2 not reached (its sources may keep fleetmirror.io/status, and mirrors labelled fleetmirror.io/managed-by=hub stay)"},
		{ClusterCleanup{Cluster: "eu-2"}, true, "cluster eu-2 not reached (its sources may keep fleetmirror.io/status)"},
		{ClusterCleanup{Cluster: "eu-1", Reached: true, SourcesLeft: 1, Err: errors.New("timeout")}, true,
			"cluster eu-1: incomplete, 1 source not released (timeout); sources not released keep fleetmirror.io/status"},
	} {
		if got := tc.c.Remains(id, tc.kept); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.c, got, tc.want)
		}
	}
}
