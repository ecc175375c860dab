package controller

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

func TestBreaker(t *testing.T) {
	b := breaker{threshold: 3, base: time.Second, max: 5 * time.Second}
	key := Key{Cluster: "c", GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespace: "ns", Name: "n"}
	other := key
	other.Name = "other"
	fail := errors.New("boom")
	steps := []struct {
		key      Key
		err      error
		wantErr  bool
		wantWait time.Duration
		open     bool // breaker.open(key) after the step
	}{
		{key, fail, true, 0, false},
		{key, fail, true, 0, true},            // the next failure opens it
		{key, fail, false, time.Second, true}, // open: no error, spaced out
		{other, fail, true, 0, true},          // other sources are not affected
		{key, fail, false, 2 * time.Second, true},
		{key, fail, false, 4 * time.Second, true},
		{key, fail, false, 5 * time.Second, true}, // capped
		{key, nil, false, 0, false},               // one success closes it
		{key, fail, true, 0, false},
	}
	for i, s := range steps {
		res, err := b.record(s.key, Result{}, s.err)
		if (err != nil) != s.wantErr || res.RequeueAfter != s.wantWait {
			t.Fatalf("step %d: got (%v, %v), want error %v and wait %v", i, res.RequeueAfter, err, s.wantErr, s.wantWait)
		}
		if got := b.open(key); got != s.open {
			t.Fatalf("step %d: open = %v, want %v", i, got, s.open)
		}
	}
}

func TestMergeStatus(t *testing.T) {
	tests := []struct {
		current, part string
		remote        bool
		want          string
	}{
		{"", "2/2 namespaces synced", false, "2/2 namespaces synced"},
		{"", "remote: 1 cluster, 1/1 synced", true, "remote: 1 cluster, 1/1 synced"},
		{"2/2 namespaces synced", "remote: 1 cluster, 1/1 synced", true, "2/2 namespaces synced | remote: 1 cluster, 1/1 synced"},
		{"remote: 1 cluster, 1/1 synced", "3/3 namespaces synced", false, "3/3 namespaces synced | remote: 1 cluster, 1/1 synced"},
		{"2/2 namespaces synced | remote: 1 cluster, 1/1 synced", "2/3 namespaces synced; 1 failed", false,
			"2/3 namespaces synced; 1 failed | remote: 1 cluster, 1/1 synced"},
		{"2/2 namespaces synced | remote: 1 cluster, 1/1 synced", "", true, "2/2 namespaces synced"},
		{"2/2 namespaces synced | remote: 1 cluster, 1/1 synced", "", false, "remote: 1 cluster, 1/1 synced"},
	}
	for _, tt := range tests {
		if got := mergeStatus(tt.current, tt.part, tt.remote); got != tt.want {
			t.Errorf("mergeStatus(%q, %q, %v) = %q, want %q", tt.current, tt.part, tt.remote, got, tt.want)
		}
		// Writing one's own part again changes nothing: no write loop.
		again := mergeStatus(mergeStatus(tt.current, tt.part, tt.remote), tt.part, tt.remote)
		if again != mergeStatus(tt.current, tt.part, tt.remote) {
			t.Errorf("mergeStatus is not idempotent for %+v", tt)
		}
	}
}

func TestStatusLine(t *testing.T) {
	p := Plan{Targets: make([]Target, 4), Outcome: targets.Outcome{Skipped: []string{"x"}, Unreachable: []string{"eu-2"}, Clusters: 3}}
	s := summary{created: 1, unchanged: 2, conflicts: []string{"c"}}
	if got, want := statusLine(p, s, false), "3/4 namespaces synced; 1 conflict; 1 over limit; eu-2 unreachable"; got != want {
		t.Errorf("member line = %q, want %q", got, want)
	}
	if got, want := statusLine(p, s, true), "remote: 3 clusters, 3/4 synced; 1 conflict; 1 over limit; eu-2 unreachable"; got != want {
		t.Errorf("hub line = %q, want %q", got, want)
	}
	// An adopted mirror is a synced one.
	s.adopted = []string{"team-a"}
	if got, want := statusLine(p, s, false), "4/4 namespaces synced; 1 conflict; 1 over limit; eu-2 unreachable"; got != want {
		t.Errorf("member line with an adopted mirror = %q, want %q", got, want)
	}
}

func TestParseSourceRef(t *testing.T) {
	for _, tt := range []struct {
		ref string
		ok  bool
	}{{"c/ns/n", true}, {"c/ns", false}, {"/ns/n", false}, {"c/ns/n/x", false}, {"", false}} {
		if _, _, _, ok := ParseSourceRef(tt.ref); ok != tt.ok {
			t.Errorf("ParseSourceRef(%q) ok = %v, want %v", tt.ref, ok, tt.ok)
		}
	}
}
