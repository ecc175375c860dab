package member_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

func circuitOpen(kind string) float64 {
	v, _ := gaugeWith("fleetmirror_circuit_breaker_open", "kind", kind)
	return v
}

// gaugeWith returns the agent's gauge metric with label=value, and whether
// it exists.
func gaugeWith(metric, label, value string) (float64, bool) {
	series := fleettest.Gather(metrics.Registry).Series(metric, label, value)
	if len(series) == 0 {
		return 0, false
	}
	return series[0].GetGauge().GetValue(), true
}

// Issue 5, resilience: a source whose writes keep failing has its retries
// spaced out, shows it in status and metrics, and recovers after a success.
func TestCircuitBreaker(t *testing.T) {
	g := NewWithT(t)
	withAgent(t, "--circuit-breaker-failures=3", "--circuit-breaker-base-delay=300ms", "--circuit-breaker-max-delay=1s")
	ns := namespaces(t, "breaker", nil, "src", "full", "ok")
	// A ValidatingAdmissionPolicy refuses the mirror in one namespace, as a
	// policy engine or a full quota would.
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns[1]},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != 'stuck'", Message: "refused by test policy"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns[1]},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ns[1],
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns[1]},
			}},
		},
	}
	create(t, policy)
	create(t, binding)
	// Wait until the policy is in force.
	g.Eventually(func() error {
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "stuck"}}
		err := k8s.Create(context.Background(), probe, client.DryRunAll)
		if err == nil {
			return fmt.Errorf("policy not in force yet")
		}
		return nil
	}, timeout, poll).Should(Succeed())
	src := sourceSecret(ns[0], "stuck", ns[1]+","+ns[2], map[string]string{"k": "v"})
	create(t, src)

	eventuallySecret(t, ns[2], "stuck", nil) // the healthy target is not held up
	g.Eventually(status(src), timeout, poll).Should(ContainSubstring("retries backing off"))
	g.Eventually(func() float64 { return circuitOpen("Secret") }, timeout, poll).Should(BeNumerically(">=", 1))

	g.Expect(k8s.Delete(context.Background(), binding)).To(Succeed())
	eventuallySecret(t, ns[1], "stuck", nil)
	g.Eventually(status(src), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Eventually(func() float64 { return circuitOpen("Secret") }, timeout, poll).Should(BeZero())
}
