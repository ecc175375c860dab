package cli_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// TestNamespaceSelector: status prints a source's namespace selector and
// counts the namespaces it selects as targets; why --in says of a namespace
// it does not select that it is not selected, and how to label it in.
func TestNamespaceSelector(t *testing.T) {
	k8s := setup(t)
	ctx := context.Background()
	g := NewWithT(t)
	nss := newNamespaces(t, "sel-src", "sel-out")
	src, out := nss[0], nss[1]
	key := "sel.example.com/" + src // unique to this test: no other namespace carries it
	in := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sel-in-", Labels: map[string]string{key: "yes"}}}
	g.Expect(k8s.Create(ctx, in)).To(Succeed())
	for name, selector := range map[string]string{"by-value": key + "=yes", "by-absence": "!" + key} {
		meta := fleettest.SourceMeta(src, name, "")
		delete(meta.Annotations, annotations.AnnotationTargetNamespaces)
		meta.Annotations[annotations.AnnotationTargetNamespaceSelector] = selector
		g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: meta})).To(Succeed())
	}

	r := status(g, src, "cm/by-value")
	g.Expect(r.Source.NamespaceSelector).To(Equal(key + "=yes"))
	g.Expect(r.Source.Entries).To(BeEmpty())
	g.Expect(states(r)).To(HaveKeyWithValue(in.Name, Or(Equal(cli.Pending), Equal(cli.Missing))), "the selected namespace is a target")
	g.Expect(states(r)).To(HaveKeyWithValue(out, cli.Excluded))
	text, err := run("status", "cm/by-value", "-n", src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(text).To(ContainSubstring("NS selector: " + key + "=yes\n"))
	g.Expect(text).To(ContainSubstring("other namespaces match no entry and are not selected"))

	for _, tt := range []struct {
		obj, in string
		want    []string
	}{
		{"cm/by-value", out, []string{
			"Not mirrored into " + out + ": namespace " + out + ` is not selected by fleetmirror.io/target-namespace-selector "` + key + `=yes"`,
			"Fix: kubectl label namespace " + out + " " + key + "=yes (if its owners agree), or add " + out + " to fleetmirror.io/target-namespaces",
		}},
		{"cm/by-absence", in.Name, []string{
			"is not selected by fleetmirror.io/target-namespace-selector",
			"Fix: add " + in.Name + " to fleetmirror.io/target-namespaces on configmap/by-absence -n " + src +
				", or label namespace " + in.Name + ` so that fleetmirror.io/target-namespace-selector "!` + key + `" selects it`,
		}},
		{"cm/by-value", "", []string{"Mirrored into 1 namespaces"}},
	} {
		args := []string{"why", tt.obj, "-n", src}
		if tt.in != "" {
			args = append(args, "--in", tt.in)
		}
		text, err := run(args...)
		g.Expect(err).NotTo(HaveOccurred(), text)
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("%v printed\n%s\nwant it to contain %q", args, text, w)
			}
		}
	}
}
