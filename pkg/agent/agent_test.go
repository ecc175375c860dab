package agent

import (
	"flag"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

func TestParseResourceTypes(t *testing.T) {
	tests := []struct {
		in      string
		want    []schema.GroupVersionKind
		wantErr string
	}{
		{in: "Secret.v1, ConfigMap.v1", want: []schema.GroupVersionKind{{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ConfigMap"}}},
		{in: "Ingress.v1.networking.k8s.io", want: []schema.GroupVersionKind{{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}}},
		{in: "Middleware.v1alpha1.traefik.io", want: []schema.GroupVersionKind{{Group: "traefik.io", Version: "v1alpha1", Kind: "Middleware"}}},
		{in: "Secret", wantErr: `"Secret"`},
		{in: "secret.v1", wantErr: `"secret.v1"`},
		{in: "Secret.", wantErr: `"Secret."`},
		{in: "Secret.v1,.v1", wantErr: `".v1"`},
		{in: " , ", wantErr: "no kind"},
	}
	for _, tt := range tests {
		got, err := ParseResourceTypes(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseResourceTypes(%q) error = %v, want one naming %s", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Fatalf("ParseResourceTypes(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ParseResourceTypes(%q)[%d] = %v, want %v", tt.in, i, got[i], tt.want[i])
			}
		}
	}
}

func parse(args ...string) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs, Binary{Name: "fleetmirror-member", Cluster: "local"})
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.Complete()
}

func TestFlags(t *testing.T) {
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if len(o.ResourceTypes) != 0 || !o.LazyWatchers || o.MaxTargets != 100 || o.ExcludedNamespaces[len(o.ExcludedNamespaces)-1].String() != o.Namespace {
		t.Errorf("defaults: %+v", o)
	}
	for _, bad := range [][]string{
		{"--resource-types=Role.v1.rbac.authorization.k8s.io"},
		{"--resource-types=ServiceAccount.v1"},
		{"--deny-kinds=lower"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	// Malformed patterns would match nothing: an exclusion that excludes
	// nothing. They are refused, naming the flag and the pattern.
	for _, bad := range []struct{ flag, want string }{
		{"--excluded-namespaces=kube-system,kube-[system", `--excluded-namespaces: bad pattern "kube-[system"`},
		{"--included-namespaces=team-\\", "--included-namespaces: bad pattern"},
		{"--excluded-namespaces=Kube-*", `--excluded-namespaces: pattern "Kube-*" can never match a name`},
		{"--strip-keys=meta.helm.sh/*,example.com/[", `--strip-keys: bad pattern "example.com/["`},
	} {
		if _, err := parse(bad.flag); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want %q", bad.flag, err, bad.want)
		}
	}
	if _, err := parse("--resource-types=RoleBinding.v1.rbac.authorization.k8s.io", "--allow-privilege-kinds"); err != nil {
		t.Errorf("privilege kinds with the opt-in: %v", err)
	}
	o, err = parse("--deny-kinds=Widget.example.com,Service")
	if err != nil {
		t.Fatal(err)
	}
	if want := []schema.GroupKind{{Group: "example.com", Kind: "Widget"}, {Kind: "Service"}}; len(o.DenyKinds) != 2 || o.DenyKinds[0] != want[0] || o.DenyKinds[1] != want[1] {
		t.Errorf("deny kinds = %v, want %v", o.DenyKinds, want)
	}
}

// TestFlagValues: every value out of range stops the agent at start-up,
// with an error naming the flag and the value; the edges of each range pass.
func TestFlagValues(t *testing.T) {
	tests := []struct {
		args []string
		want string // empty: accepted
	}{
		{[]string{"--cluster-name=Bad/Name"}, `--cluster-name: "Bad/Name" is not a DNS-1123 label`},
		{[]string{"--cluster-name=eu-1.prod"}, `--cluster-name: "eu-1.prod" is not a DNS-1123 label`},
		{[]string{"--cluster-name="}, `--cluster-name: "" is not a DNS-1123 label`},
		{[]string{"--cluster-name=eu-1"}, ""},
		{[]string{"--namespace=Fleet_System"}, `--namespace: "Fleet_System" is not a DNS-1123 label`},
		{[]string{"--namespace=fleetmirror"}, ""},
		{[]string{"--api-call-timeout=0s"}, "--api-call-timeout must be positive, got 0s"},
		{[]string{"--api-call-timeout=-1s"}, "--api-call-timeout must be positive, got -1s"},
		{[]string{"--lazy-probe-interval=0"}, "--lazy-probe-interval must be positive, got 0s"},
		{[]string{"--discovery-interval=0"}, "--discovery-interval must be positive, got 0s"},
		{[]string{"--circuit-breaker-base-delay=0"}, "--circuit-breaker-base-delay must be positive, got 0s"},
		{[]string{"--circuit-breaker-max-delay=-1m"}, "--circuit-breaker-max-delay must be positive, got -1m0s"},
		{[]string{"--circuit-breaker-base-delay=2m", "--circuit-breaker-max-delay=1m"}, "--circuit-breaker-max-delay (1m0s) must not be less than --circuit-breaker-base-delay (2m0s)"},
		{[]string{"--circuit-breaker-failures=0", "--circuit-breaker-base-delay=0", "--circuit-breaker-max-delay=0"}, ""},
		{[]string{"--circuit-breaker-failures=-1"}, "--circuit-breaker-failures must not be negative (0 disables the breaker), got -1"},
		{[]string{"--graceful-shutdown-timeout=-1s"}, "--graceful-shutdown-timeout must not be negative, got -1s"},
		{[]string{"--graceful-shutdown-timeout=0"}, ""},
		{[]string{"--resync-period=-1s"}, "--resync-period must not be negative, got -1s"},
		{[]string{"--resync-period=0"}, ""},
		{[]string{"--watch-idle-timeout=-1s"}, "--watch-idle-timeout must not be negative, got -1s"},
		{[]string{"--workers=0"}, "--workers must be at least 1, got 0"},
		{[]string{"--workers=1"}, ""},
		{[]string{"--write-parallelism=0"}, "--write-parallelism must be at least 1, got 0"},
		{[]string{"--max-targets=0"}, "--max-targets must be at least 1, got 0"},
		{[]string{"--cluster-max-in-flight=-1"}, "--cluster-max-in-flight must not be negative (0: no bound), got -1"},
		{[]string{"--cluster-max-in-flight=0"}, ""},
		{[]string{"--max-procs=-1"}, "--max-procs must not be negative (0: the Go runtime's default), got -1"},
		{[]string{"--max-procs=0"}, ""},
		{[]string{"--kube-api-qps=10", "--kube-api-burst=0"}, "--kube-api-burst must be at least 1 when --kube-api-qps is set, got 0"},
		{[]string{"--kube-api-qps=0", "--kube-api-burst=0"}, ""},
		{[]string{"--kube-api-qps=10", "--kube-api-burst=1"}, ""},
		{[]string{"--uninstall", "--uninstall-timeout=0"}, "--uninstall-timeout must be positive, got 0s"},
		{[]string{"--uninstall-keep-mirrors"}, "--uninstall-keep-mirrors needs --uninstall"},
		{[]string{"--uninstall", "--uninstall-keep-mirrors", "--uninstall-timeout=1s"}, ""},
	}
	for _, tt := range tests {
		_, err := parse(tt.args...)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tt.args, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%q: error %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestProcs: --max-procs only lowers the Go runtime's GOMAXPROCS, and
// the GOMAXPROCS environment variable, when set, wins over it.
func TestProcs(t *testing.T) {
	for _, tt := range []struct {
		limit, current int
		envSet         bool
		want           int
	}{
		{limit: 2, current: 64, want: 2},
		{limit: 2, current: 2, want: 2},
		{limit: 2, current: 1, want: 1}, // a machine of one CPU
		{limit: 8, current: 4, want: 4}, // a CPU limit below it: the runtime's
		{limit: 0, current: 64, want: 64},
		{limit: 2, current: 64, envSet: true, want: 64},
	} {
		if got := procs(tt.limit, tt.current, tt.envSet); got != tt.want {
			t.Errorf("procs(%d, %d, env set %t) = %d, want %d", tt.limit, tt.current, tt.envSet, got, tt.want)
		}
	}
}

// FuzzParseResourceTypes checks that no flag value crashes the parser and
// that every accepted kind is well formed.
func FuzzParseResourceTypes(f *testing.F) {
	for _, s := range []string{"Secret.v1", "Ingress.v1.networking.k8s.io", "a.b.c", ",,", "X..y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kinds, err := ParseResourceTypes(s)
		if err != nil {
			return
		}
		for _, k := range kinds {
			if k.Kind == "" || k.Version == "" || k.Kind[0] < 'A' || k.Kind[0] > 'Z' {
				t.Fatalf("accepted %q as %v", s, k)
			}
		}
	})
}

func TestConfigAppliesRateLimits(t *testing.T) {
	o, err := parse("--kube-api-qps=37", "--kube-api-burst=73")
	if err != nil {
		t.Fatal(err)
	}
	base := &rest.Config{Host: "https://example.invalid", QPS: 5, Burst: 10}
	o.RESTConfig = base
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 37 || cfg.Burst != 73 {
		t.Errorf("QPS/Burst = %v/%v, want 37/73", cfg.QPS, cfg.Burst)
	}
	if base.QPS != 5 {
		t.Error("the caller's config was changed")
	}
}

func TestNoClientRateLimitByDefault(t *testing.T) {
	for _, args := range [][]string{nil, {"--kube-api-qps=0"}, {"--kube-api-qps=-5"}} {
		o, err := parse(args...)
		if err != nil {
			t.Fatal(err)
		}
		// client-go reads 0 as its default of 5 per second: never pass it on.
		if cfg := o.Limited(&rest.Config{}); cfg.QPS >= 0 {
			t.Errorf("%v: QPS = %v, want negative (no client-side limit)", args, cfg.QPS)
		}
	}
}
