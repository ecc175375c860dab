package member_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// pastLogs holds the request logs of every agent stopped so far, so that
// the efficiency test sees every request any agent of this suite sent.
var pastLogs []*requestLog

// allRequests returns the requests of every agent of the suite so far.
func allRequests() []request {
	var out []request
	for _, l := range append(slices.Clone(pastLogs), agent.requests) {
		out = append(out, l.detailed()...)
	}
	return out
}

// stopAgent stops the shared agent and makes sure that, whatever happens in
// the test, an agent with the default flags runs again afterwards. It returns
// the function that starts the next agent (extra flags allowed); that agent
// becomes the shared one.
func stopAgent(t *testing.T) (start func(extraArgs ...string)) {
	t.Helper()
	pastLogs = append(pastLogs, agent.requests)
	agent.stop()
	running := false
	t.Cleanup(func() {
		if !running {
			agent = startAgent()
		}
	})
	return func(extraArgs ...string) {
		if running {
			t.Fatal("agent already restarted")
		}
		agent = startAgent(extraArgs...)
		running = true
	}
}

// withAgent replaces the shared agent by one with extra flags for the rest
// of the test; the default agent comes back at cleanup.
func withAgent(t *testing.T, extraArgs ...string) {
	t.Helper()
	start := stopAgent(t)
	start(extraArgs...)
	t.Cleanup(func() {
		pastLogs = append(pastLogs, agent.requests)
		agent.stop()
		agent = startAgent()
	})
}

// createNamespace creates a namespace with an exact name.
func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}

// nsGlob turns a name made by namespaces() into a glob over its suffix: the
// counter part stays, so the glob reaches only this test's namespaces.
func nsGlob(name, suffixPrefix string) string {
	i := strings.Index(name, "-")
	return name[:i+1] + suffixPrefix + "*"
}

// sourceConfigMap returns an enabled, synced ConfigMap targeting targets.
func sourceConfigMap(ns, name, targets string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: fleettest.SourceMeta(ns, name, targets), Data: data}
}

// eventuallyConfigMap waits until ns/name exists and check passes on it.
func eventuallyConfigMap(t *testing.T, ns, name string, check func(g Gomega, c *corev1.ConfigMap)) *corev1.ConfigMap {
	t.Helper()
	return fleettest.EventuallyExists(t, wait, fleet.Hub, fleettest.ConfigMap(ns, name), check)
}

// secretsIn returns which of nss hold a Secret called name, as `kubectl get`
// would show it.
func secretsIn(name string, nss ...string) []string {
	var out []string
	for _, ns := range nss {
		if s, err := getSecret(ns, name); err == nil && s != nil {
			out = append(out, ns)
		}
	}
	return out
}

// secretState is what must not change of an object we must not touch.
func secretState(ns, name string) func() string {
	return func() string {
		s, err := getSecret(ns, name)
		if err != nil || s == nil {
			return "missing"
		}
		return string(s.UID) + "@" + s.ResourceVersion
	}
}

// deleteWithoutAgent deletes a source while the agent is down and waits
// until it is gone: nothing of ours holds it.
func deleteWithoutAgent(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	eventuallyGone(t, obj)
}

// deleteAndWait deletes a source and waits until it is gone and the agent
// has removed its last mirror. Sources targeting many namespaces use it at
// cleanup so they do not reach later tests' namespaces.
func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	err := k8s.Delete(context.Background(), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	eventuallyGone(t, obj)
	NewWithT(t).Eventually(func(g Gomega) []string { return mirrorsOf(g, obj) }, timeout, poll).Should(BeEmpty())
}

// mirrorsOf lists the namespaces that hold a mirror of the source obj.
func mirrorsOf(g Gomega, obj client.Object) []string {
	gvk, err := apiutil.GVKForObject(obj, k8s.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	g.Expect(k8s.List(context.Background(), list, client.MatchingLabels{annotations.LabelMirror: "true"})).To(Succeed())
	ref := desired.SourceRef(clusterName, obj.GetNamespace(), obj.GetName())
	var in []string
	for _, m := range list.Items {
		if m.GetAnnotations()[annotations.AnnotationSource] == ref {
			in = append(in, m.GetNamespace())
		}
	}
	return in
}

// eventSummary describes the events with reason about ns/name: how many
// Event objects there are and the highest repeat count any of them carries
// (count or series.count, whichever API wrote it).
func eventSummary(ns, name, reason string) (objects int, maxRepeat int32) {
	for _, e := range eventsFor(ns, name, reason) {
		objects++
		n := max(e.Count, 1)
		if e.Series != nil {
			n = max(n, e.Series.Count)
		}
		maxRepeat = max(maxRepeat, n)
	}
	return objects, maxRepeat
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := fleettest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// settle is how long Consistently watches for something that must not
// happen, once the agent has provably acted on the object concerned.
const settle = 2 * time.Second

func objectKey(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// eventuallyEventWith waits for an event with reason whose message holds
// every one of parts.
func eventuallyEventWith(t *testing.T, ns, name, reason string, parts ...string) {
	t.Helper()
	NewWithT(t).Eventually(func() []string {
		return fleettest.EventMessages(fleet.Hub, ns, name, reason)
	}, timeout, poll).Should(ContainElement(And(func() []types.GomegaMatcher {
		var ms []types.GomegaMatcher
		for _, p := range parts {
			ms = append(ms, ContainSubstring(p))
		}
		return ms
	}()...)))
}
