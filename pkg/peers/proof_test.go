package peers_test

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// origin is the source app/db the copies below claim to come from.
var origin = peers.Origin{Namespace: "app", Name: "db", UID: "uid-1", ResourceVersion: "4711", Ref: "eu-1/app/db"}

// The copies below carry exactly what each tool writes on the copies it
// makes, read from its source code (see peers.Proof).

// reflectorCopy is what kubernetes-reflector writes on an automatic copy
// of ns/name (ResourceMirror.ResourceReflect): C#'s bool.ToString() gives
// "True".
func reflectorCopy(ns, name string, edit func(a map[string]string)) metav1.Object {
	a := map[string]string{
		peers.ReflectorAutoReflects:     "True",
		peers.ReflectorReflects:         ns + "/" + name,
		peers.ReflectorReflectedVersion: origin.ResourceVersion,
		peers.ReflectorReflectedAt:      "2026-05-01T10:00:00.0000000+00:00",
	}
	return object(nil, a, edit)
}

// replicatorPushCopy is what kubernetes-replicator writes on a copy made
// for replicate-to (ReplicateObjectTo): the source's labels and three
// annotations, none of which names the source.
func replicatorPushCopy(version string, edit func(a map[string]string)) metav1.Object {
	a := map[string]string{
		peers.ReplicatorReplicatedAt:          "2026-05-01T10:00:00Z",
		peers.ReplicatorReplicatedFromVersion: version,
		peers.ReplicatorReplicatedKeys:        "password",
	}
	return object(map[string]string{annotations.LabelEnabled: "true", "team": "a"}, a, edit)
}

// kubemirrorCopy is what kubemirror writes on a copy of ns/name with uid
// (createSecretMirror, buildMirrorAnnotations).
func kubemirrorCopy(ns, name, uid string, edit func(a map[string]string)) metav1.Object {
	l := map[string]string{peers.KubemirrorManagedByLabel: peers.KubemirrorManagedByValue, peers.KubemirrorMirror: "true"}
	a := map[string]string{
		peers.KubemirrorSourceNamespace:                    ns,
		peers.KubemirrorSourceName:                         name,
		peers.KubemirrorSourceUID:                          uid,
		peers.KubemirrorPrefix + "source-content-hash":     "abc",
		peers.KubemirrorPrefix + "last-sync-time":          "2026-05-01T10:00:00Z",
		peers.KubemirrorPrefix + "source-resource-version": "4711",
	}
	return object(l, a, edit)
}

// kyvernoClone is what a Kyverno generate rule with clone writes on its
// copy of a source in namespace ns with uid (generate/clone.go
// manageClone, addSourceLabels; common.ManageLabels): the source's labels,
// the clone-source tag Kyverno put on the source, managed-by, the policy,
// rule and trigger, and the source's group, version, kind, namespace and
// UID. No label names the source.
func kyvernoClone(ns, uid string, edit func(l map[string]string)) metav1.Object {
	l := map[string]string{
		"team":                               "a",
		"generate.kyverno.io/clone-source":   "",
		peers.KyvernoManagedByLabel:          peers.KyvernoManagedByValue,
		peers.KyvernoPolicyName:              "sync-secrets",
		"generate.kyverno.io/rule-name":      "sync-db",
		"generate.kyverno.io/trigger-kind":   "Namespace",
		"generate.kyverno.io/trigger-uid":    "ns-uid",
		"generate.kyverno.io/source-group":   "",
		"generate.kyverno.io/source-version": "v1",
		"generate.kyverno.io/source-kind":    "Secret",
		peers.KyvernoSourceNamespace:         ns,
		peers.KyvernoSourceUID:               uid,
	}
	if edit != nil {
		edit(l)
	}
	return object(l, nil, nil)
}

// releasedCopy is what fleetmirror leaves on a synchronized mirror of
// from (a source reference) with uid that it released (apply.OrphanPatch).
func releasedCopy(from, uid string) metav1.Object {
	return object(map[string]string{"team": "a"}, map[string]string{
		annotations.AnnotationReleasedFrom:    from,
		annotations.AnnotationReleasedFromUID: uid,
	}, nil)
}

func object(l, a map[string]string, edit func(a map[string]string)) metav1.Object {
	if edit != nil {
		edit(a)
	}
	return &metav1.ObjectMeta{Namespace: "team-b", Name: "db", Labels: l, Annotations: a}
}

func TestProof(t *testing.T) {
	tests := []struct {
		name string
		tool peers.Tool
		obj  metav1.Object
		// why is part of the reason; "" when proven.
		why string
	}{
		{name: "reflector: automatic copy of the source", tool: peers.Reflector, obj: reflectorCopy("app", "db", nil)},
		{
			name: "reflector: lower-case auto-reflects", tool: peers.Reflector,
			obj: reflectorCopy("app", "db", func(a map[string]string) { a[peers.ReflectorAutoReflects] = "true" }),
		},
		{name: "reflector: copy of another namespace's source", tool: peers.Reflector, obj: reflectorCopy("other", "db", nil), why: `it reflects "other/db", not app/db`},
		{name: "reflector: copy of another name", tool: peers.Reflector, obj: reflectorCopy("app", "db2", nil), why: `it reflects "app/db2"`},
		{
			name: "reflector: pull copy a person created", tool: peers.Reflector,
			obj: reflectorCopy("app", "db", func(a map[string]string) { a[peers.ReflectorAutoReflects] = "False" }),
			why: "pull copy",
		},
		{
			name: "reflector: pull request never served", tool: peers.Reflector,
			obj: reflectorCopy("app", "db", func(a map[string]string) {
				delete(a, peers.ReflectorAutoReflects)
				delete(a, peers.ReflectorReflectedVersion)
			}),
			why: "pull copy",
		},
		{
			name: "reflector: reflected-version reset by hand", tool: peers.Reflector,
			obj: reflectorCopy("app", "db", func(a map[string]string) { a[peers.ReflectorReflectedVersion] = "" }),
			why: "has not written it",
		},
		{name: "reflector: no reflector annotations", tool: peers.Reflector, obj: object(nil, map[string]string{}, nil), why: "no " + peers.ReflectorReflects},
		{name: "reflector: another tool's copy", tool: peers.Reflector, obj: kubemirrorCopy("app", "db", "uid-1", nil), why: "no " + peers.ReflectorReflects},

		{name: "replicator: push copy of the source's current version", tool: peers.Replicator, obj: replicatorPushCopy("4711", nil)},
		{name: "replicator: push copy of another object or an older version", tool: peers.Replicator, obj: replicatorPushCopy("4700", nil), why: "not the source's current resourceVersion"},
		{name: "replicator: same-named object, no replicator annotations", tool: peers.Replicator, obj: object(nil, nil, nil), why: "no " + peers.ReplicatorReplicatedFromVersion},
		{
			name: "replicator: pull copy of the source", tool: peers.Replicator,
			obj: replicatorPushCopy("4711", func(a map[string]string) { a[peers.ReplicatorReplicateFrom] = "app/db" }),
			why: "pull copy",
		},
		{
			name: "replicator: pull copy of another source", tool: peers.Replicator,
			obj: replicatorPushCopy("4711", func(a map[string]string) { a[peers.ReplicatorReplicateFrom] = "other/db" }),
			why: `it is replicated from "other/db", not app/db`,
		},
		{
			name: "replicator: pull request never served", tool: peers.Replicator,
			obj: object(nil, map[string]string{peers.ReplicatorReplicateFrom: "app/db"}, nil),
			why: "no " + peers.ReplicatorReplicatedFromVersion,
		},
		{name: "replicator: empty version never matches", tool: peers.Replicator, obj: replicatorPushCopy("", nil), why: "no " + peers.ReplicatorReplicatedFromVersion},

		{name: "kubemirror: copy of the source", tool: peers.Kubemirror, obj: kubemirrorCopy("app", "db", "uid-1", nil)},
		{
			name: "kubemirror: copy without a recorded UID", tool: peers.Kubemirror,
			obj: kubemirrorCopy("app", "db", "", func(a map[string]string) { delete(a, peers.KubemirrorSourceUID) }),
		},
		{name: "kubemirror: copy of an earlier object of that name", tool: peers.Kubemirror, obj: kubemirrorCopy("app", "db", "uid-0", nil), why: "earlier object"},
		{name: "kubemirror: copy of another source", tool: peers.Kubemirror, obj: kubemirrorCopy("other", "db", "uid-1", nil), why: `it mirrors "other/db", not app/db`},
		{
			name: "kubemirror: source annotations without kubemirror's labels", tool: peers.Kubemirror,
			obj: func() metav1.Object {
				o := kubemirrorCopy("app", "db", "uid-1", nil)
				o.SetLabels(nil)
				return o
			}(),
			why: "no kubemirror mirror labels",
		},
		{
			name: "kubemirror: managed by someone else", tool: peers.Kubemirror,
			obj: func() metav1.Object {
				o := kubemirrorCopy("app", "db", "uid-1", nil)
				o.GetLabels()[peers.KubemirrorManagedByLabel] = "other"
				return o
			}(),
			why: "no kubemirror mirror labels",
		},

		{name: "kyverno: clone of the source", tool: peers.Kyverno, obj: kyvernoClone("app", "uid-1", nil)},
		{name: "kyverno: clone of an earlier object", tool: peers.Kyverno, obj: kyvernoClone("app", "uid-0", nil), why: "a clone of another object"},
		{name: "kyverno: clone from another namespace", tool: peers.Kyverno, obj: kyvernoClone("other", "uid-1", nil), why: `namespace "other", not of app/db`},
		{
			name: "kyverno: generated from data, not cloned", tool: peers.Kyverno,
			obj: kyvernoClone("app", "uid-1", func(l map[string]string) { delete(l, peers.KyvernoSourceUID) }),
			why: "not a clone",
		},
		{
			name: "kyverno: source labels without Kyverno's managed-by", tool: peers.Kyverno,
			obj: kyvernoClone("app", "uid-1", func(l map[string]string) { l[peers.KyvernoManagedByLabel] = "Helm" }),
			why: "no Kyverno generate labels",
		},
		{
			name: "kyverno: no policy named", tool: peers.Kyverno,
			obj: kyvernoClone("app", "uid-1", func(l map[string]string) { delete(l, peers.KyvernoPolicyName) }),
			why: "no Kyverno generate labels",
		},

		{name: "fleetmirror: released mirror of the source", tool: peers.Fleetmirror, obj: releasedCopy("eu-1/app/db", "uid-1")},
		{name: "fleetmirror: released mirror of an earlier object", tool: peers.Fleetmirror, obj: releasedCopy("eu-1/app/db", "uid-0"), why: "earlier object"},
		{name: "fleetmirror: released by another cluster's source", tool: peers.Fleetmirror, obj: releasedCopy("us-1/app/db", "uid-1"), why: `mirrors of "us-1/app/db", not eu-1/app/db`},
		{name: "fleetmirror: never released", tool: peers.Fleetmirror, obj: object(nil, map[string]string{}, nil), why: "no " + annotations.AnnotationReleasedFrom},

		{name: "unknown tool", tool: "config-syncer", obj: reflectorCopy("app", "db", nil), why: "unknown tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := peers.Proof(tt.tool, tt.obj, origin)
			if ok != (tt.why == "") || !strings.Contains(why, tt.why) || ok && why != "" {
				t.Errorf("Proof = %v, %q; want proven %v, reason containing %q", ok, why, tt.why == "", tt.why)
			}
		})
	}
}

func TestProve(t *testing.T) {
	all := peers.Tools
	tests := []struct {
		name  string
		tools []peers.Tool
		obj   metav1.Object
		want  peers.Tool
		whys  []string
	}{
		{name: "the listed tool's copy", tools: all, obj: kubemirrorCopy("app", "db", "uid-1", nil), want: peers.Kubemirror},
		{
			name: "a tool not listed", tools: []peers.Tool{peers.Reflector, peers.Replicator}, obj: kubemirrorCopy("app", "db", "uid-1", nil),
			whys: []string{"reflector: no " + peers.ReflectorReflects, "replicator: no " + peers.ReplicatorReplicatedFromVersion},
		},
		{name: "nothing listed", obj: reflectorCopy("app", "db", nil)},
		{
			name: "each tool says why", tools: all, obj: object(nil, nil, nil),
			whys: []string{"reflector: ", "; replicator: ", "; kubemirror: no kubemirror mirror labels"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := peers.Prove(tt.tools, tt.obj, origin)
			if got != tt.want {
				t.Errorf("Prove = %q (%s), want %q", got, why, tt.want)
			}
			for _, w := range tt.whys {
				if !strings.Contains(why, w) {
					t.Errorf("reason %q does not say %q", why, w)
				}
			}
		})
	}
}

func TestParseAdopt(t *testing.T) {
	tests := []struct {
		value string
		want  []peers.Tool
		// problem is part of the one problem expected; "" for none.
		problem string
	}{
		{value: ""},
		{value: " , "},
		{value: "reflector", want: []peers.Tool{peers.Reflector}},
		{value: "kubemirror, reflector,replicator", want: []peers.Tool{peers.Reflector, peers.Replicator, peers.Kubemirror}},
		{value: "fleetmirror,kyverno,kubemirror,replicator,reflector", want: peers.Tools},
		{value: "replicator,replicator", want: []peers.Tool{peers.Replicator}},
		{value: "reflector,config-syncer", want: []peers.Tool{peers.Reflector}, problem: `ignored "config-syncer", not a tool`},
		{value: "Reflector", problem: `"Reflector" (did you mean "reflector"?)`},
		{value: "a,b,c,d,e,f,g,a", problem: `"e" and 2 more`},
		{value: "all", problem: "write a comma-separated list of reflector, replicator, kubemirror, kyverno, fleetmirror"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, problems := peers.ParseAdopt(tt.value)
			if !slices.Equal(got, tt.want) {
				t.Errorf("tools = %v, want %v", got, tt.want)
			}
			switch {
			case tt.problem == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case tt.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], tt.problem)):
				t.Errorf("problems %q, want one containing %q", problems, tt.problem)
			case tt.problem != "" && !strings.HasPrefix(problems[0], annotations.AnnotationAdopt+": "):
				t.Errorf("problem %q does not name the annotation", problems[0])
			}
		})
	}
}

// FuzzParseAdopt checks that any value parses without a panic into known
// tools, once each and in the documented order, with a problem exactly
// when an entry is not a tool, of bounded length (at most five entries of
// at most 64 runes each, quoted).
func FuzzParseAdopt(f *testing.F) {
	for _, s := range []string{"", "reflector", "kubemirror,reflector", "Reflector, x", ",,,", "a,b,c,d,e,f,g", "\x00,\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		tools, problems := peers.ParseAdopt(value)
		last := -1
		for _, tl := range tools {
			i := slices.Index(peers.Tools, tl)
			if i <= last {
				t.Fatalf("tools %v: unknown, repeated or out of order", tools)
			}
			last = i
		}
		unknown := false
		for _, e := range strings.Split(value, ",") {
			if e = strings.TrimSpace(e); e != "" && !slices.Contains(peers.Tools, peers.Tool(e)) {
				unknown = true
			}
		}
		if unknown != (len(problems) == 1) || len(problems) > 1 {
			t.Fatalf("value %q: problems %q", value, problems)
		}
		for _, p := range problems {
			if len(p) > 4096 {
				t.Fatalf("problem of %d bytes", len(p))
			}
		}
	})
}
