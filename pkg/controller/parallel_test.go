package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// Writes run at most per at a time in each cluster, and the clusters side
// by side: with three clusters and two per cluster, six calls are in
// flight at once (the calls wait for that), never three in one cluster.
func TestParallelPerCluster(t *testing.T) {
	const per, perCluster = 2, 10
	var tgts []Target
	for i := range 3 {
		c, err := clusters.New(&rest.Config{Host: "https://127.0.0.1:1"}, clusters.Options{Name: fmt.Sprintf("c%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		for j := range perCluster {
			tgts = append(tgts, Target{Cluster: c, Namespace: fmt.Sprintf("ns-%d", j)})
		}
	}
	var mu sync.Mutex
	inFlight, most := map[*clusters.Cluster]int{}, map[*clusters.Cluster]int{}
	total, calls, released := 0, 0, false
	all := make(chan struct{})
	timeout := time.After(10 * time.Second)
	parallelPerCluster(context.Background(), per, tgts, func(i int) {
		c := tgts[i].Cluster
		mu.Lock()
		inFlight[c]++
		most[c] = max(most[c], inFlight[c])
		total++
		calls++
		if total == 3*per && !released {
			released = true
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-timeout:
		}
		mu.Lock()
		inFlight[c]--
		total--
		mu.Unlock()
	})
	select {
	case <-all:
	default:
		t.Fatal("the clusters' writes never ran side by side")
	}
	if calls != len(tgts) {
		t.Errorf("%d calls for %d targets", calls, len(tgts))
	}
	for c, n := range most {
		if n > per {
			t.Errorf("cluster %s had %d writes in flight, more than %d", c.Name(), n, per)
		}
	}
}
