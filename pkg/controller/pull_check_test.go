package controller

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// secret builds a Secret object for the pull checks.
func secret(ns, name, typ string, labels, annots map[string]string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": typ}}
	if data != nil {
		u.Object["data"] = data
	}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annots)
	return u
}

func pullLabels(more ...string) map[string]string {
	l := map[string]string{annotations.LabelPull: "true"}
	for i := 0; i+1 < len(more); i += 2 {
		l[more[i]] = more[i+1]
	}
	return l
}

func TestCheckPullMirror(t *testing.T) {
	from := func(v string) map[string]string { return map[string]string{annotations.AnnotationMirrorFrom: v} }
	for _, tc := range []struct {
		name   string
		obj    *unstructured.Unstructured
		remote bool
		nsRef  string // NamespaceRefusal
		srcRef string // SourceRefusal
		// reason is the verdict's reason; "" when nothing stops it.
		reason, msg string
	}{
		{name: "ok", obj: secret("dst", "x", "Opaque", pullLabels(), from("src/db"), nil)},
		{name: "same name elsewhere", obj: secret("dst", "db", "Opaque", pullLabels(), from("src/db"), nil)},
		{name: "remote ok", remote: true, obj: secret("dst", "x", "Opaque", pullLabels(), from("eu/src/db"), nil)},
		{name: "is a source", obj: secret("dst", "x", "Opaque", pullLabels(annotations.LabelEnabled, "true"), from("src/db"), nil),
			reason: ReasonPullRefused, msg: "itself a source"},
		{name: "is a mirror", obj: secret("dst", "x", "Opaque", pullLabels(annotations.LabelMirror, "true"), from("src/db"), nil),
			reason: ReasonPullRefused, msg: "is a mirror written by fleetmirror"},
		{name: "no mirror-from", obj: secret("dst", "x", "Opaque", pullLabels(), nil, nil),
			reason: ReasonInvalidAnnotation, msg: "does not name one"},
		{name: "malformed", obj: secret("dst", "x", "Opaque", pullLabels(), from("a/b/c/d"), nil),
			reason: ReasonInvalidAnnotation, msg: "write NAMESPACE/NAME"},
		{name: "itself", obj: secret("dst", "x", "Opaque", pullLabels(), from("dst/x"), nil),
			reason: ReasonPullRefused, msg: "names the object itself"},
		{name: "own cluster", remote: true, obj: secret("dst", "x", "Opaque", pullLabels(), from("here/src/db"), nil),
			reason: ReasonPullRefused, msg: "own cluster here; write src/db"},
		{name: "namespace", obj: secret("dst", "x", "Opaque", pullLabels(), from("src/db"), nil), nsRef: "excluded",
			reason: ReasonPullRefused, msg: "excluded"},
		{name: "hub policy", remote: true, obj: secret("dst", "x", "Opaque", pullLabels(), from("eu/src/db"), nil), srcRef: "not from eu",
			reason: ReasonPullRefused, msg: "not from eu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PullMirror{Cluster: "here", Object: tc.obj, NamespaceRefusal: tc.nsRef, SourceRefusal: tc.srcRef}
			p.Ref, p.RefErr = ParsePullMirror(tc.obj)
			v := CheckPullMirror(p)
			if tc.reason == "" {
				if v != nil {
					t.Fatalf("stopped: %+v", v)
				}
				return
			}
			if v == nil || v.Reason != tc.reason || !strings.Contains(v.Message, tc.msg) || v.State != PullRefused {
				t.Fatalf("got %+v, want reason %s with %q", v, tc.reason, tc.msg)
			}
		})
	}
}

func TestServes(t *testing.T) {
	for _, tc := range []struct {
		value          string
		member, hubToo bool
	}{
		{value: "ns/name", member: true},
		{value: "c/ns/name", hubToo: true},
		{value: "garbage", member: true},
		{value: "a/b/c/d", member: true},
		{value: "/ns/name", member: true},
		{value: "C_/ns/name", hubToo: true},
	} {
		ref, _ := annotations.ParseMirrorFrom(tc.value)
		if Serves(false, ref) != tc.member || Serves(true, ref) != tc.hubToo {
			t.Errorf("%q: member serves %t, hub %t; want %t, %t", tc.value, Serves(false, ref), Serves(true, ref), tc.member, tc.hubToo)
		}
	}
}

func TestCheckPullSource(t *testing.T) {
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	enabled := map[string]string{annotations.LabelEnabled: "true"}
	allow := func(v string) map[string]string { return map[string]string{annotations.AnnotationAllowPullInto: v} }
	data := map[string]any{"k": "dg=="}
	dst := secret("dst", "x", "Opaque", pullLabels(), map[string]string{annotations.AnnotationMirrorFrom: "src/db"}, nil)
	inSync := dst.DeepCopy()
	inSync.Object["data"] = map[string]any{"k": "dg==", "own": "bWluZQ=="}
	content := desired.PullContent(secret("src", "db", "Opaque", nil, nil, data))
	inSync.SetAnnotations(map[string]string{annotations.AnnotationContentHash: desired.PullHash(content)})
	immutable := dst.DeepCopy()
	immutable.Object["immutable"] = true
	for _, tc := range []struct {
		name   string
		dst    *unstructured.Unstructured
		src    *unstructured.Unstructured
		remote bool
		state  PullState
		msg    string
	}{
		{name: "allowed", dst: dst, src: secret("src", "db", "Opaque", enabled, allow("dst"), data), state: PullOutOfSync},
		{name: "allowed by glob", dst: dst, src: secret("src", "db", "Opaque", enabled, allow("team-a, d*"), data), state: PullOutOfSync},
		{name: "in sync", dst: inSync, src: secret("src", "db", "Opaque", enabled, allow("dst"), data), state: PullInSync},
		{name: "no consent", dst: dst, src: secret("src", "db", "Opaque", enabled, nil, data), state: PullNotAllowed, msg: "allows no pulls"},
		{name: "other namespace", dst: dst, src: secret("src", "db", "Opaque", enabled, allow("team-a, Bad_NS"), data),
			state: PullNotAllowed, msg: `does not allow pulls into dst (fleetmirror.io/allow-pull-into: "team-a, Bad_NS"); it has invalid entries`},
		{name: "remote entry for a local pull", dst: dst, src: secret("src", "db", "Opaque", enabled, allow("*/dst"), data), state: PullNotAllowed},
		{name: "remote", remote: true, dst: dst, src: secret("src", "db", "Opaque", enabled, allow("here/dst"), data), state: PullOutOfSync},
		{name: "remote, other cluster", remote: true, dst: dst, src: secret("src", "db", "Opaque", enabled, allow("there/dst"), data),
			state: PullNotAllowed, msg: "into here/dst"},
		{name: "local entry for a remote pull", remote: true, dst: dst, src: secret("src", "db", "Opaque", enabled, allow("dst"), data), state: PullNotAllowed},
		{name: "source is a mirror", dst: dst, src: secret("src", "db", "Opaque", map[string]string{annotations.LabelMirror: "true"},
			map[string]string{annotations.AnnotationSource: "c/a/b"}, data), state: PullRefused, msg: "itself a mirror (of c/a/b)"},
		{name: "source is a pull mirror", dst: dst, src: secret("src", "db", "Opaque", pullLabels(annotations.LabelEnabled, "true"), allow("*"), data),
			state: PullRefused, msg: "itself a pull mirror"},
		{name: "never mirrored", dst: dst, src: secret("src", "db", "kubernetes.io/service-account-token", enabled, allow("*"), data),
			state: PullRefused, msg: "never mirrored"},
		{name: "type", dst: dst, src: secret("src", "db", "kubernetes.io/tls", enabled, allow("*"), data),
			state: PullRefused, msg: "its type Opaque differs from the source's kubernetes.io/tls"},
		{name: "immutable", dst: immutable, src: secret("src", "db", "Opaque", enabled, allow("*"), data), state: PullRefused, msg: "immutable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := annotations.MirrorFrom{Namespace: "src", Name: "db"}
			if tc.remote {
				ref.Cluster = "there"
			}
			v := CheckPullSource(PullSource{GVK: secrets, Mirror: PullMirror{Cluster: "here", Object: tc.dst, Ref: ref}, Source: tc.src})
			if v.State != tc.state || !strings.Contains(v.Message, tc.msg) {
				t.Fatalf("got %s %q, want %s with %q", v.State, v.Message, tc.state, tc.msg)
			}
			if (v.State == PullInSync || v.State == PullOutOfSync) != (v.Content != nil) {
				t.Errorf("content %v for state %s", v.Content, v.State)
			}
		})
	}
}

// A deleted source is missing; an immutable source gives content without
// immutable: the pull mirror is the owner's, and is never replaced.
func TestPullContent(t *testing.T) {
	src := secret("src", "db", "Opaque", map[string]string{annotations.LabelEnabled: "true"}, map[string]string{annotations.AnnotationAllowPullInto: "*"}, map[string]any{"k": "dg=="})
	src.Object["immutable"] = true
	dst := secret("dst", "x", "Opaque", pullLabels(), nil, nil)
	v := CheckPullSource(PullSource{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Mirror: PullMirror{Object: dst, Ref: annotations.MirrorFrom{Namespace: "src", Name: "db"}}, Source: src})
	if _, ok := v.Content["immutable"]; ok || v.Content["type"] != "Opaque" || v.Content["data"] == nil {
		t.Fatalf("content %v", v.Content)
	}
	now := metav1.Now()
	src.SetDeletionTimestamp(&now)
	if v := CheckPullSource(PullSource{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Mirror: PullMirror{Object: dst}, Source: src}); v.State != PullSourceMissing {
		t.Fatalf("deleted source: %+v", v)
	}
}

func TestWriteVerdictAndStatus(t *testing.T) {
	ref := annotations.MirrorFrom{Namespace: "src", Name: "db"}
	conflict := WriteVerdict(PullVerdict{}, &apply.PullConflictError{Fields: []string{".data.k (\"kubectl\")"}})
	if conflict.State != PullConflict || conflict.Reason != ReasonPullConflict || !strings.Contains(conflict.Message, ".data.k") {
		t.Errorf("conflict: %+v", conflict)
	}
	failed := WriteVerdict(PullVerdict{}, apierrors.NewInternalError(errors.New("boom")))
	if failed.State != PullFailed || !strings.Contains(failed.Message, "boom") {
		t.Errorf("failure: %+v", failed)
	}
	for _, tc := range []struct {
		v    PullVerdict
		kept bool
		want string
	}{
		{v: PullVerdict{State: PullInSync}, want: "InSync: pulled from src/db"},
		{v: SourceMissing("the source src/db does not exist"), kept: true, want: "SourceMissing: the source src/db does not exist; the content pulled last is kept"},
		{v: SourceMissing("the source src/db does not exist"), want: "SourceMissing: the source src/db does not exist; nothing pulled yet"},
	} {
		if got := PullStatus(tc.v, ref, tc.kept); got != tc.want {
			t.Errorf("PullStatus = %q, want %q", got, tc.want)
		}
	}
}

func TestPullPolicies(t *testing.T) {
	policy := targets.Policy{Excluded: glob.MustParseList("kube-*")}
	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   string
	}{
		{ns: "team-a"},
		{ns: "team-a", labels: map[string]string{annotations.LabelAllowMirrors: "true"}},
		{ns: "kube-system", want: "excluded by the agent's policy"},
		{ns: "registry", want: "the hub never writes into its namespace registry of cluster hub: it holds Secrets"},
		{ns: "team-b", labels: map[string]string{annotations.LabelAllowMirrors: "false"}, want: "labelled fleetmirror.io/allow-mirrors=false"},
	} {
		got := PullNamespaceRefusal(policy, glob.MustParseList("registry"), "it holds Secrets", "hub", tc.ns, tc.labels)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s %v: %q, want %q", tc.ns, tc.labels, got, tc.want)
		}
	}
	ref := annotations.MirrorFrom{Cluster: "eu-1", Namespace: "platform", Name: "db"}
	for _, tc := range []struct {
		clusters, namespaces glob.List
		refused              bool
	}{
		{},
		{clusters: glob.MustParseList("eu-*")},
		{clusters: glob.MustParseList("us-*"), refused: true},
		{namespaces: glob.MustParseList("platform")},
		{clusters: glob.MustParseList("eu-*"), namespaces: glob.MustParseList("team-*"), refused: true},
	} {
		if got := PullSourceRefusal(tc.clusters, tc.namespaces, ref); (got != "") != tc.refused {
			t.Errorf("allowed %v %v: %q", tc.clusters, tc.namespaces, got)
		}
	}
}

func TestCheckFoundSource(t *testing.T) {
	ref := annotations.MirrorFrom{Namespace: "src", Name: "db"}
	now := metav1.Now()
	deleting := secret("src", "db", "Opaque", map[string]string{annotations.LabelEnabled: "true"}, nil, nil)
	deleting.SetDeletionTimestamp(&now)
	for _, tc := range []struct {
		name string
		obj  metav1.Object
		want string // "" for a source
	}{
		{name: "none", obj: nil, want: "does not exist"},
		{name: "source", obj: secret("src", "db", "Opaque", map[string]string{annotations.LabelEnabled: "true"}, nil, nil)},
		{name: "not a source", obj: secret("src", "db", "Opaque", nil, nil, nil), want: "has no label fleetmirror.io/enabled=true"},
		{name: "mirror", obj: secret("src", "db", "Opaque", map[string]string{annotations.LabelMirror: "true"}, map[string]string{annotations.AnnotationSource: "c/a/b"}, nil),
			want: "itself a mirror (of c/a/b)"},
		{name: "deleting", obj: deleting, want: "being deleted"},
	} {
		v := CheckFoundSource(ref, tc.obj)
		switch {
		case tc.want == "" && v != nil:
			t.Errorf("%s: %+v, want none", tc.name, v)
		case tc.want != "" && (v == nil || !strings.Contains(v.Message, tc.want)):
			t.Errorf("%s: %+v, want %q", tc.name, v, tc.want)
		}
	}
}
