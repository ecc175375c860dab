package member_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// pullFieldManager names the member agent's pull writes.
const pullFieldManager = member.FieldManager + "-pull"

// pullSource returns a Secret that pull mirrors in the namespaces allow
// may copy: enabled, not synced (a pull needs no push).
func pullSource(ns, name, allow string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{annotations.LabelEnabled: "true"}},
		Type:       corev1.SecretTypeOpaque, StringData: data,
	}
	if allow != "" {
		s.Annotations = map[string]string{annotations.AnnotationAllowPullInto: allow}
	}
	return s
}

// pullMirror returns a Secret that asks for the content of from, as its
// namespace's owner would create it: with a label and data of their own.
func pullMirror(ns, name, from string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels:      map[string]string{annotations.LabelPull: "true", "team": "a"},
			Annotations: map[string]string{annotations.AnnotationMirrorFrom: from},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"own": []byte("mine")},
	}
}

// managers returns the field managers of s and the fields each manages.
func managers(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for _, mf := range s.ManagedFields {
		if mf.FieldsV1 != nil {
			out[mf.Manager] += mf.FieldsV1.GetRawString()
		}
	}
	return out
}

// The owner of a namespace asks for a source's content; the source's
// owner allows it. The content arrives under our pull field manager and
// only the content: the owner's own data, labels and other fields are
// left as they are, and no mirror label is added. Changes of the source
// follow; a withdrawn consent or a deleted source leaves the last content
// in place with a Warning, and the pull mirror is never deleted.
func TestPullMirror(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "pull", nil, "src", "dst")
	src := pullSource(ns[0], "db", ns[1], map[string]string{"user": "admin", "password": "v1"})
	create(t, src)
	dst := pullMirror(ns[1], "db-copy", ns[0]+"/db")
	create(t, dst)

	got := eventuallySecret(t, ns[1], "db-copy", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(Equal(map[string][]byte{"user": []byte("admin"), "password": []byte("v1"), "own": []byte("mine")}))
		g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "InSync: pulled from "+ns[0]+"/db"))
	})
	g.Expect(got.UID).To(Equal(dst.UID), "written in place, never created")
	g.Expect(got.Labels).To(Equal(map[string]string{annotations.LabelPull: "true", "team": "a"}), "no label of ours")
	g.Expect(got.Annotations).To(HaveKey(annotations.AnnotationContentHash))
	g.Expect(got.Annotations).To(HaveKeyWithValue(annotations.AnnotationMirrorFrom, ns[0]+"/db"))
	m := managers(got)
	g.Expect(m[pullFieldManager]).To(And(ContainSubstring(`"f:user"`), ContainSubstring(`"f:password"`), ContainSubstring(`"f:fleetmirror.io/content-hash"`)))
	g.Expect(m[pullFieldManager]).NotTo(Or(ContainSubstring(`"f:own"`), ContainSubstring(`"f:labels"`), ContainSubstring(`"f:fleetmirror.io/status"`)),
		"the pull field manager holds the content and its hash, nothing else")
	g.Expect(m[member.FieldManager]).To(ContainSubstring(`"f:fleetmirror.io/status"`))
	g.Expect(m[member.FieldManager]).NotTo(ContainSubstring(`"f:data"`), "the status is patched apart from the content")
	eventuallyEvent(t, ns[1], "db-copy", controller.ReasonPulled, "Wrote the content of "+ns[0]+"/db")

	// A source change reaches the pull mirror; a key the source drops is
	// dropped, the owner's own key stays.
	change(t, src, func(s *corev1.Secret) {
		s.Data["password"] = []byte("v2")
		delete(s.Data, "user")
	})
	eventuallySecret(t, ns[1], "db-copy", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(Equal(map[string][]byte{"password": []byte("v2"), "own": []byte("mine")}))
	})

	// Consent withdrawn: the content stays, with a Warning, and nothing is
	// written but the status.
	change(t, src, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationAllowPullInto] = "someone-else" })
	eventuallyEventWith(t, ns[1], "db-copy", controller.ReasonPullNotAllowed, "does not allow pulls into "+ns[1], "the content pulled last is kept")
	g.Eventually(status(dst), timeout, poll).Should(HavePrefix("NotAllowed: "))
	consistentlyUnchanged(t, ns[1], "db-copy")
	g.Expect(mustSecret(t, ns[1], "db-copy").Data).To(HaveKeyWithValue("password", []byte("v2")))

	// Consent given again, and a change: it flows again.
	change(t, src, func(s *corev1.Secret) {
		s.Annotations[annotations.AnnotationAllowPullInto] = "pull*"
		s.Data["password"] = []byte("v3")
	})
	eventuallySecret(t, ns[1], "db-copy", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("v3")))
		g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "InSync: pulled from "+ns[0]+"/db"))
	})

	// The source deleted: the pull mirror keeps its last content, gets a
	// Warning, and is never deleted.
	if err := k8s.Delete(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	eventuallyEventWith(t, ns[1], "db-copy", controller.ReasonPullSourceMissing, "the source "+ns[0]+"/db does not exist", "the content pulled last is kept")
	g.Eventually(status(dst), timeout, poll).Should(HavePrefix("SourceMissing: "))
	consistentlyUnchanged(t, ns[1], "db-copy")
	kept := mustSecret(t, ns[1], "db-copy")
	g.Expect(kept.UID).To(Equal(dst.UID))
	g.Expect(kept.Data).To(Equal(map[string][]byte{"password": []byte("v3"), "own": []byte("mine")}))

	// A source of the same name created again, with consent: pulled.
	create(t, pullSource(ns[0], "db", ns[1], map[string]string{"password": "v4"}))
	eventuallySecret(t, ns[1], "db-copy", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(Equal(map[string][]byte{"password": []byte("v4"), "own": []byte("mine")}))
	})

	// The pull label removed: the object is the owner's alone again.
	change(t, dst, func(s *corev1.Secret) { delete(s.Labels, annotations.LabelPull) })
	src2 := mustSecret(t, ns[0], "db")
	change(t, src2, func(s *corev1.Secret) { s.Data["password"] = []byte("v5") })
	consistentlyUnchanged(t, ns[1], "db-copy")
	g.Expect(mustSecret(t, ns[1], "db-copy").Data).To(HaveKeyWithValue("password", []byte("v4")))
}

// A pull mirror whose owner also manages a field of the content keeps the
// owner's value: the agent never forces, and says which field is in the
// way.
func TestPullConflictingField(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "pullconf", nil, "src", "dst")
	create(t, pullSource(ns[0], "cfg", ns[1], map[string]string{"k": "source", "other": "x"}))
	dst := pullMirror(ns[1], "cfg", ns[0]+"/cfg")
	dst.Data["k"] = []byte("owner")
	create(t, dst)

	eventuallyEventWith(t, ns[1], "cfg", controller.ReasonPullConflict, ".data.k")
	g.Eventually(status(dst), timeout, poll).Should(HavePrefix("Conflict: "))
	got := mustSecret(t, ns[1], "cfg")
	g.Expect(got.Data).To(HaveKeyWithValue("k", []byte("owner")), "never forced")
	g.Expect(got.Data).NotTo(HaveKey("other"), "an apply is all or nothing")

	// The owner gives the field up: the content arrives.
	change(t, dst, func(s *corev1.Secret) { delete(s.Data, "k") })
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(HaveKeyWithValue("k", []byte("source")))
		g.Expect(s.Data).To(HaveKeyWithValue("other", []byte("x")))
	})
}

// Every refusal is a Warning Event on the pull mirror saying why, and
// nothing is written to it but the status annotation, once (a pull mirror
// that is a source gets not even that: the status there is the source's).
func TestPullRefusals(t *testing.T) {
	ns := namespaces(t, "pullref", nil, "src", "dst", "other", "push")
	create(t, pullSource(ns[0], "closed", "", map[string]string{"k": "v"}))
	create(t, pullSource(ns[0], "elsewhere", ns[2], map[string]string{"k": "v"}))
	tls := pullSource(ns[0], "tls", "*", map[string]string{"tls.crt": "c", "tls.key": "k"})
	tls.Type = corev1.SecretTypeTLS
	create(t, tls)
	create(t, pullSource(ns[0], "open", "*", map[string]string{"k": "v"}))
	// A push mirror in ns[3], which is no source.
	create(t, sourceSecret(ns[0], "pushed", ns[3], map[string]string{"k": "v"}))
	eventuallySecret(t, ns[3], "pushed", nil)

	for _, tc := range []struct {
		name, from string
		// labels are added to the pull mirror's.
		labels map[string]string
		reason string
		msg    string
		// noStatus: the status annotation is not written.
		noStatus bool
	}{
		{name: "no-consent", from: ns[0] + "/closed", reason: controller.ReasonPullNotAllowed, msg: "has no " + annotations.AnnotationAllowPullInto},
		{name: "not-into-this", from: ns[0] + "/elsewhere", reason: controller.ReasonPullNotAllowed, msg: "does not allow pulls into " + ns[1]},
		{name: "missing", from: ns[0] + "/nothing", reason: controller.ReasonPullSourceMissing, msg: "does not exist"},
		{name: "mirror", from: ns[3] + "/pushed", reason: controller.ReasonPullRefused, msg: "is itself a mirror (of " + clusterName + "/" + ns[0] + "/pushed)"},
		{name: "malformed", from: ns[0] + "/a/b/c", reason: controller.ReasonInvalidAnnotation, msg: "write NAMESPACE/NAME"},
		{name: "bad-name", from: ns[0] + "/Open", reason: controller.ReasonInvalidAnnotation, msg: `name "Open" is not a valid name`},
		{name: "type", from: ns[0] + "/tls", reason: controller.ReasonPullRefused, msg: "type Opaque differs from the source's kubernetes.io/tls"},
		{name: "is-source", from: ns[0] + "/open", labels: map[string]string{annotations.LabelEnabled: "true"},
			reason: controller.ReasonPullRefused, msg: "it is itself a source", noStatus: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dst := pullMirror(ns[1], tc.name, tc.from)
			for k, v := range tc.labels {
				dst.Labels[k] = v
			}
			create(t, dst)
			eventuallyEventWith(t, ns[1], tc.name, tc.reason, tc.msg)
			if !tc.noStatus {
				g.Eventually(status(dst), timeout, poll).Should(And(ContainSubstring(tc.msg), HaveSuffix("nothing pulled yet")))
			}
			consistentlyUnchanged(t, ns[1], tc.name)
			got := mustSecret(t, ns[1], tc.name)
			g.Expect(got.Data).To(Equal(map[string][]byte{"own": []byte("mine")}))
			g.Expect(got.Labels).To(Equal(dst.Labels))
			g.Expect(got.Annotations).NotTo(HaveKey(annotations.AnnotationContentHash))
			g.Expect(managers(got)).NotTo(HaveKey(pullFieldManager))
			if tc.noStatus {
				g.Expect(got.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
				g.Expect(got.ResourceVersion).To(Equal(dst.ResourceVersion), "not written at all")
			}
		})
	}

	// A namespace opted out of mirrors takes no pulled content either.
	optedOut := namespaces(t, "pulloptout", map[string]string{annotations.LabelAllowMirrors: "false"}, "dst")[0]
	x := pullMirror(optedOut, "x", ns[0]+"/open")
	create(t, x)
	eventuallyEventWith(t, optedOut, "x", controller.ReasonPullRefused, annotations.LabelAllowMirrors+"=false")
	// The refusal's status, written after its Event (a loaded machine
	// showed the write 67 ms after the Event), and nothing after it.
	g := NewWithT(t)
	g.Eventually(status(x), timeout, poll).Should(And(ContainSubstring(annotations.LabelAllowMirrors+"=false"), HaveSuffix("nothing pulled yet")))
	consistentlyUnchanged(t, optedOut, "x")
	g.Expect(mustSecret(t, optedOut, "x").Data).To(Equal(map[string][]byte{"own": []byte("mine")}))
}

// mustSecret reads a Secret that must exist.
func mustSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := getSecret(ns, name)
	if err != nil || s == nil {
		t.Fatalf("secret %s/%s: %v (exists: %t)", ns, name, err, s != nil)
	}
	return s
}

// consistentlyUnchanged checks that ns/name is not written for a while,
// once the agent has provably acted on it.
func consistentlyUnchanged(t *testing.T, ns, name string) {
	t.Helper()
	before := secretState(ns, name)()
	if strings.HasPrefix(before, "missing") {
		t.Fatalf("secret %s/%s does not exist", ns, name)
	}
	NewWithT(t).Consistently(secretState(ns, name), settle, poll).Should(Equal(before), "secret %s/%s was written", ns, name)
}

// A restart with nothing changed writes nothing to a pull mirror in sync,
// nor to one refused, and reads neither them nor their sources: the caches
// answer. A pull mirror created after the restart proves the new agent
// works.
func TestPullRestartWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "pullsteady", nil, "src", "dst")
	create(t, pullSource(ns[0], "db", ns[1], map[string]string{"k": "v"}))
	create(t, pullSource(ns[0], "closed", "", map[string]string{"k": "v"}))
	synced := pullMirror(ns[1], "synced", ns[0]+"/db")
	create(t, synced)
	refused := pullMirror(ns[1], "refused", ns[0]+"/closed")
	create(t, refused)
	g.Eventually(status(synced), timeout, poll).Should(HavePrefix("InSync: "))
	g.Eventually(status(refused), timeout, poll).Should(HavePrefix("NotAllowed: "))
	before := []string{secretState(ns[1], "synced")(), secretState(ns[1], "refused")()}

	start := stopAgent(t)
	start()
	probe := pullMirror(ns[1], "probe", ns[0]+"/db")
	create(t, probe)
	g.Eventually(status(probe), timeout, poll).Should(HavePrefix("InSync: "))

	touching := func() []string {
		var out []string
		for _, r := range agent.requests.detailed() {
			for _, n := range ns {
				if dir := "/api/v1/namespaces/" + n + "/secrets/"; strings.HasPrefix(r.URL.Path, dir) && !strings.HasSuffix(r.URL.Path, "/probe") {
					out = append(out, r.Method+" "+r.URL.RequestURI())
				}
			}
		}
		return out
	}
	g.Consistently(touching, settle, poll).Should(BeEmpty(), "requests about pull mirrors and sources that did not change")
	g.Expect([]string{secretState(ns[1], "synced")(), secretState(ns[1], "refused")()}).To(Equal(before))
}
