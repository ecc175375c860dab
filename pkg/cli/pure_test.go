package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

func TestParseObjectArg(t *testing.T) {
	for _, tt := range []struct {
		arg, kind, name string
		ok              bool
	}{
		{"secret/db", "secret", "db", true},
		{"cm/app-config", "cm", "app-config", true},
		{"Secret.v1/db", "Secret.v1", "db", true},
		{"Ingress.v1.networking.k8s.io/web.example", "Ingress.v1.networking.k8s.io", "web.example", true},
		{"secret", "", "", false},
		{"secret/", "", "", false},
		{"/db", "", "", false},
		{"secret/db/x", "", "", false},
		{"secret/Bad_Name", "", "", false},
		{"sec ret/db", "", "", false},
		{"", "", "", false},
	} {
		kind, name, err := ParseObjectArg(tt.arg)
		if (err == nil) != tt.ok || kind != tt.kind || name != tt.name {
			t.Errorf("ParseObjectArg(%q) = %q, %q, %v; want %q, %q, ok %v", tt.arg, kind, name, err, tt.kind, tt.name, tt.ok)
		}
	}
}

func FuzzParseObjectArg(f *testing.F) {
	for _, s := range []string{"secret/db", "cm/a", "Secret.v1/x", "a/b/c", "/", "x/", "/y", "s/Bad_Name", "s/" + strings.Repeat("a", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		kind, name, err := ParseObjectArg(arg)
		if err != nil {
			return
		}
		if kind+"/"+name != arg {
			t.Fatalf("ParseObjectArg(%q) = %q, %q: not the argument split", arg, kind, name)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || kind == "" {
			t.Fatalf("ParseObjectArg(%q) accepted kind %q, name %q", arg, kind, name)
		}
	})
}

func TestClosestKey(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"fleetmirror.io/target-namespace", annotations.AnnotationTargetNamespaces},
		{"fleetmirror.io/target-namespces", annotations.AnnotationTargetNamespaces},
		{"fleetmirror.io/targets", annotations.AnnotationMaxTargets}, // nearer than target-namespaces
		{"fleetmirror.io/snyc", annotations.AnnotationSync},
		{"fleetmirror.io/enable", annotations.LabelEnabled},
		{"fleetmirror.io/max-target", annotations.AnnotationMaxTargets},
		{"fleetmirror.io/Transform", annotations.AnnotationTransform},
		{"fleetmirror.io/something-else-entirely", ""},
	} {
		if got := ClosestKey(tt.key); got != tt.want {
			t.Errorf("ClosestKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestUnknownKeys(t *testing.T) {
	got := UnknownKeys(map[string]string{
		annotations.AnnotationSync: "true", annotations.AnnotationStatus: "x", "fleetmirror.io/snyc": "true", "other.io/x": "y",
	})
	if len(got) != 1 || got[0] != "fleetmirror.io/snyc" {
		t.Errorf("UnknownKeys = %v, want [fleetmirror.io/snyc]", got)
	}
}

func TestAgentFrom(t *testing.T) {
	deployment := func(name string, labels map[string]string, command []string, args ...string) appsv1.Deployment {
		return appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fm", Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Command: command, Args: args}},
			}}},
		}
	}
	other := deployment("other", nil, []string{"/bin/sleep"}, "1d")
	for _, tt := range []struct {
		name        string
		deployments []appsv1.Deployment
		from        string
		cluster     string
		maxTargets  int
		// excludes is a namespace the policy excludes.
		excludes string
	}{
		{"none: defaults", nil, "", "local", 100, "fleetmirror-system"},
		{"not the agent: defaults", []appsv1.Deployment{other}, "", "local", 100, "fleetmirror-system"},
		{"by command", []appsv1.Deployment{other, deployment("m", nil, []string{"/usr/local/bin/fleetmirror-member"}, "--cluster-name=eu-1", "--max-targets=7")},
			"fm/m", "eu-1", 7, "fm"},
		{"by chart label", []appsv1.Deployment{deployment("m", map[string]string{"app.kubernetes.io/name": "fleetmirror-member"}, nil, "--excluded-namespaces=secret-*")},
			"fm/m", "local", 100, "secret-stuff"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := AgentFrom(tt.deployments)
			if err != nil {
				t.Fatal(err)
			}
			if a.From != tt.from || a.Options.ClusterName != tt.cluster || a.Options.MaxTargets != tt.maxTargets || a.Policy().Allows(tt.excludes) {
				t.Errorf("AgentFrom = from %q, cluster %q, max %d, allows %s %v; want %q, %q, %d, false",
					a.From, a.Options.ClusterName, a.Options.MaxTargets, tt.excludes, a.Policy().Allows(tt.excludes), tt.from, tt.cluster, tt.maxTargets)
			}
			if tt.from == "" && !strings.Contains(a.Describe(), "default") {
				t.Errorf("Describe() = %q, want it to say the defaults are used", a.Describe())
			}
		})
	}
	if _, err := AgentFrom([]appsv1.Deployment{deployment("m", nil, []string{"fleetmirror-member"}, "--max-targets=0")}); err == nil {
		t.Error("AgentFrom accepted arguments the agent refuses")
	}
}

func TestWatches(t *testing.T) {
	discover, _ := AgentFrom(nil)
	explicit, err := AgentFrom([]appsv1.Deployment{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fm", Name: "m"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Command: []string{"fleetmirror-member"}, Args: []string{"--resource-types=Secret.v1", "--deny-kinds=Widget.example.com"},
		}}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, tt := range []struct {
		name  string
		agent Agent
		gvk   schema.GroupVersionKind
		want  bool
	}{
		{"discovering: Secret", discover, secret, true},
		{"discovering: Pod is denied", discover, pod, false},
		{"explicit: Secret", explicit, secret, true},
		{"explicit: ConfigMap is not listed", explicit, cm, false},
	} {
		if got, why := tt.agent.Watches(tt.gvk); got != tt.want || got == (why != "") {
			t.Errorf("%s: Watches = %v, %q; want %v", tt.name, got, why, tt.want)
		}
	}
}

func TestPending(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	c := &Client{Now: func() time.Time { return now }}
	for _, tt := range []struct {
		name      string
		user      *metav1.Time
		agent     *metav1.Time
		nsCreated time.Time
		want      bool
	}{
		{"agent wrote after the change", at(-10 * time.Second), at(-5 * time.Second), time.Time{}, false},
		{"source changed after the agent wrote", at(-5 * time.Second), at(-10 * time.Second), time.Time{}, true},
		{"agent never wrote, recent change", at(-5 * time.Second), nil, time.Time{}, true},
		{"change too long ago: the agent is late", at(-2 * PendingWindow), nil, time.Time{}, false},
		{"namespace created after the agent wrote", at(-time.Hour), at(-30 * time.Minute), now.Add(-time.Second), true},
	} {
		src := &unstructured.Unstructured{}
		var mfs []metav1.ManagedFieldsEntry
		mfs = append(mfs, metav1.ManagedFieldsEntry{Manager: "kubectl", Time: tt.user})
		if tt.agent != nil {
			mfs = append(mfs, metav1.ManagedFieldsEntry{Manager: member.FieldManager, Time: tt.agent})
		}
		src.SetManagedFields(mfs)
		if got := c.pending(src, tt.nsCreated); got != tt.want {
			t.Errorf("%s: pending = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestFixesEditTheRequest: the fixes of why name where the source's
// request is edited: its annotations, or the spec of the MirrorPolicy that
// names it.
func TestFixesEditTheRequest(t *testing.T) {
	var agent Agent
	agent.Options.MaxTargets = 50
	excluded := func(reason string) []Target {
		return []Target{{Cluster: agent.Options.ClusterName, Namespace: "b", State: Excluded, Reason: reason}}
	}
	for _, tt := range []struct {
		name    string
		source  Source
		targets []Target
		in      string
		want    string
	}{
		{"no entries, annotations", Source{Enabled: true, Sync: true}, nil, "",
			"kubectl annotate --overwrite secret/db -n a fleetmirror.io/target-namespaces=NAMESPACE,..."},
		{"no entries, policy", Source{Enabled: true, Sync: true, Policy: "p"}, nil, "",
			"kubectl edit mirrorpolicy/p -n a (spec.targetNamespaces)"},
		{"not matched, annotations", Source{Enabled: true, Sync: true, Entries: []string{"c"}}, excluded("NotMatched: not named"), "b",
			"add b to fleetmirror.io/target-namespaces on secret/db -n a"},
		{"not matched, policy", Source{Enabled: true, Sync: true, Entries: []string{"c"}, Policy: "p"}, excluded("NotMatched: not named"), "b",
			"add b to spec.targetNamespaces of mirrorpolicy/p -n a"},
		{"over the limit, policy", Source{Enabled: true, Sync: true, Entries: []string{"all"}, Policy: "p"}, excluded("OverLimit: over the limit"), "b",
			"raise spec.maxTargets of mirrorpolicy/p -n a (up to the agent's --max-targets, 50), or target fewer namespaces"},
		{"selector, policy", Source{Enabled: true, Sync: true, NamespaceSelector: "team=x", Policy: "p"}, excluded("NotMatched: fleetmirror.io/target-namespace-selector does not select it"), "b",
			"kubectl label namespace b team=x (if its owners agree), or add b to spec.targetNamespaces of mirrorpolicy/p -n a"},
		{"missing namespace, policy", Source{Enabled: true, Sync: true, Entries: []string{"c"}, Policy: "p"}, nil, "b",
			"kubectl create namespace b (and name it in spec.targetNamespaces of mirrorpolicy/p -n a)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.source.Kind, tt.source.Namespace, tt.source.Name = "Secret", "a", "db"
			a := explain(&Report{Source: tt.source, Targets: tt.targets}, agent, tt.in)
			if a.Fix != tt.want {
				t.Errorf("fix:\n got %q\nwant %q\n(cause %q)", a.Fix, tt.want, a.Cause)
			}
		})
	}
}

// TestEveryKeyIsKnown checks that every Annotation* and Label* key of
// pkg/annotations/keys.go is known to the plugin, so that `why` never
// calls one of ours "not a fleetmirror key".
func TestEveryKeyIsKnown(t *testing.T) {
	declared, err := fleettest.DeclaredKeys(filepath.Join("..", "annotations", "keys.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(declared) < 20 {
		t.Fatalf("found only %d keys in keys.go", len(declared))
	}
	on := map[string]string{}
	for _, k := range declared {
		on[k] = "x"
	}
	if got := UnknownKeys(on); len(got) > 0 {
		t.Errorf("keys of pkg/annotations the plugin calls unknown: %v", got)
	}
}
