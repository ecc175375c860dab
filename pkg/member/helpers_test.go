package member_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

const (
	timeout = 20 * time.Second
	poll    = 50 * time.Millisecond
)

var nsCounter atomic.Int64

// namespaces creates fresh namespaces named <prefix><n>-<suffix> and returns
// their names in the order of suffixes.
func namespaces(t *testing.T, prefix string, labels map[string]string, suffixes ...string) []string {
	t.Helper()
	n := nsCounter.Add(1)
	var out []string
	for _, s := range suffixes {
		name := fmt.Sprintf("%s%d-%s", prefix, n, s)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := k8s.Create(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	return out
}

// sourceSecret returns an enabled, synced Secret targeting targets.
func sourceSecret(ns, name, targets string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{
				annotations.AnnotationSync:             "true",
				annotations.AnnotationTargetNamespaces: targets,
			},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: data,
	}
	return s
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// change re-reads obj, applies fn and updates it, retrying on conflicts.
func change[T client.Object](t *testing.T, obj T, fn func(T)) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		fn(obj)
		return k8s.Update(ctx, obj)
	}, timeout, poll).Should(Succeed())
}

// getSecret returns the Secret or nil when it does not exist.
func getSecret(ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}

// eventuallySecret waits until ns/name exists and check passes on it.
func eventuallySecret(t *testing.T, ns, name string, check func(g Gomega, s *corev1.Secret)) *corev1.Secret {
	t.Helper()
	var got *corev1.Secret
	NewWithT(t).Eventually(func(g Gomega) {
		s, err := getSecret(ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s).NotTo(BeNil(), "secret %s/%s does not exist", ns, name)
		if check != nil {
			check(g, s)
		}
		got = s
	}, timeout, poll).Should(Succeed())
	return got
}

// eventuallyGone waits until ns/name of obj's kind does not exist.
func eventuallyGone(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}, timeout, poll).Should(BeTrue(), "%s/%s still exists", obj.GetNamespace(), obj.GetName())
}

// consistentlyAbsent checks that ns/name never appears for a while. It is
// used only after the agent has provably acted on the same source.
func consistentlyAbsent(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Consistently(func() *corev1.Secret {
		s, _ := getSecret(ns, name)
		return s
	}, 2*time.Second, 100*time.Millisecond).Should(BeNil(), "secret %s/%s should not exist", ns, name)
}

// eventsFor lists the events about the object ns/name with reason.
func eventsFor(ns, name, reason string) []corev1.Event {
	var list corev1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// eventuallyEvent waits for an event with reason whose message holds substr.
func eventuallyEvent(t *testing.T, ns, name, reason, substr string) {
	t.Helper()
	NewWithT(t).Eventually(func() string {
		var msgs []string
		for _, e := range eventsFor(ns, name, reason) {
			msgs = append(msgs, e.Message)
		}
		return strings.Join(msgs, "\n")
	}, timeout, poll).Should(ContainSubstring(substr))
}

// status returns the fleetmirror.io/status annotation of the source.
func status(obj client.Object) func() string {
	return func() string {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err.Error()
		}
		return obj.GetAnnotations()[annotations.AnnotationStatus]
	}
}
