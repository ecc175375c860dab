package policy_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// The CRD as generated (make generate), on a real API server: what its
// schema can say about a policy is refused there, with a message that
// names the field.
func TestMirrorPolicyCRD(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	crds, err := fleettest.InstallPolicyCRD(fleet.Hub.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).To(HaveLen(1))

	// Printer columns for kubectl get mirrorpolicies.
	var columns []string
	for _, c := range crds[0].Spec.Versions[0].AdditionalPrinterColumns {
		columns = append(columns, c.Name)
	}
	g.Expect(columns).To(ContainElements("Kind", "Sources", "Synced", "Ready", "Age"))
	g.Expect(crds[0].Spec.Scope).To(Equal(apiextensionsv1.NamespaceScoped))

	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(fleet.Hub.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}})).To(Succeed())

	policy := func(name string, fn func(*v1alpha1.MirrorPolicySpec)) *v1alpha1.MirrorPolicy {
		p := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
			Spec: v1alpha1.MirrorPolicySpec{
				Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db-credentials"}},
				TargetNamespaces: []string{"team-*", "prod-*/shared"},
			}}
		if fn != nil {
			fn(&p.Spec)
		}
		return p
	}
	valid := policy("valid", nil)
	g.Expect(c.Create(ctx, valid)).To(Succeed())
	bySelector := policy("by-selector", func(s *v1alpha1.MirrorPolicySpec) {
		s.Source = v1alpha1.PolicySource{APIVersion: "postgres-operator.crunchydata.com/v1beta1", Kind: "PGUser",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}
		s.MaxTargets = ptr.To[int32](3)
	})
	g.Expect(c.Create(ctx, bySelector)).To(Succeed())
	triggered := policy("triggered", func(s *v1alpha1.MirrorPolicySpec) {
		s.TargetNamespaces = []string{"all", "team-*"}
		s.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"test-org"},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"create-secret": "true"}}}
	})
	g.Expect(c.Create(ctx, triggered)).To(Succeed())

	// The status is a subresource: the agent writes it, a user's update of
	// the spec does not.
	valid.Status = v1alpha1.MirrorPolicyStatus{Sources: 1, TargetsSynced: 2, Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced", Message: "2 mirrors", LastTransitionTime: metav1.Now()}}}
	g.Expect(c.Status().Update(ctx, valid)).To(Succeed())
	got := &v1alpha1.MirrorPolicy{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(valid), got)).To(Succeed())
	g.Expect(got.Status.TargetsSynced).To(Equal(int32(2)))

	for _, tt := range []struct {
		name string
		fn   func(*v1alpha1.MirrorPolicySpec)
		want string
	}{
		{"names and selector", func(s *v1alpha1.MirrorPolicySpec) {
			s.Source.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, "set exactly one of names and selector"},
		{"neither names nor selector", func(s *v1alpha1.MirrorPolicySpec) { s.Source.Names = nil }, "set exactly one of names and selector"},
		{"empty selector", func(s *v1alpha1.MirrorPolicySpec) {
			s.Source.Names, s.Source.Selector = nil, &metav1.LabelSelector{}
		}, "an empty selector would select every object of the kind"},
		{"no names", func(s *v1alpha1.MirrorPolicySpec) { s.Source.Names = []string{} }, "spec.source"},
		{"bad name", func(s *v1alpha1.MirrorPolicySpec) { s.Source.Names = []string{"Not_A_Name"} }, "spec.source.names[0]"},
		{"bad kind", func(s *v1alpha1.MirrorPolicySpec) { s.Source.Kind = "secret" }, "spec.source.kind"},
		{"bad apiVersion", func(s *v1alpha1.MirrorPolicySpec) { s.Source.APIVersion = "apps/v1/x" }, "spec.source.apiVersion"},
		{"comma in an entry", func(s *v1alpha1.MirrorPolicySpec) { s.TargetNamespaces = []string{"a,b"} }, "spec.targetNamespaces[0]"},
		{"repeated entry", func(s *v1alpha1.MirrorPolicySpec) { s.TargetNamespaces = []string{"a", "a"} }, "spec.targetNamespaces[1]"},
		{"max targets 0", func(s *v1alpha1.MirrorPolicySpec) { s.MaxTargets = ptr.To[int32](0) }, "spec.maxTargets"},
		{"trigger with CLUSTER/NS entries", func(s *v1alpha1.MirrorPolicySpec) {
			s.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap"}
		}, "a trigger narrows the targets of the source's own cluster"},
		{"trigger with a cluster selector", func(s *v1alpha1.MirrorPolicySpec) {
			s.TargetNamespaces, s.TargetClusterSelector = []string{"all"}, ptr.To("env=prod")
			s.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap"}
		}, "a trigger narrows the targets of the source's own cluster"},
		{"trigger of a bad kind", func(s *v1alpha1.MirrorPolicySpec) {
			s.TargetNamespaces = []string{"all"}
			s.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "configmap"}
		}, "spec.trigger.kind"},
		{"trigger of a bad name", func(s *v1alpha1.MirrorPolicySpec) {
			s.TargetNamespaces = []string{"all"}
			s.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"Not_A_Name"}}
		}, "spec.trigger.names[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Create(context.Background(), policy("invalid", tt.fn))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}
