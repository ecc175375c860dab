package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// kcpMirror is a mirror Secret as a wildcard watch of kcp hands it out:
// its logical cluster in an annotation.
func kcpMirror(cluster, value string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench-000", Name: "bench-source-00", Annotations: map[string]string{kcpClusterAnnotation: cluster}},
		Data:       map[string][]byte{"key-0": []byte(value)},
	}
}

// TestMirrorFeed: the mirrors of the same name in the same namespace of
// two logical clusters, which an informer's store would take for one
// object, are tracked apart, and a relist reports the ones gone.
func TestMirrorFeed(t *testing.T) {
	tr := newTracker()
	f := &mirrorFeed{t: tr, kind: kindSecret, keys: map[mirrorKey]bool{}, synced: make(chan struct{})}
	key := func(cluster string) mirrorKey {
		return mirrorKey{Cluster: cluster, Kind: kindSecret, Namespace: "bench-000", Name: "bench-source-00"}
	}
	want := func(v string) string { return digest(map[string][]byte{"key-0": []byte(v)}) }

	if err := f.Replace([]any{kcpMirror("member-1", "a"), kcpMirror("member-2", "b")}, "1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.synced:
	default:
		t.Fatal("not synced after the first list")
	}
	g := tr.expect(map[mirrorKey]string{key("member-1"): want("a"), key("member-2"): want("b")})
	if g.met != 2 {
		t.Fatalf("after the list: %s", tr.describe(g))
	}

	if err := f.Update(kcpMirror("member-2", "c")); err != nil {
		t.Fatal(err)
	}
	g = tr.expect(map[mirrorKey]string{key("member-1"): want("a"), key("member-2"): want("c")})
	if g.met != 2 {
		t.Fatalf("after updating member-2's: %s", tr.describe(g))
	}

	if err := f.Delete(cache.DeletedFinalStateUnknown{Obj: kcpMirror("member-1", "a")}); err != nil {
		t.Fatal(err)
	}
	if err := f.Add(kcpMirror("member-3", "d")); err != nil {
		t.Fatal(err)
	}
	// A relist without member-3's: it is reported gone.
	if err := f.Replace([]any{kcpMirror("member-2", "c")}, "2"); err != nil {
		t.Fatal(err)
	}
	g = tr.expect(map[mirrorKey]string{key("member-1"): wantAbsent, key("member-2"): want("c"), key("member-3"): wantAbsent})
	if g.met != 3 {
		t.Fatalf("after the relist: %s", tr.describe(g))
	}
	if n := tr.count(""); n != 1 {
		t.Errorf("%d mirrors tracked, want 1", n)
	}
}

// TestWildcardReflectorLists: the wildcard reflectors list instead of
// streaming their list, which would key the mirrors of every logical
// cluster as one.
func TestWildcardReflectorLists(t *testing.T) {
	if !watchlist.DoesClientNotSupportWatchListSemantics(listOnly{&cache.ListWatch{}}) {
		t.Error("listOnly lets the reflector stream its list")
	}
}
