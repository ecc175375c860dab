package member_test

import (
	"context"
	"maps"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// The sources and copies below are written the way each tool writes them,
// with the keys read from its source code (see peers.Proof): a source
// annotated for the tool, and the copy the tool made of it in another
// namespace, holding content older than the source's.

// peerSource is a Secret set up as tool's source pushing to target, not
// yet annotated for fleetmirror.
func peerSource(tool peers.Tool, ns, name, target string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "a"}, Annotations: map[string]string{}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("new")},
	}
	switch tool {
	case peers.Reflector:
		s.Annotations[peers.ReflectorAllowed] = "true"
		s.Annotations[peers.ReflectorAllowedNamespaces] = target
		s.Annotations[peers.ReflectorAutoEnabled] = "true"
		s.Annotations[peers.ReflectorAutoNamespaces] = target
	case peers.Replicator:
		s.Annotations[peers.ReplicatorReplicateTo] = target
	case peers.Kubemirror:
		s.Labels[peers.KubemirrorEnabled] = "true"
		s.Annotations[peers.KubemirrorSync] = "true"
		s.Annotations[peers.KubemirrorTargetNamespaces] = target
	}
	return s
}

// peerCopy is the copy tool made of src (as read back from the API server)
// in ns.
func peerCopy(tool peers.Tool, src *corev1.Secret, ns string) *corev1.Secret {
	c := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.Name},
		Type:       src.Type,
		Data:       map[string][]byte{"password": []byte("old")},
	}
	switch tool {
	case peers.Reflector:
		// ResourceMirror.ResourceReflect: no labels, four annotations.
		c.Annotations = map[string]string{
			peers.ReflectorAutoReflects:     "True",
			peers.ReflectorReflects:         src.Namespace + "/" + src.Name,
			peers.ReflectorReflectedVersion: src.ResourceVersion,
			peers.ReflectorReflectedAt:      "2026-05-01T10:00:00.0000000+00:00",
		}
	case peers.Replicator:
		// ReplicateObjectTo: the source's labels, three annotations.
		c.Labels = maps.Clone(src.Labels)
		c.Annotations = map[string]string{
			peers.ReplicatorReplicatedAt:          "2026-05-01T10:00:00Z",
			peers.ReplicatorReplicatedFromVersion: src.ResourceVersion,
			peers.ReplicatorReplicatedKeys:        "password",
		}
	case peers.Kubemirror:
		// createSecretMirror and buildMirrorAnnotations.
		c.Labels = map[string]string{peers.KubemirrorManagedByLabel: peers.KubemirrorManagedByValue, peers.KubemirrorMirror: "true"}
		c.Annotations = map[string]string{
			peers.KubemirrorSourceNamespace:                    src.Namespace,
			peers.KubemirrorSourceName:                         src.Name,
			peers.KubemirrorSourceUID:                          string(src.UID),
			peers.KubemirrorPrefix + "source-content-hash":     "0123456789abcdef",
			peers.KubemirrorPrefix + "last-sync-time":          "2026-05-01T10:00:00Z",
			peers.KubemirrorPrefix + "source-resource-version": src.ResourceVersion,
		}
	}
	return c
}

// copyKeys are the keys the tools write on their copies.
var copyKeys = []string{
	peers.ReflectorAutoReflects, peers.ReflectorReflects, peers.ReflectorReflectedVersion, peers.ReflectorReflectedAt,
	peers.ReplicatorReplicatedAt, peers.ReplicatorReplicatedFromVersion, peers.ReplicatorReplicatedKeys,
	peers.KubemirrorSourceNamespace, peers.KubemirrorSourceName, peers.KubemirrorSourceUID, peers.KubemirrorManagedByLabel, peers.KubemirrorMirror,
}

// enableFleetmirror annotates s for fleetmirror, as kubectl fleetmirror
// migrate --apply does, leaving the tool's keys in place.
func enableFleetmirror(s *corev1.Secret, target, adopt string) {
	s.Labels[annotations.LabelEnabled] = "true"
	s.Annotations[annotations.AnnotationSync] = "true"
	s.Annotations[annotations.AnnotationTargetNamespaces] = target
	if adopt != "" {
		s.Annotations[annotations.AnnotationAdopt] = adopt
	}
}

// Each tool's copy of the source is adopted in one write: the same object
// gets our labels, the source reference and the source's content; the
// source gets an Adopted Event; nothing is written to it afterwards; and,
// ours now, it goes with the source.
func TestAdoptProvenCopies(t *testing.T) {
	for _, tool := range peers.Annotated {
		t.Run(string(tool), func(t *testing.T) {
			g := NewWithT(t)
			ns := namespaces(t, "adopt-"+string(tool)+"-", nil, "src", "tgt")
			src := peerSource(tool, ns[0], "creds", ns[1])
			if tool == peers.Replicator {
				// The replicator records the resourceVersion it copied,
				// which changes with every write to the source, ours
				// included; it keeps its copies current while it runs.
				// Here the copy is made once the source is ours and its
				// version settled: the target namespace opts out until
				// then.
				change(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns[1]}}, func(n *corev1.Namespace) {
					n.Labels = map[string]string{annotations.LabelAllowMirrors: "false"}
				})
				enableFleetmirror(src, ns[1], "replicator")
			}
			create(t, src)
			if tool == peers.Replicator {
				g.Eventually(status(src), timeout, poll).Should(ContainSubstring("1 refused"))
			}
			theirs := peerCopy(tool, src, ns[1])
			create(t, theirs)
			if tool == peers.Replicator {
				change(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns[1]}}, func(n *corev1.Namespace) { n.Labels = nil })
			} else {
				change(t, src, func(s *corev1.Secret) { enableFleetmirror(s, ns[1], string(tool)+",replicator") })
			}

			eventuallyEventWith(t, ns[0], "creds", controller.ReasonAdopted, "Adopted proven copies of this source made by another tool; they are mirrors now: "+ns[1]+"/creds")
			ref := clusterName + "/" + ns[0] + "/creds"
			adopted := eventuallySecret(t, ns[1], "creds", func(g Gomega, s *corev1.Secret) {
				g.Expect(s.UID).To(Equal(theirs.UID), "the copy was replaced, not adopted")
				g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
				g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByMember))
				g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, ref))
				g.Expect(s.Data).To(Equal(map[string][]byte{"password": []byte("new")}))
			})
			for _, k := range copyKeys {
				g.Expect(adopted.Labels).NotTo(HaveKey(k))
				g.Expect(adopted.Annotations).NotTo(HaveKey(k))
			}
			g.Eventually(status(src), timeout, poll).Should(Equal("1/1 namespaces synced"))

			// Written once: no further write, no second Event.
			g.Consistently(secretState(ns[1], "creds"), settle, poll).Should(Equal(string(adopted.UID) + "@" + adopted.ResourceVersion))
			objects, repeat := eventSummary(ns[0], "creds", controller.ReasonAdopted)
			g.Expect([]int{objects, int(repeat)}).To(Equal([]int{1, 1}), "Adopted Events")
			g.Expect(eventsFor(ns[0], "creds", controller.ReasonTargetConflict)).To(BeEmpty())

			// An ordinary mirror now: it follows the source and goes with it.
			change(t, src, func(s *corev1.Secret) { s.Data["password"] = []byte("newer") })
			eventuallySecret(t, ns[1], "creds", func(g Gomega, s *corev1.Secret) {
				g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("newer")))
			})
			if err := k8s.Delete(context.Background(), src); err != nil {
				t.Fatal(err)
			}
			eventuallyGone(t, adopted)
		})
	}
}

// Only proven copies of this very source made by a listed tool are
// adopted. Every other object of the target name stays a TargetConflict
// that says why it was not adopted, and is never written; an unknown tool
// in the list is an InvalidAnnotation.
func TestAdoptRefusesUnproven(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "adopt-refuse", nil, "src", "plain", "other", "unlisted", "pull", "free")
	src := peerSource(peers.Reflector, ns[0], "app", "")
	create(t, src)
	other := *src
	other.Namespace = "elsewhere"
	pull := peerCopy(peers.Reflector, src, ns[4])
	pull.Annotations[peers.ReflectorAutoReflects] = "False"
	objs := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "app"}, Data: map[string][]byte{"password": []byte("theirs")}},
		peerCopy(peers.Reflector, &other, ns[2]),
		peerCopy(peers.Kubemirror, src, ns[3]),
		pull,
	}
	var before []string
	for _, o := range objs {
		create(t, o)
		before = append(before, secretState(o.Namespace, o.Name)())
	}
	state := func() []string {
		var out []string
		for _, o := range objs {
			out = append(out, secretState(o.Namespace, o.Name)())
		}
		return out
	}

	change(t, src, func(s *corev1.Secret) {
		enableFleetmirror(s, ns[1]+","+ns[2]+","+ns[3]+","+ns[4]+","+ns[5], "reflector, config-syncer")
	})
	eventuallySecret(t, ns[5], "app", nil)
	g.Eventually(status(src), timeout, poll).Should(Equal("1/5 namespaces synced; 4 conflicts"))
	eventuallyEvent(t, ns[0], "app", controller.ReasonInvalidAnnotation, annotations.AnnotationAdopt+`: ignored "config-syncer", not a tool`)
	eventuallyEventWith(t, ns[0], "app", controller.ReasonTargetConflict,
		ns[1]+"/app exists and is not managed by fleetmirror; not adopted: reflector: no "+peers.ReflectorReflects,
		ns[2]+`/app exists and is not managed by fleetmirror; not adopted: reflector: it reflects "elsewhere/app", not `+ns[0]+"/app",
		ns[3]+"/app exists and is not managed by fleetmirror; not adopted: reflector: no "+peers.ReflectorReflects,
		ns[4]+"/app exists and is not managed by fleetmirror; not adopted: reflector: it is a pull copy")
	g.Consistently(state, settle, poll).Should(Equal(before))
	g.Expect(eventsFor(ns[0], "app", controller.ReasonAdopted)).To(BeEmpty())

	// Still not ours: deleting the source leaves them all.
	deleteAndWait(t, src)
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[5], Name: "app"}})
	g.Expect(state()).To(Equal(before))
}

// Without fleetmirror.io/adopt a proven copy is a conflict as any other
// object: never written, and the message is today's.
func TestNoAdoptionUnlessAsked(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "adopt-unasked", nil, "src", "tgt")
	src := peerSource(peers.Reflector, ns[0], "app", ns[1])
	create(t, src)
	theirs := peerCopy(peers.Reflector, src, ns[1])
	create(t, theirs)
	before := secretState(ns[1], "app")()

	change(t, src, func(s *corev1.Secret) { enableFleetmirror(s, ns[1], "") })
	g.Eventually(status(src), timeout, poll).Should(Equal("0/1 namespaces synced; 1 conflict"))
	g.Expect(fleettest.EventMessages(fleet.Hub, ns[0], "app", controller.ReasonTargetConflict)).To(Equal([]string{"Not written, name taken: " + ns[1] + "/app exists and is not managed by fleetmirror"}))
	g.Consistently(secretState(ns[1], "app"), settle, poll).Should(Equal(before))
	g.Expect(eventsFor(ns[0], "app", controller.ReasonAdopted)).To(BeEmpty())
}
