package member_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// What the API server adds to every mirror we write (kcp names the logical
// cluster on each object; a mutating admission policy or webhook may add
// its own annotation) comes back in the answer to our write, and is taken
// as ours: a mirror event that shows it is not drift, and the next update
// of the source writes each mirror once from the cached resourceVersion,
// without reading it first. Here a MutatingAdmissionPolicy adds an
// annotation to the objects of a kind of this test's own (a CRD without
// defaults: a kind the API server defaults, such as LimitRange, changes
// content too, which is read whole as before) in its target namespaces;
// the agent mirrors only that kind, so its sync operations are this
// test's.
func TestServerAdditionsAccepted(t *testing.T) {
	const targets = 5
	const added = "example.com/added-by-admission"
	g := NewWithT(t)
	ctx := context.Background()
	installCRD(t, crd("Stamp", "stamps"))
	withAgent(t, "--resource-types=Stamp.v1.example.com")

	mark := fmt.Sprintf("added-%d", time.Now().UnixNano())
	policy := &admissionv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: mark},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleetmirror-test/mutated": mark}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"stamps"}},
				}}},
			},
			Mutations: []admissionv1.Mutation{{
				PatchType: admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{annotations: {"` + added + `": "yes"}}}`,
				},
			}},
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		},
	}
	create(t, policy)
	binding := &admissionv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: mark},
		Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: mark},
	}
	create(t, binding)
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, policy)
	})

	// The source's namespace is not mutated, so the annotation is not one
	// the mirrors copy from it.
	src := namespaces(t, "added", nil, "src")[0]
	var suffixes []string
	for i := range targets {
		suffixes = append(suffixes, fmt.Sprintf("t%d", i))
	}
	ns := namespaces(t, "added", map[string]string{"fleetmirror-test/mutated": mark}, suffixes...)
	stamp := func(namespace, name, size string) *unstructured.Unstructured {
		return customSource("Stamp", namespace, name, strings.Join(ns, ","), map[string]any{"spec": map[string]any{"size": size}})
	}
	// The policy takes effect once the API server has loaded it.
	g.Eventually(func(g Gomega) {
		probe := stamp(ns[0], "", "probe")
		probe.SetGenerateName("probe-")
		probe.SetLabels(nil)
		probe.SetAnnotations(nil)
		g.Expect(k8s.Create(ctx, probe)).To(Succeed())
		defer func() { _ = k8s.Delete(ctx, probe) }()
		g.Expect(probe.GetAnnotations()).To(HaveKeyWithValue(added, "yes"))
	}, timeout, poll).Should(Succeed())

	source := stamp(src, "shared", "1")
	create(t, source)
	g.Eventually(status(source), timeout, poll).Should(Equal(fmt.Sprintf("%d/%d namespaces synced", targets, targets)))
	mirrorHas := func(size string) func(g Gomega) {
		return func(g Gomega) {
			for _, n := range ns {
				m, err := getCustom("Stamp", n, source.GetName())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(m).NotTo(BeNil())
				g.Expect(m.GetAnnotations()).To(HaveKeyWithValue(added, "yes"))
				g.Expect(m.Object["spec"]).To(HaveKeyWithValue("size", size))
			}
		}
	}
	g.Eventually(mirrorHas("1"), timeout, poll).Should(Succeed())

	// Mirror events that show the addition enqueue nothing: no reconcile
	// finds the mirrors unchanged.
	unchanged := metrics.SyncOperations.WithLabelValues("Stamp.example.com", clusterName, "unchanged")
	settled := testutil.ToFloat64(unchanged)
	g.Consistently(func() float64 { return testutil.ToFloat64(unchanged) }, 2*time.Second, poll).Should(Equal(settled),
		"the mirrors' own events reconciled their source again")

	// One update: each mirror written once, none read first, and their
	// events enqueue nothing.
	from := len(agent.requests.detailed())
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, objectKey(source), source); err != nil {
			return err
		}
		source.Object["spec"] = map[string]any{"size": "2"}
		return k8s.Update(ctx, source)
	})).To(Succeed())
	g.Eventually(mirrorHas("2"), timeout, poll).Should(Succeed())
	g.Consistently(func() float64 { return testutil.ToFloat64(unchanged) }, 2*time.Second, poll).Should(Equal(settled),
		"the mirrors' events after the update reconciled their source again")
	var reads, writes []string
	for _, r := range agent.requests.detailed()[from:] {
		for _, n := range ns {
			if strings.HasPrefix(r.URL.Path, "/apis/example.com/v1/namespaces/"+n+"/stamps") {
				if r.Method == http.MethodGet {
					reads = append(reads, r.URL.Path)
				} else {
					writes = append(writes, r.Method+" "+r.URL.Path)
				}
			}
		}
	}
	g.Expect(reads).To(BeEmpty(), "mirrors read before they were updated")
	g.Expect(writes).To(HaveLen(targets), "one write per mirror: %v", writes)
}
