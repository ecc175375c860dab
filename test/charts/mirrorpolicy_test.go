package charts_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// policyRules are the member agent's rules on MirrorPolicies: it reads and
// updates them (finalizer), writes their status, and never creates or
// deletes one.
var policyRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
	{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies/status"}, Verbs: []string{"get", "patch", "update"}},
	{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies/finalizers"}, Verbs: []string{"update"}},
}

// hubPolicyRules are the hub's rules on MirrorPolicies, in its own cluster
// and through its identity in a member: it reads them and applies its part
// of their status; their finalizer is the member agent's.
var hubPolicyRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies/status"}, Verbs: []string{"patch"}},
}

// agentRules are the rules the agent of chart has after its kind rules.
func agentRules(chart string) []rbacv1.PolicyRule {
	if chart == "member" {
		return slices.Concat(commonRules, policyRules)
	}
	return slices.Concat(commonRules, hubPolicyRules)
}

// The user-facing ClusterRoles of the member chart, by name suffix.
const (
	policyEditRole = "-mirrorpolicies-edit"
	policyViewRole = "-mirrorpolicies-view"
)

// isPolicyRole tells the user-facing MirrorPolicy ClusterRoles from the
// agent's.
func isPolicyRole(o Object) bool {
	return strings.HasSuffix(o.Name, policyEditRole) || strings.HasSuffix(o.Name, policyViewRole)
}

// TestChartCRDsAreConfigCRD checks that the member chart renders the CRDs
// make generate writes: charts/member/files/crds holds config/crd's files,
// byte for byte, and no others.
func TestChartCRDsAreConfigCRD(t *testing.T) {
	want, got := readDir(t, "config/crd"), readDir(t, chartCRDs)
	if len(want) == 0 {
		t.Fatal("config/crd holds no CRD")
	}
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s/%s is not config/crd/%s: run make generate", chartCRDs, name, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s/%s is not in config/crd: run make generate", chartCRDs, name)
		}
	}
}

// chartCRDs is where make generate copies config/crd in the member chart.
const chartCRDs = "charts/member/files/crds"

// readDir returns the files of a directory of the repository by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestChartRendersCRD checks the CRD as the member chart renders it: each
// of config/crd's CRDs as it is, plus the chart's labels and, with
// crds.keep (the default), Helm's keep policy; none with crds.enabled
// false, and none in the hub chart (one chart per cluster owns it).
func TestChartRendersCRD(t *testing.T) {
	want := map[string]map[string]any{}
	for name, b := range readDir(t, "config/crd") {
		var crd map[string]any
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("config/crd/%s: %v", name, err)
		}
		want[crd["metadata"].(map[string]any)["name"].(string)] = crd
	}
	// The chart's labels, as every object of the release has them.
	labels := render(t, "member", nil).Get(t, "Deployment", "").Map["metadata"].(map[string]any)["labels"]
	crds := func(vals map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range render(t, "member", vals).Kinds("CustomResourceDefinition") {
			out[o.Name] = o.Map
		}
		return out
	}
	for name, tc := range map[string]struct {
		vals map[string]any
		keep bool
	}{
		"defaults":   {nil, true},
		"keep false": {values("crds.keep", false), false},
	} {
		t.Run(name, func(t *testing.T) {
			got := crds(tc.vals)
			for crdName, crd := range want {
				wantCRD := runtime.DeepCopyJSON(crd)
				meta := wantCRD["metadata"].(map[string]any)
				meta["labels"] = labels
				if tc.keep {
					meta["annotations"].(map[string]any)["helm.sh/resource-policy"] = "keep"
				}
				if diff := cmp.Diff(wantCRD, got[crdName]); diff != "" {
					t.Errorf("CRD %s (-want +got):\n%s", crdName, diff)
				}
			}
			if len(got) != len(want) {
				t.Errorf("rendered %d CRDs, want %d", len(got), len(want))
			}
		})
	}
	t.Run("enabled false", func(t *testing.T) {
		if got := crds(values("crds.enabled", false)); len(got) != 0 {
			t.Errorf("rendered %d CRDs", len(got))
		}
	})
	t.Run("hub", func(t *testing.T) {
		if got := render(t, "hub", nil).Kinds("CustomResourceDefinition"); len(got) != 0 {
			t.Errorf("the hub chart renders %v", Manifests(got).names())
		}
	})
}

// TestMirrorPolicyRolesAggregate checks the member chart's user-facing
// ClusterRoles as rendered: edit (writing policies, never their status)
// aggregated into admin and edit, view (reading them) into view; neither
// without rbac.aggregateClusterRoles or rbac.create, and none in the hub
// chart. envtest runs no aggregation controller, so the labels are checked
// here and the rules on an API server in TestMirrorPolicyRoles.
func TestMirrorPolicyRolesAggregate(t *testing.T) {
	full := releaseName + "-fleetmirror-member"
	for _, tc := range []struct {
		suffix string
		labels []string
		verbs  []string
	}{
		{policyEditRole, []string{"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"},
			[]string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
		{policyViewRole, []string{"rbac.authorization.k8s.io/aggregate-to-view"}, []string{"get", "list", "watch"}},
	} {
		t.Run(tc.suffix, func(t *testing.T) {
			var cr rbacv1.ClusterRole
			render(t, "member", nil).Get(t, "ClusterRole", tc.suffix).Decode(t, &cr)
			if cr.Name != full+tc.suffix {
				t.Errorf("name %s, want %s", cr.Name, full+tc.suffix)
			}
			var aggregates []string
			for k, v := range cr.Labels {
				if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") && v == "true" {
					aggregates = append(aggregates, k)
				}
			}
			if slices.Sort(aggregates); !slices.Equal(aggregates, tc.labels) {
				t.Errorf("aggregated into %v, want %v", aggregates, tc.labels)
			}
			want := []rbacv1.PolicyRule{{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies"}, Verbs: tc.verbs}}
			if !reflect.DeepEqual(cr.Rules, want) || cr.AggregationRule != nil {
				t.Errorf("rules %+v, want %+v", cr.Rules, want)
			}
		})
	}
	for name, vals := range map[string]map[string]any{
		"aggregateClusterRoles false": values("rbac.aggregateClusterRoles", false),
		"rbac.create false":           values("rbac.create", false),
	} {
		t.Run(name, func(t *testing.T) {
			if roles := slices.DeleteFunc(render(t, "member", vals).Kinds("ClusterRole"), func(o Object) bool { return !isPolicyRole(o) }); len(roles) != 0 {
				t.Errorf("rendered %v", Manifests(roles).names())
			}
		})
	}
	t.Run("hub", func(t *testing.T) {
		if roles := slices.DeleteFunc(render(t, "hub", nil).Kinds("ClusterRole"), func(o Object) bool { return !isPolicyRole(o) }); len(roles) != 0 {
			t.Errorf("the hub chart renders %v", Manifests(roles).names())
		}
	})
}

// TestMirrorPolicyRoles checks, on an API server with the chart's CRD,
// what the user-facing ClusterRoles let a user bound in one namespace do:
// alice (edit, bound in A only) writes policies in A and nowhere else, not
// their status, and cannot name a source in another namespace (the schema
// has no such field: refused with strict field validation, pruned without);
// bob (view, in A) reads them and writes none.
func TestMirrorPolicyRoles(t *testing.T) {
	ctx := context.Background()
	api := apiServer(t)
	crds, err := envtest.InstallCRDs(api.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, chartCRDs)}, ErrorIfPathMissing: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(api.Config, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
			t.Errorf("uninstalling the CRD: %v", err)
		}
	})
	var roles Manifests
	for _, o := range render(t, "member", nil).Kinds("ClusterRole") {
		if isPolicyRole(o) {
			roles = append(roles, o)
		}
	}
	applyRendered(ctx, t, api.Client, roles, "ClusterRole")

	const nsA, nsB = "policies-a", "policies-b"
	for _, ns := range []string{nsA, nsB} {
		mustCreate(ctx, t, api.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for user, suffix := range map[string]string{"alice": policyEditRole, "bob": policyViewRole} {
		mustCreate(ctx, t, api.Client, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: releaseName + "-fleetmirror-member" + suffix},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})
	}
	admin := policyClient(t, api.Config, "")
	alice, bob := policyClient(t, api.Config, "alice"), policyClient(t, api.Config, "bob")

	policy := func(ns, name string) *v1alpha1.MirrorPolicy {
		return &v1alpha1.MirrorPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.MirrorPolicySpec{
				Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db-credentials"}},
				TargetNamespaces: []string{"team-*"},
			},
		}
	}
	// A policy whose source names another namespace, a field the schema
	// does not have.
	elsewhere := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "MirrorPolicy",
			"metadata": map[string]any{"namespace": nsA, "name": name},
			"spec": map[string]any{
				"source":           map[string]any{"apiVersion": "v1", "kind": "Secret", "names": []any{"db-credentials"}, "namespace": nsB},
				"targetNamespaces": []any{"team-*"},
			},
		}}
	}

	t.Run("edit writes policies in its namespace only", func(t *testing.T) {
		p := policy(nsA, "by-alice")
		if err := alice.Create(ctx, p); err != nil {
			t.Fatalf("alice creating a policy in %s: %v", nsA, err)
		}
		p.Spec.TargetNamespaces = []string{"team-a"}
		if err := alice.Update(ctx, p); err != nil {
			t.Errorf("alice updating her policy: %v", err)
		}
		p.Status.Sources = 1
		if err := alice.Status().Update(ctx, p); !apierrors.IsForbidden(err) {
			t.Errorf("alice writing the status (the agent's): want Forbidden, got %v", err)
		}
		if err := alice.Create(ctx, policy(nsB, "by-alice")); !apierrors.IsForbidden(err) {
			t.Errorf("alice creating a policy in %s: want Forbidden, got %v", nsB, err)
		}
		if err := alice.List(ctx, &v1alpha1.MirrorPolicyList{}, client.InNamespace(nsB)); !apierrors.IsForbidden(err) {
			t.Errorf("alice listing policies in %s: want Forbidden, got %v", nsB, err)
		}
		if err := alice.Delete(ctx, p); err != nil {
			t.Errorf("alice deleting her policy: %v", err)
		}
	})

	t.Run("a source in another namespace cannot be named", func(t *testing.T) {
		strict := client.WithFieldValidation(alice, metav1.FieldValidationStrict)
		err := strict.Create(ctx, elsewhere("strict"))
		if err == nil || !strings.Contains(err.Error(), `unknown field "spec.source.namespace"`) {
			t.Errorf("strict field validation: want unknown field \"spec.source.namespace\", got %v", err)
		}
		lax := client.WithFieldValidation(alice, metav1.FieldValidationIgnore)
		if err := lax.Create(ctx, elsewhere("pruned")); err != nil {
			t.Fatalf("creating without field validation: %v", err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MirrorPolicy"))
		if err := alice.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "pruned"}, got); err != nil {
			t.Fatal(err)
		}
		source, _, _ := unstructured.NestedMap(got.Object, "spec", "source")
		if _, ok := source["namespace"]; ok || len(source) == 0 {
			t.Errorf("spec.source as stored: %v, want it without namespace", source)
		}
	})

	t.Run("view reads policies and writes none", func(t *testing.T) {
		if err := admin.Create(ctx, policy(nsA, "by-admin")); err != nil {
			t.Fatal(err)
		}
		if err := bob.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "by-admin"}, &v1alpha1.MirrorPolicy{}); err != nil {
			t.Errorf("bob getting a policy in %s: %v", nsA, err)
		}
		if err := bob.List(ctx, &v1alpha1.MirrorPolicyList{}, client.InNamespace(nsA)); err != nil {
			t.Errorf("bob listing policies in %s: %v", nsA, err)
		}
		if err := bob.Create(ctx, policy(nsA, "by-bob")); !apierrors.IsForbidden(err) {
			t.Errorf("bob creating a policy in %s: want Forbidden, got %v", nsA, err)
		}
		if err := bob.Delete(ctx, policy(nsA, "by-admin")); !apierrors.IsForbidden(err) {
			t.Errorf("bob deleting a policy in %s: want Forbidden, got %v", nsA, err)
		}
	})
}

// policyClient is a client of the API server at cfg (an admin's) that
// knows MirrorPolicies and acts as user, who has only what RBAC grants the
// name; as the admin when user is empty.
func policyClient(t *testing.T, cfg *rest.Config, user string) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustCreate creates obj as an admin and deletes it at the end of the test.
func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
		}
	})
}
