package peers

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

func meta(labels, annots map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: "platform", Name: "db", Labels: labels, Annotations: annots}
}

// set renders keys as "label k=v" / "k=v" lines, for short expectations.
func set(keys []Key) []string {
	var out []string
	for _, k := range keys {
		s := k.Key + "=" + k.Value
		if k.Label {
			s = "label " + s
		}
		out = append(out, s)
	}
	return out
}

func TestTranslate(t *testing.T) {
	const (
		enabled = "label fleetmirror.io/enabled=true"
		sync    = "fleetmirror.io/sync=true"
	)
	for _, tt := range []struct {
		name    string
		kind    string
		obj     *metav1.ObjectMeta
		tools   []Tool
		role    Role
		want    []string
		old     []string
		notes   []string // substrings, one per note
		decided []string // substrings, one per decision
	}{
		{
			name: "not annotated",
			obj:  meta(map[string]string{"app": "x"}, map[string]string{"x": "y"}),
		},
		{
			name: "a fleetmirror mirror carrying a copied peer annotation",
			obj:  meta(map[string]string{annotations.LabelMirror: "true"}, map[string]string{ReplicatorReplicateTo: "a"}),
		},

		// kubernetes-reflector, as its README writes them.
		{
			name: "reflector: allowed everywhere, auto everywhere (cert-manager's secretTemplate)",
			obj: meta(nil, map[string]string{
				ReflectorAllowed: "true", ReflectorAllowedNamespaces: "", ReflectorAutoEnabled: "true",
			}),
			tools: []Tool{Reflector}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=reflector", "fleetmirror.io/allow-pull-into=*", sync, "fleetmirror.io/target-namespaces=all"},
			old:  []string{ReflectorAllowed + "=true", ReflectorAllowedNamespaces + "=", ReflectorAutoEnabled + "=true"},
		},
		{
			name: "reflector: pull only, names and a regexp",
			obj: meta(nil, map[string]string{
				ReflectorAllowed: "True", ReflectorAllowedNamespaces: "namespace-1,namespace-2,app-.*",
			}),
			tools: []Tool{Reflector}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/allow-pull-into=namespace-1,namespace-2,app-*"},
			old:  []string{ReflectorAllowed + "=True", ReflectorAllowedNamespaces + "=namespace-1,namespace-2,app-.*"},
		},
		{
			name: "reflector: the README's character class",
			obj: meta(nil, map[string]string{
				ReflectorAllowed: "true", ReflectorAllowedNamespaces: "namespace-1,namespace-2,namespace-[0-9]*",
			}),
			tools: []Tool{Reflector}, role: RoleSource,
			decided: []string{`reflection-allowed-namespaces: entry "namespace-[0-9]*": a character class`},
		},
		{
			name: "reflector: auto into names, allowed by a glob: the intersection",
			obj: meta(nil, map[string]string{
				ReflectorAllowed: "true", ReflectorAllowedNamespaces: "team-.*",
				ReflectorAutoEnabled: "true", ReflectorAutoNamespaces: "team-a,team-b,other",
			}),
			tools: []Tool{Reflector}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=reflector", "fleetmirror.io/allow-pull-into=team-*", sync, "fleetmirror.io/target-namespaces=team-a,team-b"},
			old: []string{ReflectorAllowed + "=true", ReflectorAllowedNamespaces + "=team-.*",
				ReflectorAutoEnabled + "=true", ReflectorAutoNamespaces + "=team-a,team-b,other"},
			notes: []string{"other is in " + ReflectorAutoNamespaces + " but not allowed"},
		},
		{
			name: "reflector: globs on both sides",
			obj: meta(nil, map[string]string{
				ReflectorAllowed: "true", ReflectorAllowedNamespaces: "team-.*",
				ReflectorAutoEnabled: "true", ReflectorAutoNamespaces: ".*-prod",
			}),
			tools: []Tool{Reflector}, role: RoleSource,
			decided: []string{"union of entries"},
		},
		{
			name: "reflector: auto by selector, allowed everywhere",
			obj: meta(nil, map[string]string{
				ReflectorAllowed: "true", ReflectorAutoEnabled: "true", ReflectorAutoNamespacesSelector: "env in (prod, staging)",
			}),
			tools: []Tool{Reflector}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=reflector", "fleetmirror.io/allow-pull-into=*", sync,
				"fleetmirror.io/target-namespace-selector=env in (prod,staging)"},
			old: []string{ReflectorAllowed + "=true", ReflectorAutoEnabled + "=true", ReflectorAutoNamespacesSelector + "=env in (prod, staging)"},
		},
		{
			name:  "reflector: allowed by selector",
			obj:   meta(nil, map[string]string{ReflectorAllowed: "true", ReflectorAllowedNamespacesSelector: "env=prod"}),
			tools: []Tool{Reflector}, role: RoleSource,
			decided: []string{"allow-pull-into takes namespace patterns only"},
		},
		{
			name:  "reflector: a white-space list allows nothing",
			obj:   meta(nil, map[string]string{ReflectorAllowed: "true", ReflectorAllowedNamespaces: " "}),
			tools: []Tool{Reflector}, role: RoleSource,
			want:  []string{enabled},
			old:   []string{ReflectorAllowed + "=true", ReflectorAllowedNamespaces + "= "},
			notes: []string{"matches no namespace: no pull is allowed"},
		},
		{
			name:  "reflector: not allowed",
			obj:   meta(nil, map[string]string{ReflectorAllowed: "false", ReflectorAutoEnabled: "true"}),
			tools: []Tool{Reflector}, role: RoleSource,
			notes: []string{"nothing to migrate"},
		},
		{
			name: "reflector: a pull mirror, as reflector leaves it",
			obj: meta(nil, map[string]string{
				ReflectorReflects: "default/source-secret", ReflectorAutoReflects: "False",
				ReflectorReflectedVersion: "123", ReflectorReflectedAt: "2026-01-01T00:00:00Z",
			}),
			tools: []Tool{Reflector}, role: RolePull,
			want: []string{"label fleetmirror.io/pull=true", "fleetmirror.io/mirror-from=default/source-secret"},
			old: []string{ReflectorAutoReflects + "=False", ReflectorReflectedAt + "=2026-01-01T00:00:00Z",
				ReflectorReflectedVersion + "=123", ReflectorReflects + "=default/source-secret"},
		},
		{
			name:  "reflector: an auto copy",
			obj:   meta(nil, map[string]string{ReflectorReflects: "default/source-secret", ReflectorAutoReflects: "True"}),
			tools: []Tool{Reflector}, role: RoleCopy,
		},
		{
			name:  "reflector: reflects without a namespace",
			obj:   meta(nil, map[string]string{ReflectorReflects: "source-secret"}),
			tools: []Tool{Reflector}, role: RolePull,
			decided: []string{"is not NAMESPACE/NAME"},
		},

		// kubernetes-replicator, as its README writes them.
		{
			name:  "replicator: push by names and regexp",
			obj:   meta(nil, map[string]string{ReplicatorReplicateTo: "my-ns-1,namespace-.*"}),
			tools: []Tool{Replicator}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=replicator", sync, "fleetmirror.io/target-namespaces=my-ns-1,namespace-*"},
			old:  []string{ReplicatorReplicateTo + "=my-ns-1,namespace-.*"},
		},
		{
			name:  "replicator: the README's regexp",
			obj:   meta(nil, map[string]string{ReplicatorReplicateTo: "my-ns-1,namespace-[0-9]*"}),
			tools: []Tool{Replicator}, role: RoleSource,
			decided: []string{"character class"},
		},
		{
			name:  "replicator: push by label selector (the README's folded YAML)",
			obj:   meta(nil, map[string]string{ReplicatorReplicateToMatching: "my-label=value,my-other-label,my-other-label notin (foo,bar)\n"}),
			tools: []Tool{Replicator}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=replicator", sync,
				"fleetmirror.io/target-namespace-selector=my-label=value,my-other-label,my-other-label notin (bar,foo)"},
			old: []string{ReplicatorReplicateToMatching + "=my-label=value,my-other-label,my-other-label notin (foo,bar)\n"},
		},
		{
			name:  "replicator: an invalid selector",
			obj:   meta(nil, map[string]string{ReplicatorReplicateToMatching: "a in (b"}),
			tools: []Tool{Replicator}, role: RoleSource,
			decided: []string{"does not parse"},
		},
		{
			name: "replicator: pull allowed",
			obj: meta(nil, map[string]string{
				ReplicatorReplicationAllowed: "true", ReplicatorReplicationAllowedNamespaces: "my-ns-1,namespace-.*",
			}),
			tools: []Tool{Replicator}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/allow-pull-into=my-ns-1,namespace-*"},
			old:  []string{ReplicatorReplicationAllowed + "=true", ReplicatorReplicationAllowedNamespaces + "=my-ns-1,namespace-.*"},
		},
		{
			name:  "replicator: allowed without namespaces refuses every pull",
			obj:   meta(nil, map[string]string{ReplicatorReplicationAllowed: "true"}),
			tools: []Tool{Replicator}, role: RoleSource,
			notes: []string{"--allow-all", "nothing to migrate"},
		},
		{
			name:  "replicator: strip-labels",
			obj:   meta(map[string]string{"app.kubernetes.io/managed-by": "strimzi-kafka-operator"}, map[string]string{ReplicatorReplicateTo: "kafka", ReplicatorStripLabels: "true"}),
			tools: []Tool{Replicator}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=replicator", sync, "fleetmirror.io/target-namespaces=kafka", "fleetmirror.io/transform=" + StripLabelsTransform},
			old:  []string{ReplicatorReplicateTo + "=kafka", ReplicatorStripLabels + "=true"},
		},
		{
			name:  "replicator: strip-labels false still strips",
			obj:   meta(nil, map[string]string{ReplicatorReplicateTo: "kafka", ReplicatorStripLabels: "false"}),
			tools: []Tool{Replicator}, role: RoleSource,
			decided: []string{"whatever its value"},
		},
		{
			name:  "replicator: keep-owner-references",
			obj:   meta(nil, map[string]string{ReplicatorReplicateTo: "a", ReplicatorKeepOwnerReferences: "true"}),
			tools: []Tool{Replicator}, role: RoleSource,
			decided: []string{"owner references"},
		},
		{
			name:  "replicator: a fork's replicate-once",
			obj:   meta(nil, map[string]string{ReplicatorReplicateTo: "a", ReplicatorReplicateOnce: "true"}),
			tools: []Tool{Replicator}, role: RoleSource,
			decided: []string{"fork"},
		},
		{
			name:  "replicator: an alternation",
			obj:   meta(nil, map[string]string{ReplicatorReplicateTo: "team-a|team-b"}),
			tools: []Tool{Replicator}, role: RoleSource,
			decided: []string{"alternation without a group"},
		},
		{
			name: "replicator: a pull mirror, as replicator leaves it",
			obj: meta(nil, map[string]string{
				ReplicatorReplicateFrom: "default/some-secret", ReplicatorReplicatedAt: "2026-01-01T00:00:00Z",
				ReplicatorReplicatedFromVersion: "42", ReplicatorReplicatedKeys: "key1",
			}),
			tools: []Tool{Replicator}, role: RolePull,
			want: []string{"label fleetmirror.io/pull=true", "fleetmirror.io/mirror-from=default/some-secret"},
			old: []string{ReplicatorReplicateFrom + "=default/some-secret", ReplicatorReplicatedAt + "=2026-01-01T00:00:00Z",
				ReplicatorReplicatedFromVersion + "=42", ReplicatorReplicatedKeys + "=key1"},
		},
		{
			name: "replicator: a push copy",
			obj: meta(nil, map[string]string{
				ReplicatorReplicatedAt: "2026-01-01T00:00:00Z", ReplicatorReplicatedFromVersion: "42", ReplicatorReplicatedKeys: "key1",
			}),
			tools: []Tool{Replicator}, role: RoleCopy,
		},

		// kubemirror, as its README writes them.
		{
			name: "kubemirror: names and globs, with its status and finalizer",
			obj: func() *metav1.ObjectMeta {
				m := meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{
					KubemirrorSync: "true", KubemirrorTargetNamespaces: "app-*, prod-*,app1",
					KubemirrorPrefix + "sync-status": "reconciled:3,errors:0",
				})
				m.Finalizers = []string{KubemirrorFinalizer}
				return m
			}(),
			tools: []Tool{Kubemirror}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=kubemirror", sync, "fleetmirror.io/target-namespaces=app-*,prod-*,app1"},
			old: []string{"label " + KubemirrorEnabled + "=true", KubemirrorSync + "=true",
				KubemirrorPrefix + "sync-status=reconciled:3,errors:0", KubemirrorTargetNamespaces + "=app-*, prod-*,app1"},
		},
		{
			name: "kubemirror: all-labeled with transform and max-targets",
			obj: meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{
				KubemirrorSync: "true", KubemirrorTargetNamespaces: "all-labeled",
				KubemirrorTransform: "rules:\n  - path: data.LOG_LEVEL\n    value: \"error\"\n", KubemirrorTransformStrict: "1",
				KubemirrorMaxTargets: "5",
			}),
			tools: []Tool{Kubemirror}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=kubemirror", sync, "fleetmirror.io/target-namespaces=all-labeled",
				"fleetmirror.io/transform=rules:\n  - path: data.LOG_LEVEL\n    value: \"error\"\n", "fleetmirror.io/transform-strict=true"},
			old: []string{"label " + KubemirrorEnabled + "=true", KubemirrorMaxTargets + "=5", KubemirrorSync + "=true",
				KubemirrorTargetNamespaces + "=all-labeled", KubemirrorTransform + "=rules:\n  - path: data.LOG_LEVEL\n    value: \"error\"\n",
				KubemirrorTransformStrict + "=1"},
			notes: []string{"not read by kubemirror"},
		},
		{
			name: "kubemirror: a merge into a Secret's data",
			kind: "Secret",
			obj: meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{
				KubemirrorSync: "true", KubemirrorTargetNamespaces: "a",
				KubemirrorTransform: "rules:\n  - path: data\n    merge: {k: dmFsdWU=}\n",
			}),
			tools: []Tool{Kubemirror}, role: RoleSource,
			decided: []string{"base64"},
		},
		{
			name: "kubemirror: rules fleetmirror refuses",
			obj: meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{
				KubemirrorSync: "true", KubemirrorTargetNamespaces: "a",
				KubemirrorTransform: "rules:\n  - path: metadata.name\n    value: x\n",
			}),
			tools: []Tool{Kubemirror}, role: RoleSource,
			decided: []string{"fleetmirror refuses these rules"},
		},
		{
			name: "kubemirror: a character class",
			obj: meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{
				KubemirrorSync: "true", KubemirrorTargetNamespaces: "app-[0-9]",
			}),
			tools: []Tool{Kubemirror}, role: RoleSource,
			decided: []string{"character classes"},
		},
		{
			name:  "kubemirror: sync off",
			obj:   meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{KubemirrorSync: "false", KubemirrorTargetNamespaces: "a"}),
			tools: []Tool{Kubemirror}, role: RoleSource,
			notes: []string{"nothing to migrate"},
		},
		{
			name: "kubemirror: a copy",
			obj: meta(map[string]string{KubemirrorMirror: "true", KubemirrorPrefix + "managed-by": "kubemirror"}, map[string]string{
				KubemirrorSourceNamespace: "default", KubemirrorSourceName: "db", KubemirrorSourceUID: "u-1",
			}),
			tools: []Tool{Kubemirror}, role: RoleCopy,
		},

		// Mixed and already migrated.
		{
			name:  "two tools",
			obj:   meta(nil, map[string]string{ReplicatorReplicateTo: "a", ReflectorAllowed: "true"}),
			tools: []Tool{Reflector, Replicator}, role: RoleSource,
			decided: []string{"reflector and replicator at once"},
		},
		{
			name: "already migrated: the same keys",
			obj: meta(map[string]string{annotations.LabelEnabled: "true"}, map[string]string{
				ReplicatorReplicateTo: "a", annotations.AnnotationSync: "true", annotations.AnnotationAdopt: "replicator",
				annotations.AnnotationTargetNamespaces: "a", annotations.AnnotationStatus: "1/1 namespaces synced",
			}),
			tools: []Tool{Replicator}, role: RoleSource,
			want: []string{enabled, "fleetmirror.io/adopt=replicator", sync, "fleetmirror.io/target-namespaces=a"},
			old:  []string{ReplicatorReplicateTo + "=a"},
		},
		{
			name: "fleetmirror keys that disagree",
			obj: meta(nil, map[string]string{
				ReplicatorReplicateTo: "a", annotations.AnnotationTargetNamespaces: "b", annotations.AnnotationMaxTargets: "3",
			}),
			tools: []Tool{Replicator}, role: RoleSource,
			decided: []string{`it already has fleetmirror.io/max-targets: "3"`, `it already has fleetmirror.io/target-namespaces: "b"; the translation is "a"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kind := tt.kind
			if kind == "" {
				kind = "ConfigMap"
			}
			got := Translate(kind, tt.obj)
			if !slices.Equal(got.Tools, tt.tools) || got.Role != tt.role {
				t.Errorf("tools %v, role %q; want %v, %q", got.Tools, got.Role, tt.tools, tt.role)
			}
			if diff := cmp.Diff(tt.want, set(got.Set)); diff != "" {
				t.Errorf("Set (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.old, set(got.Old)); diff != "" {
				t.Errorf("Old (-want +got):\n%s", diff)
			}
			checkSubstrings(t, "notes", got.Notes, tt.notes)
			checkSubstrings(t, "decisions", got.Decisions, tt.decided)
		})
	}
}

func checkSubstrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %q; want %d containing %q", what, got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%s[%d] = %q; want it to contain %q", what, i, got[i], want[i])
		}
	}
}

func TestTranslateKubemirrorFinalizer(t *testing.T) {
	m := meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{KubemirrorSync: "true", KubemirrorTargetNamespaces: "a"})
	m.Finalizers = []string{"other", KubemirrorFinalizer}
	if got := Translate("Secret", m); !slices.Equal(got.Finalizers, []string{KubemirrorFinalizer}) {
		t.Errorf("finalizers %q", got.Finalizers)
	}
}

func TestTranslateNamespace(t *testing.T) {
	ns := func(v string, extra map[string]string) *metav1.ObjectMeta {
		l := map[string]string{KubemirrorAllowMirrors: v}
		for k, x := range extra {
			l[k] = x
		}
		return &metav1.ObjectMeta{Name: "team-a", Labels: l}
	}
	for _, tt := range []struct {
		name     string
		ns       *metav1.ObjectMeta
		targeted []string
		want     []string
		decided  []string
		notes    []string
	}{
		{name: "opt in", ns: ns("true", nil), want: []string{"label fleetmirror.io/allow-mirrors=true"}},
		{name: "opt out", ns: ns("false", nil), want: []string{"label fleetmirror.io/allow-mirrors=false"}},
		{name: "opt out, but named", ns: ns("false", nil), targeted: []string{"b/y", "a/x"}, decided: []string{"a/x, b/y name it"}},
		{name: "other value", ns: ns("yes", nil), notes: []string{"kubemirror ignores it"}},
		{name: "ours disagrees", ns: ns("true", map[string]string{annotations.LabelAllowMirrors: "false"}), decided: []string{"already has"}},
		{name: "ours agrees", ns: ns("true", map[string]string{annotations.LabelAllowMirrors: "true"}), want: []string{"label fleetmirror.io/allow-mirrors=true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := TranslateNamespace(tt.ns, tt.targeted)
			if diff := cmp.Diff(tt.want, set(got.Set)); diff != "" {
				t.Errorf("Set (-want +got):\n%s", diff)
			}
			checkSubstrings(t, "notes", got.Notes, tt.notes)
			checkSubstrings(t, "decisions", got.Decisions, tt.decided)
		})
	}
	if got := TranslateNamespace(&metav1.ObjectMeta{Name: "x"}, nil); got.Role != "" {
		t.Errorf("a namespace without the label: %+v", got)
	}
}

func TestKubemirrorTargets(t *testing.T) {
	src := meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{KubemirrorSync: "true", KubemirrorTargetNamespaces: "all, team-*"})
	for ns, want := range map[string]bool{"team-a": true, "other": false, "platform": false} {
		if got := KubemirrorTargets(src, ns); got != want {
			t.Errorf("KubemirrorTargets(%s) = %t", ns, got)
		}
	}
}

// FuzzTranslate feeds arbitrary values to every key: Translate never
// panics, and a translation that needs a decision sets nothing.
func FuzzTranslate(f *testing.F) {
	f.Add("team-a,app-.*", "env=prod", "default/db", "true")
	f.Add("a|b", "a in (b", "x", "1")
	f.Fuzz(func(t *testing.T, list, selector, ref, flag string) {
		for _, obj := range []*metav1.ObjectMeta{
			meta(nil, map[string]string{ReflectorAllowed: flag, ReflectorAllowedNamespaces: list, ReflectorAutoEnabled: flag, ReflectorAutoNamespacesSelector: selector}),
			meta(nil, map[string]string{ReflectorReflects: ref}),
			meta(nil, map[string]string{ReplicatorReplicateTo: list, ReplicatorReplicateToMatching: selector, ReplicatorReplicationAllowed: flag, ReplicatorReplicationAllowedNamespaces: list}),
			meta(nil, map[string]string{ReplicatorReplicateFrom: ref}),
			meta(map[string]string{KubemirrorEnabled: "true"}, map[string]string{KubemirrorSync: "true", KubemirrorTargetNamespaces: list, KubemirrorTransform: selector}),
		} {
			got := Translate("Secret", obj)
			if len(got.Decisions) > 0 && (len(got.Set) > 0 || len(got.Old) > 0) {
				t.Errorf("%v: decisions %q and keys %v", obj.Annotations, got.Decisions, got.Set)
			}
			for _, k := range got.Set {
				if !strings.HasPrefix(k.Key, annotations.Prefix) {
					t.Errorf("%v: sets %s", obj.Annotations, k.Key)
				}
			}
			// What is set parses without a problem.
			l, a := map[string]string{}, map[string]string{}
			for _, k := range got.Set {
				if k.Label {
					l[k.Key] = k.Value
				} else {
					a[k.Key] = k.Value
				}
			}
			if r := annotations.Parse(l, a); len(r.Problems) > 0 || r.TransformErr != nil {
				t.Errorf("%v: translation %v has problems %q %v", obj.Annotations, got.Set, r.Problems, r.TransformErr)
			}
		}
	})
}
