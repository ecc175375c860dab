package apply_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// A pull write lands only on the very object read: never on one created
// meanwhile, never on a newer version, and never creates one; it takes no
// field another manager holds with another value.
func TestPullWritesOnlyTheObjectRead(t *testing.T) {
	if api == nil {
		t.Skip("needs an API server")
	}
	c, _ := startCluster(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(g, "pull")
	a := &apply.Applier{FieldManager: "fleetmirror-test", ManagedBy: managedBy}
	content := map[string]any{"type": "Opaque", "data": map[string]any{"k": one}}
	hash := desired.PullHash(content)

	create := func(name string, data map[string][]byte) *unstructured.Unstructured {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{annotations.LabelPull: "true"}}, Data: data}
		g.Expect(api.Hub.Client.Create(ctx, s)).To(Succeed())
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Secret")
		g.Expect(api.Hub.Client.Get(ctx, client.ObjectKeyFromObject(s), u)).To(Succeed())
		return u
	}
	read := func(name string) *corev1.Secret {
		s := &corev1.Secret{}
		if err := api.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return nil
		}
		return s
	}

	// Written: the content and its hash, under the pull field manager.
	live := create("ok", map[string][]byte{"own": []byte("x")})
	written, err := a.Pull(ctx, c, secrets, live, content, hash)
	g.Expect(err).NotTo(HaveOccurred())
	got := read("ok")
	g.Expect(got.Data).To(Equal(map[string][]byte{"k": []byte("one"), "own": []byte("x")}))
	g.Expect(got.Annotations).To(HaveKeyWithValue(annotations.AnnotationContentHash, hash))
	g.Expect(written.GetResourceVersion()).To(Equal(got.ResourceVersion))
	var managers []string
	for _, mf := range got.ManagedFields {
		managers = append(managers, mf.Manager)
	}
	g.Expect(managers).To(ContainElement("fleetmirror-test-pull"))
	liveNow := &unstructured.Unstructured{}
	liveNow.SetAPIVersion("v1")
	liveNow.SetKind("Secret")
	g.Expect(api.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ok"}, liveNow)).To(Succeed())
	g.Expect(apply.PullInSync(liveNow, content, hash)).To(BeTrue())

	// A version we have not seen: stale, nothing written.
	stale := create("stale", nil)
	fresh := read("stale")
	fresh.Labels["changed"] = "yes"
	g.Expect(api.Hub.Client.Update(ctx, fresh)).To(Succeed())
	_, err = a.Pull(ctx, c, secrets, stale, content, hash)
	g.Expect(errors.Is(err, apply.ErrPullStale)).To(BeTrue(), "got %v", err)
	g.Expect(read("stale").Data).To(BeEmpty())

	// Deleted meanwhile: never created again.
	gone := create("gone", nil)
	g.Expect(api.Hub.Client.Delete(ctx, read("gone"))).To(Succeed())
	_, err = a.Pull(ctx, c, secrets, gone, content, hash)
	g.Expect(errors.Is(err, apply.ErrPullStale)).To(BeTrue(), "got %v", err)
	g.Expect(read("gone")).To(BeNil())

	// Deleted and created again under the same name: not the object read.
	again := create("again", nil)
	g.Expect(api.Hub.Client.Delete(ctx, read("again"))).To(Succeed())
	create("again", nil)
	_, err = a.Pull(ctx, c, secrets, again, content, hash)
	g.Expect(err).To(HaveOccurred())
	g.Expect(read("again").Data).To(BeEmpty())

	// A field held by another manager with another value: a conflict that
	// names it, and nothing written.
	held := create("held", map[string][]byte{"k": []byte("theirs")})
	_, err = a.Pull(ctx, c, secrets, held, content, hash)
	var ce *apply.PullConflictError
	g.Expect(errors.As(err, &ce)).To(BeTrue(), "got %v", err)
	g.Expect(ce.Fields).To(ConsistOf(ContainSubstring(".data.k")))
	g.Expect(read("held").Data).To(Equal(map[string][]byte{"k": []byte("theirs")}))
}
