package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Sources parked while a policy of their scope lists (release) are woken
// once: by the policy once its watches have synced, or by the scope's
// fallback when the policy never does, never by both. A delayed re-add
// of each key, as before, reconciled every source of a restarted agent a
// second time 30 s later.
func TestParkedSourcesWakeOnce(t *testing.T) {
	g := NewWithT(t)
	woken := make(chan Key, 16)
	const retry = 100 * time.Millisecond
	r := &Reconciler{enqueue: func(k Key) { woken <- k }, parkRetry: retry}
	key := func(ns, name string) Key { return Key{Cluster: local, GVK: secrets, Namespace: ns, Name: name} }
	policy := Key{Cluster: local, GVK: secrets, Namespace: "team", Name: "share", Policy: true}
	drain := func() []Key {
		var got []Key
		for {
			select {
			case k := <-woken:
				got = append(got, k)
			default:
				return got
			}
		}
	}

	// Woken by the policy: each once, and the fallback adds nothing.
	r.park(key("team", "a"))
	r.park(key("team", "b"))
	r.park(key("other", "c")) // another namespace: another scope
	r.unpark(policy, secrets)
	g.Expect(drain()).To(ConsistOf(key("team", "a"), key("team", "b")))
	// The other scope's fallback wakes c, and nothing else comes.
	g.Eventually(woken, time.Second).Should(Receive(Equal(key("other", "c"))))
	g.Consistently(woken, 3*retry).ShouldNot(Receive())

	// Never woken by a policy: the fallback wakes it, once; a policy
	// syncing later finds nothing parked.
	r.park(key("team", "d"))
	g.Eventually(woken, time.Second).Should(Receive(Equal(key("team", "d"))))
	r.unpark(policy, secrets)
	g.Consistently(woken, 3*retry).ShouldNot(Receive())
}
