package charts_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var mirrorVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// commonRules follow the kind rules in every mirroring ClusterRole.
var commonRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
}

func kindRule(group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: mirrorVerbs}
}

// rbacCases are resource type lists and the kind rules they must give,
// written out by hand rather than derived.
var rbacCases = []struct {
	name          string
	types         any // nil: the chart's default
	resourceNames map[string]any
	want          []rbacv1.PolicyRule
}{
	{
		name: "default",
		want: []rbacv1.PolicyRule{kindRule("", "configmaps", "secrets")},
	},
	{
		name:  "only ConfigMaps",
		types: []any{"ConfigMap.v1"},
		want:  []rbacv1.PolicyRule{kindRule("", "configmaps")},
	},
	{
		name: "several groups and plurals",
		types: []any{
			"Secret.v1", "Ingress.v1.networking.k8s.io", "NetworkPolicy.v1.networking.k8s.io",
			"Gateway.v1.gateway.networking.k8s.io", "HTTPRoute.v1.gateway.networking.k8s.io",
			"Middleware.v1alpha1.traefik.io", "Ingress.v1beta1.networking.k8s.io",
		},
		want: []rbacv1.PolicyRule{
			kindRule("", "secrets"),
			kindRule("gateway.networking.k8s.io", "gateways", "httproutes"),
			kindRule("networking.k8s.io", "ingresses", "networkpolicies"),
			kindRule("traefik.io", "middlewares"),
		},
	},
	{
		name:  "irregular plurals from the table",
		types: []any{"Endpoints.v1", "EndpointSlice.v1.discovery.k8s.io", "Ingress.v1.networking.k8s.io", "NetworkPolicy.v1.networking.k8s.io", "Gateway.v1.gateway.networking.k8s.io", "BackendTLSPolicy.v1.gateway.networking.k8s.io"},
		want: []rbacv1.PolicyRule{
			kindRule("", "endpoints"),
			kindRule("discovery.k8s.io", "endpointslices"),
			kindRule("gateway.networking.k8s.io", "backendtlspolicies", "gateways"),
			kindRule("networking.k8s.io", "ingresses", "networkpolicies"),
		},
	},
	{
		name:          "irregular plural overridden",
		types:         []any{"Endpoints.v1", "Mouse.v1.zoo.example.com", "Status.v1.zoo.example.com"},
		resourceNames: map[string]any{"Mouse": "mice", "Status": "statuses"},
		want: []rbacv1.PolicyRule{
			kindRule("", "endpoints"),
			kindRule("zoo.example.com", "mice", "statuses"),
		},
	},
}

func clusterRoleRules(t *testing.T, ms Manifests, suffix string) []rbacv1.PolicyRule {
	t.Helper()
	var cr rbacv1.ClusterRole
	ms.Get(t, "ClusterRole", suffix).Decode(t, &cr)
	return cr.Rules
}

// TestClusterRoleIsExactlyTheResourceTypes checks the agent's ClusterRole in
// both charts: the kinds of config.resourceTypes, namespaces read, events
// write, the member's MirrorPolicies, and nothing else.
func TestClusterRoleIsExactlyTheResourceTypes(t *testing.T) {
	for _, c := range charts {
		for _, tc := range rbacCases {
			t.Run(c.dir+"/"+tc.name, func(t *testing.T) {
				vals := map[string]any{}
				if tc.types != nil {
					set(vals, "config.resourceTypes", tc.types)
				}
				if tc.resourceNames != nil {
					set(vals, "rbac.resourceNames", tc.resourceNames)
				}
				ms := render(t, c.dir, vals)
				got := clusterRoleRules(t, ms, "fleetmirror-"+c.dir)
				if want := slices.Concat(tc.want, agentRules(c.dir)); !reflect.DeepEqual(got, want) {
					t.Errorf("ClusterRole rules\n got %+v\nwant %+v", got, want)
				}
				// Besides the users' MirrorPolicy roles (TestMirrorPolicyRolesAggregate).
				if agents := slices.DeleteFunc(ms.Kinds("ClusterRole"), isPolicyRole); len(agents) != 1 {
					t.Errorf("want one ClusterRole for the agent, got %v", Manifests(agents).names())
				}

				var crb rbacv1.ClusterRoleBinding
				ms.Get(t, "ClusterRoleBinding", "fleetmirror-"+c.dir).Decode(t, &crb)
				wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: releaseName + "-fleetmirror-" + c.dir, Namespace: releaseNamespace}}
				if crb.RoleRef.Name != releaseName+"-fleetmirror-"+c.dir || !reflect.DeepEqual(crb.Subjects, wantSubject) {
					t.Errorf("ClusterRoleBinding %+v", crb)
				}
			})
		}
	}
}

// roleRules renders chart with vals (every role of the member chart: with
// its hub identity; and the uninstall hook's) and calls check with each rule
// of each Role and ClusterRole.
func roleRules(t *testing.T, chart string, vals map[string]any, check func(o Object, rule rbacv1.PolicyRule)) {
	t.Helper()
	if chart == "member" {
		set(vals, "hubAccess.enabled", true)
	}
	ms := renderAll(t, chart, vals)
	for _, o := range slices.Concat(ms.Kinds("ClusterRole"), ms.Kinds("Role")) {
		var r rbacv1.ClusterRole
		o.Decode(t, &r)
		for _, rule := range r.Rules {
			check(o, rule)
		}
	}
}

// TestNoRBACWrites checks that no role of either chart may write RBAC
// objects or ServiceAccounts unless a kind asks for it.
func TestNoRBACWrites(t *testing.T) {
	for _, c := range charts {
		roleRules(t, c.dir, values("config.resourceTypes", []any{"ConfigMap.v1"}), func(o Object, rule rbacv1.PolicyRule) {
			if slices.Contains(rule.APIGroups, "rbac.authorization.k8s.io") || slices.Contains(rule.APIGroups, "*") ||
				slices.Contains(rule.Resources, "serviceaccounts") || slices.Contains(rule.Resources, "*") {
				t.Errorf("%s: %s %s grants %+v", c.dir, o.Kind, o.Name, rule)
			}
			if o.Kind == "ClusterRole" && slices.Contains(rule.Resources, "secrets") {
				t.Errorf("%s: %s %s reads Secrets cluster-wide without Secret.v1 mirrored: %+v", c.dir, o.Kind, o.Name, rule)
			}
		})
	}
}

// TestUnknownPluralFails checks that a kind whose plural cannot be told
// from its name is refused, naming the value that fixes it, rather than
// granted under a guessed name that matches nothing.
func TestUnknownPluralFails(t *testing.T) {
	for _, c := range charts {
		_, err := templateChart(t, c.dir, values("config.resourceTypes", []any{"Status.v1.zoo.example.com"}))
		if err == nil || !strings.Contains(err.Error(), "rbac.resourceNames.Status") {
			t.Errorf("%s: kind Status: %v", c.dir, err)
		}
	}
}

// TestDiscoveryModeAggregates checks the RBAC of an empty
// config.resourceTypes: an aggregated ClusterRole bound to the agent, a base
// ClusterRole labelled into it with Secrets and ConfigMaps, and nothing
// granted on every resource.
func TestDiscoveryModeAggregates(t *testing.T) {
	type role struct {
		name, label string
		rules       []rbacv1.PolicyRule // after the kind rules
	}
	for _, c := range charts {
		full := releaseName + "-fleetmirror-" + c.dir
		roles := []role{{full, "fleetmirror.io/aggregate-to-" + full, agentRules(c.dir)}}
		vals := values("config.resourceTypes", []any{})
		if c.dir == "member" {
			set(vals, "hubAccess.enabled", true)
			// The hub's identity reads MirrorPolicies, as the hub does.
			roles = append(roles, role{full + "-hub", "fleetmirror.io/aggregate-to-" + full + "-hub", slices.Concat(commonRules, hubPolicyRules)})
		}
		ms := render(t, c.dir, vals)
		for _, r := range roles {
			t.Run(c.dir+"/"+r.name, func(t *testing.T) {
				var agg, base rbacv1.ClusterRole
				ms.Get(t, "ClusterRole", r.name).Decode(t, &agg)
				ms.Get(t, "ClusterRole", r.name+"-base").Decode(t, &base)
				wantRule := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{r.label: "true"}}}}
				if !reflect.DeepEqual(agg.AggregationRule, wantRule) || len(agg.Rules) != 0 {
					t.Errorf("ClusterRole %s: aggregationRule %+v rules %+v, want %+v and no rules", r.name, agg.AggregationRule, agg.Rules, wantRule)
				}
				if base.Labels[r.label] != "true" || base.AggregationRule != nil {
					t.Errorf("ClusterRole %s-base is not aggregated into %s: labels %v", r.name, r.name, base.Labels)
				}
				if want := slices.Concat([]rbacv1.PolicyRule{kindRule("", "configmaps", "secrets")}, r.rules); !reflect.DeepEqual(base.Rules, want) {
					t.Errorf("ClusterRole %s-base rules\n got %+v\nwant %+v", r.name, base.Rules, want)
				}
				var crb rbacv1.ClusterRoleBinding
				ms.Get(t, "ClusterRoleBinding", r.name).Decode(t, &crb)
				if crb.RoleRef.Name != r.name {
					t.Errorf("ClusterRoleBinding %s binds %s", crb.Name, crb.RoleRef.Name)
				}
			})
		}
	}
}

// TestNoDangerousGrants renders both charts in both modes, every optional
// role included, and fails on any rule that grants a subresource (but the
// status and finalizers of our own MirrorPolicies, which the member agent
// writes), a wildcard, or the verbs that raise privileges (escalate, bind,
// impersonate).
func TestNoDangerousGrants(t *testing.T) {
	ours := []string{"mirrorpolicies/status", "mirrorpolicies/finalizers"}
	for _, c := range charts {
		for mode, types := range map[string]any{"explicit": []any{"Secret.v1", "ConfigMap.v1", "Ingress.v1.networking.k8s.io"}, "discovery": []any{}} {
			vals := values("config.resourceTypes", types, "replicaCount", 2, "podDisruptionBudget.enabled", true)
			roleRules(t, c.dir, vals, func(o Object, rule rbacv1.PolicyRule) {
				subresource := func(s string) bool {
					return s == "*" || strings.Contains(s, "/") && !(slices.Equal(rule.APIGroups, []string{"fleetmirror.io"}) && slices.Contains(ours, s))
				}
				bad := slices.ContainsFunc(rule.Resources, subresource) ||
					slices.Contains(rule.APIGroups, "*") || len(rule.NonResourceURLs) > 0 ||
					slices.ContainsFunc(rule.Verbs, func(v string) bool { return v == "*" || v == "escalate" || v == "bind" || v == "impersonate" })
				if bad {
					t.Errorf("%s/%s: %s %s grants %+v", c.dir, mode, o.Kind, o.Name, rule)
				}
			})
		}
	}
}

func TestMalformedResourceTypeFails(t *testing.T) {
	for _, c := range charts {
		for _, bad := range []string{"secret.v1", "Secret", "Secret.1", "Ingress.v1.Networking"} {
			if _, err := templateChart(t, c.dir, values("config.resourceTypes", []any{bad})); err == nil {
				t.Errorf("%s: resource type %q accepted", c.dir, bad)
			}
		}
	}
}

// TestLeaderElection checks the flags and the Role of the Lease.
func TestLeaderElection(t *testing.T) {
	for _, c := range charts {
		full := releaseName + "-fleetmirror-" + c.dir
		for _, tc := range []struct {
			name                string
			vals                map[string]any
			elect               string
			id, namespace, role string // role: namespace of the Role, "" for none
		}{
			{"default", nil, "true", full, releaseNamespace, releaseNamespace},
			{"own lease", values("leaderElection.id", "lease-a", "leaderElection.namespace", "leases", "replicaCount", 2), "true", "lease-a", "leases", "leases"},
			{"disabled", values("leaderElection.enabled", false), "false", "", "", ""},
			{"no rbac", values("rbac.create", false), "true", full, releaseNamespace, ""},
		} {
			t.Run(c.dir+"/"+tc.name, func(t *testing.T) {
				args, _ := containerArgs(t, c.dir, tc.vals)
				if args["leader-elect"] != tc.elect || args["leader-election-id"] != tc.id || args["leader-election-namespace"] != tc.namespace {
					t.Errorf("flags --leader-elect=%q --leader-election-id=%q --leader-election-namespace=%q, want %q %q %q",
						args["leader-elect"], args["leader-election-id"], args["leader-election-namespace"], tc.elect, tc.id, tc.namespace)
				}
				ms := render(t, c.dir, tc.vals)
				var roles []Object
				for _, o := range ms.Kinds("Role") {
					if strings.HasSuffix(o.Name, "-leader-election") {
						roles = append(roles, o)
					}
				}
				if tc.role == "" {
					if len(roles) != 0 {
						t.Errorf("leader election Role rendered: %v", roles)
					}
					return
				}
				var role rbacv1.Role
				ms.Get(t, "Role", "-leader-election").Decode(t, &role)
				want := []rbacv1.PolicyRule{
					{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
					{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{tc.id}, Verbs: []string{"get", "update", "delete"}},
				}
				if role.Namespace != tc.role || !reflect.DeepEqual(role.Rules, want) {
					t.Errorf("Role in %q with rules %+v, want in %q %+v", role.Namespace, role.Rules, tc.role, want)
				}
				var rb rbacv1.RoleBinding
				ms.Get(t, "RoleBinding", "-leader-election").Decode(t, &rb)
				if rb.Namespace != tc.role || rb.RoleRef.Name != role.Name || rb.Subjects[0].Name != full || rb.Subjects[0].Namespace != releaseNamespace {
					t.Errorf("RoleBinding %+v", rb)
				}
			})
		}
		t.Run(c.dir+"/replicas need leader election", func(t *testing.T) {
			_, err := templateChart(t, c.dir, values("leaderElection.enabled", false, "replicaCount", 2))
			if err == nil || !strings.Contains(err.Error(), "requires leaderElection.enabled") {
				t.Errorf("2 replicas without leader election: %v", err)
			}
		})
	}
}

// TestHubReadsSecretsInOneNamespace checks that the hub reads registration
// Secrets through a Role in the secrets namespace, not cluster-wide.
func TestHubReadsSecretsInOneNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, namespace string
		vals            map[string]any
	}{
		{"release namespace", releaseNamespace, values("config.resourceTypes", []any{"ConfigMap.v1"})},
		{"own namespace", "clusters", values("config.resourceTypes", []any{"ConfigMap.v1"}, "config.clusterSecretsNamespace", "clusters")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, "hub", tc.vals)
			var role rbacv1.Role
			ms.Get(t, "Role", "-cluster-secrets").Decode(t, &role)
			want := []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			}
			if role.Namespace != tc.namespace || !reflect.DeepEqual(role.Rules, want) {
				t.Errorf("Role in %q rules %+v, want in %q %+v", role.Namespace, role.Rules, tc.namespace, want)
			}
			var rb rbacv1.RoleBinding
			ms.Get(t, "RoleBinding", "-cluster-secrets").Decode(t, &rb)
			if rb.Namespace != tc.namespace || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
				rb.Subjects[0].Name != releaseName+"-fleetmirror-hub" || rb.Subjects[0].Namespace != releaseNamespace {
				t.Errorf("RoleBinding %+v", rb)
			}
			args, _ := containerArgs(t, "hub", tc.vals)
			if args["cluster-secrets-namespace"] != tc.namespace {
				t.Errorf("--cluster-secrets-namespace=%q, want %q", args["cluster-secrets-namespace"], tc.namespace)
			}
			for _, r := range clusterRoleRules(t, ms, "fleetmirror-hub") {
				if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*") {
					t.Errorf("the ClusterRole reads Secrets cluster-wide: %+v", r)
				}
			}
		})
	}
}

// TestHubAccess checks the identity the member chart creates for the hub.
func TestHubAccess(t *testing.T) {
	name := releaseName + "-fleetmirror-member-hub"
	for _, tc := range []struct {
		name string
		vals map[string]any
		want []rbacv1.PolicyRule
	}{
		{"config.resourceTypes", values("hubAccess.enabled", true),
			[]rbacv1.PolicyRule{kindRule("", "configmaps", "secrets")}},
		{"own kinds", values("hubAccess.enabled", true, "hubAccess.resourceTypes", []any{"Ingress.v1.networking.k8s.io"}),
			[]rbacv1.PolicyRule{kindRule("networking.k8s.io", "ingresses")}},
		{"resource names", values("hubAccess.enabled", true, "config.resourceTypes", []any{"Endpoints.v1"}, "rbac.resourceNames", map[string]any{"Endpoints": "endpoints"}),
			[]rbacv1.PolicyRule{kindRule("", "endpoints")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, "member", tc.vals)
			var sa corev1.ServiceAccount
			ms.Get(t, "ServiceAccount", "-hub").Decode(t, &sa)
			if sa.Name != name || sa.Namespace != releaseNamespace {
				t.Errorf("ServiceAccount %s/%s", sa.Namespace, sa.Name)
			}
			var token corev1.Secret
			ms.Get(t, "Secret", "-hub-token").Decode(t, &token)
			if token.Type != corev1.SecretTypeServiceAccountToken || token.Annotations[corev1.ServiceAccountNameKey] != name || token.Namespace != releaseNamespace {
				t.Errorf("token Secret %+v", token.ObjectMeta)
			}
			if got, want := clusterRoleRules(t, ms, "-hub"), slices.Concat(tc.want, commonRules, hubPolicyRules); !reflect.DeepEqual(got, want) {
				t.Errorf("hub ClusterRole rules\n got %+v\nwant %+v", got, want)
			}
			var crb rbacv1.ClusterRoleBinding
			ms.Get(t, "ClusterRoleBinding", "-hub").Decode(t, &crb)
			if crb.RoleRef.Name != name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != name || crb.Subjects[0].Namespace != releaseNamespace {
				t.Errorf("hub ClusterRoleBinding %+v", crb)
			}
		})
	}
}
