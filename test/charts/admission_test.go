package charts_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// The API server of the tests that need one, started by the first of them
// and stopped by TestMain.
var (
	serverOnce sync.Once
	server     *fleettest.Fleet
	serverErr  error
)

// apiServer returns an envtest API server (the hub of a fleet without
// members), skipping the test under -short.
func apiServer(t *testing.T) *fleettest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an API server (envtest); skipped under -short")
	}
	serverOnce.Do(func() { server, serverErr = fleettest.Start("") })
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return server.Hub
}

// stopAPIServer stops the API server apiServer started, if any.
func stopAPIServer() error {
	if server == nil {
		return nil
	}
	return server.Stop()
}

// warnings collects the warnings the API server returns to a client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// take returns the warnings collected since the last call.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// warningClient is a clientset whose warnings land in the returned collector.
func warningClient(t *testing.T, cfg *rest.Config) (*kubernetes.Clientset, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = w
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, w
}

// applyRendered creates (or replaces) the objects of kinds in ms on the API
// server and deletes them at the end of the test.
func applyRendered(ctx context.Context, t *testing.T, c client.Client, ms Manifests, kinds ...string) {
	t.Helper()
	for _, o := range ms {
		var obj client.Object
		switch o.Kind {
		case "ValidatingAdmissionPolicy":
			obj = &admissionv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionv1.ValidatingAdmissionPolicyBinding{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		default:
			continue
		}
		if !slices.Contains(kinds, o.Kind) {
			continue
		}
		o.Decode(t, obj)
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s: %v", o.Kind, o.Name, err)
		}
		t.Cleanup(func() {
			if err := c.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", o.Kind, o.Name, err)
			}
		})
	}
}

// createSecret creates a Secret (server-side dry run unless persist) with
// the labels and annotations and returns the warnings it drew and the error.
func createSecret(ctx context.Context, cs *kubernetes.Clientset, w *warnings, ns string, lbls, anns map[string]string) ([]string, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "s-", Namespace: ns, Labels: lbls, Annotations: anns}}
	w.take()
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return w.take(), err
}

// ours returns the warnings of the policy named policy.
func ours(msgs []string, policy string) []string {
	var out []string
	for _, m := range msgs {
		if strings.Contains(m, "'"+policy+"'") {
			out = append(out, m)
		}
	}
	return out
}

var (
	enabled = map[string]string{annotations.LabelEnabled: "true"}
	mirror  = map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByMember}
	pull    = map[string]string{annotations.LabelPull: "true"}
)

// TestAdmissionPolicyOnAPIServer installs the admission policies of both
// charts (one release each, as on a hub's own cluster) on a real API server
// and checks what a user sees when creating Secrets: a warning naming the
// problem and its fix for each mistake, none for a correct source or a
// mirror, and, with action Deny, a refusal (except for the agent itself).
func TestAdmissionPolicyOnAPIServer(t *testing.T) {
	api := apiServer(t)
	g := NewWithT(t)
	ctx := context.Background()
	cs, w := warningClient(t, api.Config)
	ns := "default"

	member, hub := render(t, "member", nil), render(t, "hub", nil)
	applyRendered(ctx, t, api.Client, member, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	applyRendered(ctx, t, api.Client, hub, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	memberPolicy := member.Get(t, "ValidatingAdmissionPolicy", "-annotations").Name
	hubPolicy := hub.Get(t, "ValidatingAdmissionPolicy", "-annotations").Name

	// A policy serves once the API server has type-checked it.
	typo := map[string]string{annotations.AnnotationSync: "true", "fleetmirror.io/target-namespace": "team-a"}
	g.Eventually(func() []string {
		msgs, err := createSecret(ctx, cs, w, ns, enabled, typo)
		g.Expect(err).NotTo(HaveOccurred())
		return msgs
	}, 30*time.Second, 200*time.Millisecond).Should(And(
		ContainElement(ContainSubstring("'"+memberPolicy+"'")),
		ContainElement(ContainSubstring("'"+hubPolicy+"'"))))
	for _, name := range []string{memberPolicy, hubPolicy} {
		var p admissionv1.ValidatingAdmissionPolicy
		g.Expect(api.Client.Get(ctx, client.ObjectKey{Name: name}, &p)).To(Succeed())
		if p.Status.TypeChecking != nil && len(p.Status.TypeChecking.ExpressionWarnings) > 0 {
			t.Errorf("policy %s: type checking warnings %+v", name, p.Status.TypeChecking.ExpressionWarnings)
		}
	}

	for _, tc := range []struct {
		name       string
		lbls, anns map[string]string
		want       []string // substrings of the member policy's warnings, one per warning
	}{
		{"correct source", enabled, map[string]string{
			annotations.AnnotationSync:             "true",
			annotations.AnnotationTargetNamespaces: "team-a, app-*, team-?, all-labeled, prod-*/team-b, cluster.example.com/all",
			annotations.AnnotationMaxTargets:       "3",
		}, nil},
		{"correct source with selectors", enabled, map[string]string{
			annotations.AnnotationSync:                    "true",
			annotations.AnnotationTargetNamespaceSelector: "team in (payments, web), !legacy",
			annotations.AnnotationTargetClusterSelector:   "env=prod",
		}, nil},
		{"source switched off", enabled, map[string]string{annotations.AnnotationSync: "false", annotations.AnnotationStatus: "0/0 mirrors"}, nil},
		{"mirror", mirror, map[string]string{
			annotations.AnnotationSource: "local/default/app", annotations.AnnotationSourceUID: "1234",
			annotations.AnnotationSourceResourceVersion: "42", annotations.AnnotationContentHash: "abc",
		}, nil},
		{"no fleetmirror keys", map[string]string{"app": "x"}, map[string]string{"example.com/sync": "maybe"}, nil},
		{"typo in a key", enabled, typo, []string{
			"fleetmirror does not know the annotation fleetmirror.io/target-namespace, so it has no effect: fix the spelling; on sources fleetmirror reads fleetmirror.io/sync, fleetmirror.io/target-namespaces,",
		}},
		{"the label written as an annotation", nil, map[string]string{annotations.LabelEnabled: "true", annotations.AnnotationSync: "true"}, []string{
			`not the label fleetmirror.io/enabled: "true". Add the label to mirror it (kubectl label <kind> <name> fleetmirror.io/enabled=true), or remove the annotations.`,
			"(fleetmirror.io/enabled is a label, not an annotation)",
		}},
		{"annotations without the label", nil, map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: "team-a"}, []string{
			`not the label fleetmirror.io/enabled: "true". Add the label`,
		}},
		{"sync neither true nor false", enabled, map[string]string{annotations.AnnotationSync: "yes"}, []string{
			`fleetmirror.io/sync is "yes", which turns mirroring off: write "true" to mirror or "false" to stop`,
		}},
		{"bad targets", enabled, map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: "team-a, Team_B, a/b/c, all-labelled"}, []string{
			`fleetmirror.io/target-namespaces: the agent skips the invalid entries "Team_B", "a/b/c", "all-labelled"; write each comma-separated entry as a namespace name`,
		}},
		{"pull mirror", pull, map[string]string{
			annotations.AnnotationMirrorFrom: "team-a/db", annotations.AnnotationStatus: "InSync: pulled from team-a/db", annotations.AnnotationContentHash: "abc",
		}, nil},
		{"pull mirror through the hub", pull, map[string]string{annotations.AnnotationMirrorFrom: "eu-1.example.com/team-a/db.creds"}, nil},
		{"source allowing pulls", enabled, map[string]string{annotations.AnnotationAllowPullInto: "team-a, app-*, eu-*/team-b, */shared"}, nil},
		{"mirror-from without the pull label", nil, map[string]string{annotations.AnnotationMirrorFrom: "team-a/db"}, []string{
			`fleetmirror ignores fleetmirror.io/mirror-from without the label fleetmirror.io/pull: "true". Add the label`,
		}},
		{"mirror-from that names no source", pull, map[string]string{annotations.AnnotationMirrorFrom: "team-a/db/x/y"}, []string{
			`fleetmirror.io/mirror-from is "team-a/db/x/y", which names no source: write NAMESPACE/NAME, or CLUSTER/NAMESPACE/NAME`,
		}},
		{"a source asking for a pull", map[string]string{annotations.LabelEnabled: "true", annotations.LabelPull: "true"},
			map[string]string{annotations.AnnotationMirrorFrom: "team-a/db"}, []string{
				"labelled both fleetmirror.io/enabled and fleetmirror.io/pull is refused as a pull mirror",
			}},
		{"bad allow-pull-into", enabled, map[string]string{annotations.AnnotationAllowPullInto: "team-a, all, Team_B, a/b/c"}, []string{
			`fleetmirror.io/allow-pull-into: the agent skips the invalid entries "all", "Team_B", "a/b/c"; write each comma-separated entry`,
		}},
		{"targets over 16 KiB", enabled, map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: strings.Repeat("team-a,", 16*1024/7+1)}, []string{
			"fleetmirror.io/target-namespaces is longer than 16384 bytes, so the agent ignores all of it",
		}},
		{"source adopting the copies of other tools", enabled, map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationAdopt: "reflector, replicator,kubemirror"}, nil},
		{"adopt naming an unknown tool", enabled, map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationAdopt: "reflector, config-syncer"}, []string{
			`fleetmirror.io/adopt: the agent ignores "config-syncer", which are not tools; write a comma-separated list of reflector, replicator, kubemirror, kyverno and fleetmirror`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := createSecret(ctx, cs, w, ns, tc.lbls, tc.anns)
			if err != nil {
				t.Fatal(err)
			}
			got := ours(msgs, memberPolicy)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings of %s\n got %q\nwant one each containing %q", memberPolicy, got, tc.want)
			}
			for _, want := range tc.want {
				if !slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, want) }) {
					t.Errorf("no warning contains %q; got %q", want, got)
				}
			}
			if len(ours(msgs, hubPolicy)) != len(tc.want) {
				t.Errorf("the hub chart's policy warns differently: %q", msgs)
			}
		})
	}

	t.Run("Deny refuses, except the agent's own writes", func(t *testing.T) {
		const release = "strict"
		out, err := templateRelease(t, release, filepath.Join(root, "charts", "member"), values("admissionWarnings.action", "Deny"))
		if err != nil {
			t.Fatal(err)
		}
		ms := parseManifests(t, out)
		g := NewWithT(t)
		// Runs after the policy is deleted (cleanups run last first): the
		// API server drops it from its cache a little later, and the tests
		// after this one must not meet it.
		t.Cleanup(func() {
			g.Eventually(func() error {
				_, err := createSecret(ctx, cs, w, ns, enabled, typo)
				return err
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		})
		applyRendered(ctx, t, api.Client, ms, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole", "ClusterRoleBinding")
		g.Eventually(func() error {
			_, err := createSecret(ctx, cs, w, ns, enabled, typo)
			return err
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("fleetmirror does not know the annotation fleetmirror.io/target-namespace")))
		_, err = createSecret(ctx, cs, w, ns, enabled, typo)
		if !apierrors.IsInvalid(err) {
			t.Errorf("refusal is not Invalid (422): %v", err)
		}
		if _, err := createSecret(ctx, cs, w, ns, enabled, map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: "team-a"}); err != nil {
			t.Errorf("a correct source was refused: %v", err)
		}
		if _, err := createSecret(ctx, cs, w, ns, mirror, map[string]string{annotations.AnnotationSource: "local/default/app"}); err != nil {
			t.Errorf("a mirror was refused: %v", err)
		}
		agent := rest.CopyConfig(api.Config)
		agent.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + releaseNamespace + ":" + release + "-fleetmirror-member"}
		agentCS, agentW := warningClient(t, agent)
		if _, err := createSecret(ctx, agentCS, agentW, ns, enabled, typo); err != nil {
			t.Errorf("the agent's own write was refused: %v", err)
		}
	})
}

// TestAdmissionTargetsMatchTheParser checks the policy's target entry rules
// against pkg/annotations.Parse on a real API server: an entry list draws
// the warning exactly when the agent reports a problem with it.
func TestAdmissionTargetsMatchTheParser(t *testing.T) {
	warned := policyWarnsAbout(t, "targets", "hub", annotations.AnnotationTargetNamespaces)
	NewWithT(t).Eventually(func() bool { return warned("Bad_NS") }, 30*time.Second, 200*time.Millisecond).Should(BeTrue())

	long := func(n int) string { return strings.Repeat("a", n) }
	for _, v := range []string{
		"team-a", "team-a, team-b", " team-a ,, team-b ,", "", " , ", "app-*", "team-?", "*", "a.b-*", "all", "all-labeled",
		"prod/team-a", "prod-*/all", "*/*", "cluster.example.com/ns", "c?/all-labeled", "a.b", long(63), long(64), long(62) + "*",
		"x/" + long(63), "x/" + long(64), long(253) + "/ns", long(254) + "/ns", strings.Repeat("a.", 126) + "a/ns",
		"Bad_NS", "a/b/c", "/x", "x/", "/", "ALL", "All-Labeled", "all-labelled", "labeled", "any", "all-namespaces",
		"prod/any", "prod/All", "a b", "-team", "team-", "team-a,Bad", "[abc]", `team\a`, "team_*", "UPPER*", "c_1/ns",
		"-c/ns", "c-/ns", "c..d/ns", "ümlaut", "team-a\tteam-b",
	} {
		parsed := annotations.Parse(enabled, map[string]string{annotations.AnnotationTargetNamespaces: v})
		agent := len(parsed.Problems) > 0
		if got := warned(v); got != agent {
			t.Errorf("target-namespaces %q: policy warns %v, agent reports problems %v %q", v, got, agent, parsed.Problems)
		}
	}
}

// policyWarns installs the admission policy of chart as release on the
// test API server and returns a function that creates a Secret with the
// given labels and annotations and reports whether the policy warns about
// key. The policy may need a moment before it serves.
func policyWarns(t *testing.T, release, chart string) func(lbls, anns map[string]string, key string) bool {
	t.Helper()
	api := apiServer(t)
	ctx := context.Background()
	cs, w := warningClient(t, api.Config)
	out, err := templateRelease(t, release, filepath.Join(root, "charts", chart), nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := parseManifests(t, out)
	applyRendered(ctx, t, api.Client, ms, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	policy := ms.Get(t, "ValidatingAdmissionPolicy", "-annotations").Name
	return func(lbls map[string]string, anns map[string]string, key string) bool {
		t.Helper()
		msgs, err := createSecret(ctx, cs, w, "default", lbls, anns)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ours(msgs, policy), func(m string) bool { return strings.Contains(m, key) })
	}
}

// policyWarnsAbout is policyWarns for a source whose annotation key holds
// value.
func policyWarnsAbout(t *testing.T, release, chart, key string) func(value string) bool {
	t.Helper()
	warns := policyWarns(t, release, chart)
	return func(value string) bool {
		t.Helper()
		return warns(enabled, map[string]string{annotations.AnnotationSync: "true", key: value}, key)
	}
}

// TestAdmissionAdoptMatchesTheParser checks the policy's rule for
// fleetmirror.io/adopt against peers.ParseAdopt on a real API server: a
// value draws the warning exactly when the agent reports a problem with it.
func TestAdmissionAdoptMatchesTheParser(t *testing.T) {
	warned := policyWarnsAbout(t, "adopt", "member", annotations.AnnotationAdopt)
	NewWithT(t).Eventually(func() bool { return warned("nope") }, 30*time.Second, 200*time.Millisecond).Should(BeTrue())

	values := []string{"", " , ", "reflector", "replicator,kubemirror", " kubemirror ,, reflector ,", "reflector,reflector", "Reflector", "all", "reflector;replicator", "reflector replicator", "kube-mirror", "reflector,\tx", "reflector\t, replicator"}
	for _, tool := range peers.Tools {
		values = append(values, string(tool))
	}
	for _, v := range values {
		_, problems := peers.ParseAdopt(v)
		if got := warned(v); got != (len(problems) > 0) {
			t.Errorf("adopt %q: policy warns %v, agent reports problems %q", v, got, problems)
		}
	}
}

// TestAdmissionKeysAreTheContract checks that the policy's list of known
// annotation keys is exactly the Annotation* constants of
// pkg/annotations/keys.go, so that a new key cannot draw warnings and a
// removed one cannot pass silently.
func TestAdmissionKeysAreTheContract(t *testing.T) {
	declared, err := fleettest.DeclaredKeys(filepath.Join(root, "pkg", "annotations", "keys.go"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name, key := range declared {
		if strings.HasPrefix(name, "Annotation") {
			want = append(want, key)
		}
	}
	if len(want) < 10 {
		t.Fatalf("found only %d Annotation constants in keys.go: %q", len(want), want)
	}
	slices.Sort(want)
	quoted := regexp.MustCompile(`'(fleetmirror\.io/[^']+)'`)
	for _, c := range charts {
		var p admissionv1.ValidatingAdmissionPolicy
		render(t, c.dir, nil).Get(t, "ValidatingAdmissionPolicy", "-annotations").Decode(t, &p)
		var got []string
		for _, v := range p.Spec.Variables {
			if v.Name != "sourceKeys" && v.Name != "unknown" {
				continue
			}
			for _, m := range quoted.FindAllStringSubmatch(v.Expression, -1) {
				got = append(got, m[1])
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the policy knows the keys\n%q\nkeys.go declares\n%q", c.dir, got, want)
		}
	}
}

// TestAdmissionPolicyValues checks what the values change: the kinds
// matched (with discovery's plurals), the action, and no policy at all.
func TestAdmissionPolicyValues(t *testing.T) {
	rules := func(p admissionv1.ValidatingAdmissionPolicy) map[string][]string {
		out := map[string][]string{}
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			if !slices.Equal(r.Operations, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}) {
				t.Errorf("operations %v", r.Operations)
			}
			out[strings.Join(r.APIGroups, ",")] = r.Resources
		}
		return out
	}
	for _, c := range charts {
		for _, tc := range []struct {
			name   string
			vals   map[string]any
			kinds  map[string][]string
			action admissionv1.ValidationAction
		}{
			{"default", nil, map[string][]string{"": {"configmaps", "secrets"}}, admissionv1.Warn},
			{"mirrored kinds", values("config.resourceTypes", []any{"Endpoints.v1", "Ingress.v1.networking.k8s.io", "NetworkPolicy.v1.networking.k8s.io", "Gateway.v1.gateway.networking.k8s.io"}, "admissionWarnings.action", "Deny"),
				map[string][]string{"": {"endpoints"}, "networking.k8s.io": {"ingresses", "networkpolicies"}, "gateway.networking.k8s.io": {"gateways"}}, admissionv1.Deny},
			{"discovery, extended", values("config.resourceTypes", []any{}, "admissionWarnings.extraResourceTypes", []any{"HTTPRoute.v1.gateway.networking.k8s.io"}, "admissionWarnings.action", "Audit"),
				map[string][]string{"": {"configmaps", "secrets"}, "gateway.networking.k8s.io": {"httproutes"}}, admissionv1.Audit},
		} {
			t.Run(c.dir+"/"+tc.name, func(t *testing.T) {
				ms := render(t, c.dir, tc.vals)
				var p admissionv1.ValidatingAdmissionPolicy
				var b admissionv1.ValidatingAdmissionPolicyBinding
				ms.Get(t, "ValidatingAdmissionPolicy", "-annotations").Decode(t, &p)
				ms.Get(t, "ValidatingAdmissionPolicyBinding", "-annotations").Decode(t, &b)
				full := releaseName + "-fleetmirror-" + c.dir + "-annotations"
				if p.Name != full || b.Name != full || b.Spec.PolicyName != full {
					t.Errorf("names %s %s -> %s, want %s", p.Name, b.Name, b.Spec.PolicyName, full)
				}
				if got := rules(p); fmt.Sprint(got) != fmt.Sprint(tc.kinds) {
					t.Errorf("resources %v, want %v", got, tc.kinds)
				}
				if !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{tc.action}) {
					t.Errorf("validationActions %v, want [%s]", b.Spec.ValidationActions, tc.action)
				}
			})
		}
		ms := render(t, c.dir, values("admissionWarnings.enabled", false))
		if n := len(ms.Kinds("ValidatingAdmissionPolicy")) + len(ms.Kinds("ValidatingAdmissionPolicyBinding")); n != 0 {
			t.Errorf("%s: admissionWarnings.enabled=false renders %d policy objects", c.dir, n)
		}
	}
}

// TestPluralsMatchDiscovery renders the ClusterRole with every namespaced
// kind a real API server serves with all mirroring verbs, as
// Kind.version.group, and checks that each resource name is the one
// discovery gives: the chart's table and rule never grant a wrong plural.
func TestPluralsMatchDiscovery(t *testing.T) {
	api := apiServer(t)
	cs, err := kubernetes.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := cs.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		t.Fatal(err)
	}
	var types []any
	want := map[string][]string{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !isSubset(mirrorVerbs, r.Verbs) {
				continue
			}
			types = append(types, strings.TrimSuffix(r.Kind+"."+gv.Version+"."+gv.Group, "."))
			if !slices.Contains(want[gv.Group], r.Name) {
				want[gv.Group] = append(want[gv.Group], r.Name)
			}
		}
	}
	if len(types) < 15 {
		t.Fatalf("discovery served only %d mirrorable kinds: %v", len(types), types)
	}
	for _, c := range charts {
		got := map[string][]string{}
		for _, r := range clusterRoleRules(t, render(t, c.dir, values("config.resourceTypes", types)), "fleetmirror-"+c.dir) {
			if slices.Equal(r.Verbs, mirrorVerbs) {
				got[r.APIGroups[0]] = r.Resources
			}
		}
		for g := range want {
			slices.Sort(want[g])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: resources by group\n got %v\nwant %v (discovery)", c.dir, got, want)
		}
	}
}

func isSubset(sub, set []string) bool {
	for _, s := range sub {
		if !slices.Contains(set, s) {
			return false
		}
	}
	return true
}

// TestClusterObjectsAreValid creates the cluster-scoped objects of both
// charts in discovery mode, with the longest full name, on an API server:
// the aggregation label, the policy and its binding pass its validation.
func TestClusterObjectsAreValid(t *testing.T) {
	api := apiServer(t)
	for _, c := range charts {
		full := c.dir + "-" + strings.Repeat("a", 62-len(c.dir))
		vals := values("config.resourceTypes", []any{}, "fullnameOverride", full)
		if c.dir == "member" {
			set(vals, "hubAccess.enabled", true)
		}
		ms := render(t, c.dir, vals)
		applyRendered(context.Background(), t, api.Client, ms, "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
		// Each aggregated ClusterRole selects its own base only.
		for _, name := range []string{full, full + "-hub"} {
			if c.dir == "hub" && name != full {
				continue
			}
			var agg, base rbacv1.ClusterRole
			ms.Get(t, "ClusterRole", name).Decode(t, &agg)
			ms.Get(t, "ClusterRole", name+"-base").Decode(t, &base)
			sel, err := metav1.LabelSelectorAsSelector(&agg.AggregationRule.ClusterRoleSelectors[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range ms.Kinds("ClusterRole") {
				var r rbacv1.ClusterRole
				o.Decode(t, &r)
				if got, want := sel.Matches(labels.Set(r.Labels)), r.Name == base.Name; got != want {
					t.Errorf("%s: ClusterRole %s aggregates %s: %v, want %v", c.dir, name, r.Name, got, want)
				}
			}
		}
	}
}

// TestAdmissionPullMatchesTheParser checks the policy's rules for
// mirror-from and allow-pull-into against pkg/annotations on a real API
// server: a value draws the warning exactly when the agent finds it
// invalid.
func TestAdmissionPullMatchesTheParser(t *testing.T) {
	warns := policyWarns(t, "pull", "member")
	warned := func(lbls map[string]string, key, value string) bool {
		t.Helper()
		return warns(lbls, map[string]string{key: value}, key)
	}
	NewWithT(t).Eventually(func() bool { return warned(pull, annotations.AnnotationMirrorFrom, "x") }, 30*time.Second, 200*time.Millisecond).Should(BeTrue())

	long := func(n int) string { return strings.Repeat("a", n) }
	for _, v := range []string{
		"ns/name", " ns/name ", "ns/a.b", "c/ns/name", "c.example.com/ns/name", long(63) + "/" + long(253), long(64) + "/x",
		"x/" + long(254), long(253) + "/ns/x", long(254) + "/ns/x", "", "x", "/x", "x/", "//", "/ns/x", "c//x", "a/b/c/d",
		"NS/x", "ns/X", "ns/*", "ns/a_b", "a.b/x", "-ns/x", "ns/x-", "c_1/ns/x", "ns/x\ty", "ümlaut/x",
	} {
		_, err := annotations.ParseMirrorFrom(v)
		if got := warned(pull, annotations.AnnotationMirrorFrom, v); got != (err != nil) {
			t.Errorf("mirror-from %q: policy warns %v, agent's error %v", v, got, err)
		}
	}
	for _, v := range []string{
		"team-a", "team-a, team-b", " team-a ,, team-b ,", "", "app-*", "*", "*/*", "prod/team-a", "c?/team-*",
		"all", "all-labeled", "prod/all", "any", "labeled", "ALL", "Bad_NS", "a/b/c", "/x", "x/", "/", "a b", "[abc]",
		long(63), long(64), long(253) + "/ns", long(254) + "/ns", "x/" + long(64),
	} {
		c := annotations.ParseAllowPullInto(v)
		if got := warned(enabled, annotations.AnnotationAllowPullInto, v); got != (len(c.Problems) > 0) {
			t.Errorf("allow-pull-into %q: policy warns %v, agent reports problems %v %q", v, got, len(c.Problems) > 0, c.Problems)
		}
	}
}
