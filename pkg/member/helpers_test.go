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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
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

// wait is how long this suite waits for the agent, and how often it looks.
var wait = fleettest.Wait{Timeout: timeout, Poll: poll}

// sourceSecret returns an enabled, synced Secret targeting targets.
func sourceSecret(ns, name, targets string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: fleettest.SourceMeta(ns, name, targets), Type: corev1.SecretTypeOpaque, StringData: data}
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
	fleettest.Change(t, wait, fleet.Hub, obj, fn)
}

// getSecret returns the Secret or nil when it does not exist.
func getSecret(ns, name string) (*corev1.Secret, error) {
	return fleettest.Lookup(fleet.Hub, fleettest.Secret(ns, name))
}

// eventuallySecret waits until ns/name exists and check passes on it.
func eventuallySecret(t *testing.T, ns, name string, check func(g Gomega, s *corev1.Secret)) *corev1.Secret {
	t.Helper()
	return fleettest.EventuallyExists(t, wait, fleet.Hub, fleettest.Secret(ns, name), check)
}

// eventuallyGone waits until ns/name of obj's kind does not exist.
func eventuallyGone(t *testing.T, obj client.Object) {
	t.Helper()
	fleettest.EventuallyGone(t, wait, fleet.Hub, obj)
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
	return fleettest.Events(fleet.Hub, ns, name, reason)
}

// eventuallyEvent waits for an event with reason whose message holds substr.
func eventuallyEvent(t *testing.T, ns, name, reason, substr string) {
	t.Helper()
	NewWithT(t).Eventually(func() string {
		return strings.Join(fleettest.EventMessages(fleet.Hub, ns, name, reason), "\n")
	}, timeout, poll).Should(ContainSubstring(substr))
}

// status returns the fleetmirror.io/status annotation of the source.
func status(obj client.Object) func() string { return fleettest.Status(fleet.Hub, obj) }
