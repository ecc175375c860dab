package apply_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// With keep-additions, a mirror keeps the keys and labels another writer
// adds to it, while what the source sets keeps the source's values and
// what the agent wrote that the source no longer has goes. Without it
// (the default) the mirror is an exact copy again at the next write.
func TestEnsureKeepsAdditions(t *testing.T) {
	c, w := startCluster(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(g, "keep")
	a := &apply.Applier{FieldManager: "fleetmirror-test", ManagedBy: managedBy}
	build := func(rv string, data map[string]any, keep bool) *unstructured.Unstructured {
		want, _, err := desired.Build(source("app", rv, map[string]any{"data": data}), desired.Target{Cluster: cluster, Namespace: ns},
			desired.Options{SourceCluster: cluster, ManagedBy: managedBy, KeepAdditions: keep}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		return want
	}
	// ensure runs Ensure once the cache has seen the mirror as it is.
	ensure := func(want *unstructured.Unstructured) apply.Outcome {
		live, err := get(ns, "db")
		g.Expect(err).NotTo(HaveOccurred())
		cachedAt(g, c, live)
		out, err := a.Ensure(ctx, c, secrets, want, false)
		g.Expect(err).NotTo(HaveOccurred())
		return out
	}
	// edit writes the mirror as another field manager would.
	edit := func(fn func(u *unstructured.Unstructured)) {
		live, err := get(ns, "db")
		g.Expect(err).NotTo(HaveOccurred())
		fn(live)
		g.Expect(api.Hub.Client.Update(ctx, live, client.FieldOwner("kubectl-edit"))).To(Succeed())
	}
	data := func() map[string]any {
		live, err := get(ns, "db")
		g.Expect(err).NotTo(HaveOccurred())
		return live.Object["data"].(map[string]any)
	}

	v1 := build("10", map[string]any{"k": one}, true)
	g.Expect(a.Ensure(ctx, c, secrets, v1, false)).To(Equal(apply.Created))

	// Added by someone else: kept, and nothing is written.
	edit(func(u *unstructured.Unstructured) {
		u.Object["data"].(map[string]any)["extra"] = two
		l := u.GetLabels()
		l["added"] = "by-hand"
		u.SetLabels(l)
	})
	written := w.Writes()
	g.Expect(ensure(v1)).To(Equal(apply.Unchanged))
	g.Expect(w.Writes()).To(Equal(written))
	g.Expect(ensure(v1)).To(Equal(apply.Unchanged), "accepted, not read again")

	// What the source sets is still corrected; the addition stays.
	edit(func(u *unstructured.Unstructured) { u.Object["data"].(map[string]any)["k"] = two })
	g.Expect(ensure(v1)).To(Equal(apply.Updated))
	g.Expect(data()).To(Equal(map[string]any{"k": one, "extra": two}))
	live, _ := get(ns, "db")
	g.Expect(live.GetLabels()).To(HaveKeyWithValue("added", "by-hand"))

	// The source changes and gains a key, then loses it: the key we wrote
	// goes, the addition stays.
	g.Expect(ensure(build("11", map[string]any{"k": two, "new": one}, true))).To(Equal(apply.Updated))
	g.Expect(data()).To(Equal(map[string]any{"k": two, "new": one, "extra": two}))
	g.Expect(ensure(build("12", map[string]any{"k": two}, true))).To(Equal(apply.Updated))
	g.Expect(data()).To(Equal(map[string]any{"k": two, "extra": two}))

	// The default: an exact copy.
	g.Expect(ensure(build("13", map[string]any{"k": two}, false))).To(Equal(apply.Updated))
	g.Expect(data()).To(Equal(map[string]any{"k": two}))
	live, _ = get(ns, "db")
	g.Expect(live.GetLabels()).NotTo(HaveKey("added"))
}
