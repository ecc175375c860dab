package charts_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// flagValue ties a flag of a binary to the chart value that sets it.
type flagValue struct {
	flag string
	// value is the dotted values path; empty for flags the chart fixes.
	value string
	// set is a non-default value, and want the flag value it must become.
	set  any
	want string
	// ownDefault says why the chart's default differs from the binary's.
	ownDefault string
}

// sharedFlags are the flags of both binaries.
var sharedFlags = []flagValue{
	{flag: "namespace", want: releaseNamespace, ownDefault: "always the release namespace"},
	{flag: "cluster-name", value: "config.clusterName", set: "edge-7", want: "edge-7"},
	{flag: "kubeconfig", value: "config.kubeconfig", set: "/etc/fleetmirror/kubeconfig", want: "/etc/fleetmirror/kubeconfig"},
	{flag: "resource-types", value: "config.resourceTypes", set: []any{"Ingress.v1.networking.k8s.io", "Secret.v1"}, want: "Ingress.v1.networking.k8s.io,Secret.v1", ownDefault: "explicit kinds, so that the ClusterRole is narrow; the binary discovers every kind"},
	{flag: "deny-kinds", value: "config.denyKinds", set: []any{"Secret", "Ingress.networking.k8s.io"}, want: "Secret,Ingress.networking.k8s.io"},
	{flag: "allow-privilege-kinds", value: "config.allowPrivilegeKinds", set: true, want: "true"},
	{flag: "discovery-interval", value: "config.discoveryInterval", set: "15m", want: "15m"},
	{flag: "lazy-watchers", value: "config.lazyWatchers", set: false, want: "false"},
	{flag: "lazy-probe-interval", value: "config.lazyProbeInterval", set: "30s", want: "30s"},
	{flag: "watch-idle-timeout", value: "config.watchIdleTimeout", set: "5m", want: "5m"},
	{flag: "circuit-breaker-failures", value: "config.circuitBreakerFailures", set: 0, want: "0"},
	{flag: "circuit-breaker-base-delay", value: "config.circuitBreakerBaseDelay", set: "1m", want: "1m"},
	{flag: "circuit-breaker-max-delay", value: "config.circuitBreakerMaxDelay", set: "1h", want: "1h"},
	{flag: "excluded-namespaces", value: "config.excludedNamespaces", set: []any{"kube-system", "team-*"}, want: "kube-system,team-*"},
	{flag: "included-namespaces", value: "config.includedNamespaces", set: []any{"apps-*"}, want: "apps-*"},
	{flag: "max-targets", value: "config.maxTargets", set: 250, want: "250"},
	{flag: "strip-keys", value: "config.stripKeys", set: []any{"example.com/*", "meta.helm.sh/*"}, want: "example.com/*,meta.helm.sh/*"},
	{flag: "workers", value: "config.workers", set: 8, want: "8"},
	{flag: "write-parallelism", value: "config.writeParallelism", set: 3, want: "3"},
	// 0 is a value (no bound), not the absence of one.
	{flag: "cluster-max-in-flight", value: "config.clusterMaxInFlight", set: 0, want: "0"},
	{flag: "max-procs", value: "config.maxProcs", set: 4, want: "4"},
	{flag: "kube-api-qps", value: "config.kubeAPIQPS", set: 50.5, want: "50.5"},
	// A large integer must not come out in exponent form (1e+06).
	{flag: "kube-api-burst", value: "config.kubeAPIBurst", set: 1000000, want: "1000000"},
	{flag: "resync-period", value: "config.resyncPeriod", set: "1h30m", want: "1h30m"},
	{flag: "status-annotation", value: "config.statusAnnotation", set: false, want: "false"},
	{flag: "verify-source-freshness", value: "config.verifySourceFreshness", set: true, want: "true"},
	{flag: "api-call-timeout", value: "config.apiCallTimeout", set: "45s", want: "45s"},
	{flag: "graceful-shutdown-timeout", value: "config.gracefulShutdownTimeout", set: "20s", want: "20s"},
	{flag: "pprof-bind-address", value: "config.pprofBindAddress", set: "127.0.0.1:6060", want: "127.0.0.1:6060"},
	{flag: "leader-elect", value: "leaderElection.enabled", want: "true", ownDefault: "several replicas are safe by default"},
	{flag: "leader-election-id", value: "leaderElection.id", set: "my-lease", want: "my-lease", ownDefault: "the release's full name, unique per namespace"},
	{flag: "leader-election-namespace", value: "leaderElection.namespace", set: "leases", want: "leases", ownDefault: "the release namespace"},
	{flag: "leader-election-lease-duration", value: "leaderElection.leaseDuration", set: "20s", want: "20s"},
	{flag: "leader-election-renew-deadline", value: "leaderElection.renewDeadline", set: "5s", want: "5s"},
	{flag: "leader-election-retry-period", value: "leaderElection.retryPeriod", set: "1s", want: "1s"},
	{flag: "metrics-bind-address", value: "metrics.port", set: 9090, want: ":9090"},
	{flag: "health-probe-bind-address", value: "health.port", set: 9091, want: ":9091"},
	{flag: "zap-log-level", value: "config.log.level", set: "debug", want: "debug"},
	{flag: "zap-encoder", value: "config.log.encoder", set: "console", want: "console"},
	{flag: "zap-devel", value: "config.log.development", set: true, want: "true"},
	{flag: "zap-stacktrace-level", value: "config.log.stacktraceLevel", set: "panic", want: "panic"},
	{flag: "zap-time-encoding", value: "config.log.timeEncoding", set: "iso8601", want: "iso8601", ownDefault: "readable timestamps"},
}

// hubFlags are the flags only the hub has.
var hubFlags = []flagValue{
	{flag: "cluster-secrets-namespace", value: "config.clusterSecretsNamespace", set: "clusters", want: "clusters", ownDefault: "the release namespace, which is the binary's --namespace"},
	{flag: "cluster-provider", value: "config.clusterProvider", set: "kubeconfig-dir", want: "kubeconfig-dir"},
	{flag: "kubeconfig-dir", value: "config.kubeconfigDir", set: "/etc/fleetmirror/clusters", want: "/etc/fleetmirror/clusters"},
	{flag: "allow-kubeconfig-plugins", value: "config.allowKubeconfigPlugins", set: true, want: "true"},
	{flag: "allowed-source-clusters", value: "config.allowedSourceClusters", set: []any{"prod-*", "hub"}, want: "prod-*,hub"},
	{flag: "allowed-source-namespaces", value: "config.allowedSourceNamespaces", set: []any{"platform"}, want: "platform"},
	{flag: "remote-cleanup-timeout", value: "config.remoteCleanupTimeout", set: "10m", want: "10m"},
	{flag: "unregistered-source-mirrors", value: "config.unregisteredSourceMirrors", set: "delete", want: "delete"},
	{flag: "cluster-probe-interval", value: "config.clusterProbeInterval", set: "30s", want: "30s"},
	{flag: "cluster-probe-timeout", value: "config.clusterProbeTimeout", set: "2s", want: "2s"},
	{flag: "member-kinds", value: "config.memberKinds", set: false, want: "false"},
	{flag: "shards", value: "sharding.enabled", set: true, want: "auto"},
	{flag: "shard-group", want: "fm-fleetmirror-hub", ownDefault: "the release's full name, unique per namespace"},
	{flag: "shard-lease-duration", value: "sharding.leaseDuration", set: "30s", want: "30s"},
}

// notSettings are flags of both binaries that are no setting of the agent,
// so no chart value: the chart never passes them.
var notSettings = []string{
	"version",  // prints the version and exits
	"shard-id", // per Pod: the binary defaults to $POD_NAME, else the host name, which is the Pod's name
	// The uninstall hook's Job passes these (uninstall.keepMirrors,
	// uninstall.timeoutSeconds), not the Deployment: TestUninstallHook.
	"uninstall", "uninstall-keep-mirrors", "uninstall-timeout",
}

func flagsOf(chart string) []flagValue {
	if chart == "hub" {
		return slices.Concat(sharedFlags, hubFlags)
	}
	return sharedFlags
}

// flagSet is the binary's flag set, bound as cmd/member and cmd/hub bind it.
func flagSet(chart string) (*flag.FlagSet, func() error) {
	fs := flag.NewFlagSet(chart, flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	var o agent.Flags = &member.Options{}
	if chart == "hub" {
		o = &hub.Options{}
	}
	o.AddFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	return fs, o.Complete
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binary builds cmd/member and cmd/hub once and returns the path of name.
func binary(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "fleetmirror-charts-test-")
		if buildErr != nil {
			return
		}
		for _, c := range charts {
			if buildErr = fleettest.GoBuild(filepath.Join(binDir, c.binary), "./cmd/"+c.dir); buildErr != nil {
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopAPIServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// helpFlags lists the flags a binary's --help prints.
func helpFlags(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) < 20 {
		t.Fatalf("found only %d flags in %s --help:\n%s", len(flags), bin, out)
	}
	return flags
}

// containerArgs renders chart and returns the agent container's args as a
// map from flag name to value, failing on a flag given twice.
func containerArgs(t *testing.T, chart string, vals map[string]any) (map[string]string, []string) {
	t.Helper()
	var d appsv1.Deployment
	render(t, chart, vals).Get(t, "Deployment", "fleetmirror-"+chart).Decode(t, &d)
	args := d.Spec.Template.Spec.Containers[0].Args
	out := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("argument %q is not --flag=value", a)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("flag --%s given twice in %q", name, args)
		}
		out[name] = value
	}
	return out, args
}

// TestEveryFlagIsAValue checks that each flag of the binary (its --help) is
// in the table above, so a new flag cannot ship without a chart value.
func TestEveryFlagIsAValue(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			flags := helpFlags(t, binary(t, c.binary))
			var mapped []string
			for _, f := range flagsOf(c.dir) {
				mapped = append(mapped, f.flag)
			}
			for _, f := range flags {
				if !slices.Contains(mapped, f) && !slices.Contains(notSettings, f) {
					t.Errorf("flag --%s of %s has no chart value: add it to values.yaml (with a # -- comment), values.schema.json, the args in templates/_helpers.tpl or _chart.tpl, and the table in this test", f, c.binary)
				}
			}
			for _, f := range mapped {
				if !slices.Contains(flags, f) {
					t.Errorf("chart value for --%s, which %s no longer has", f, c.binary)
				}
			}
		})
	}
}

// TestValuesBecomeFlags sets every value to something else than its default
// and checks the flag it becomes.
func TestValuesBecomeFlags(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			vals := map[string]any{}
			for _, f := range flagsOf(c.dir) {
				if f.value != "" && f.set != nil {
					set(vals, f.value, f.set)
				}
			}
			got, _ := containerArgs(t, c.dir, vals)
			for _, f := range flagsOf(c.dir) {
				if got[f.flag] != f.want {
					t.Errorf("%s=%v: --%s=%q, want %q", f.value, f.set, f.flag, got[f.flag], f.want)
				}
			}
			if len(got) != len(flagsOf(c.dir)) {
				t.Errorf("rendered %d flags, want %d: %v", len(got), len(flagsOf(c.dir)), got)
			}
		})
	}
}

// TestDefaultsAreTheBinarys checks that the chart's defaults are the
// binary's, except where the chart says why not.
func TestDefaultsAreTheBinarys(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			got, _ := containerArgs(t, c.dir, nil)
			fs, _ := flagSet(c.dir)
			for _, f := range flagsOf(c.dir) {
				fl := fs.Lookup(f.flag)
				if fl == nil {
					t.Errorf("--%s: not a flag of %s", f.flag, c.binary)
					continue
				}
				value, rendered := got[f.flag]
				switch {
				case f.ownDefault != "":
					t.Logf("--%s: chart default %q (%s), binary default %q", f.flag, value, f.ownDefault, fl.DefValue)
				case fl.DefValue == "" && !rendered:
					// Empty in both: the chart leaves the flag out.
				case !rendered:
					t.Errorf("--%s is not rendered; the binary's default is %q", f.flag, fl.DefValue)
				case fl.DefValue == "" && value != "":
					// zap flags print no default; the chart's is documented.
					t.Logf("--%s: chart default %q, binary prints none", f.flag, value)
				case !sameValue(value, fl.DefValue):
					t.Errorf("--%s: chart default %q, binary default %q", f.flag, value, fl.DefValue)
				}
			}
		})
	}
}

// sameValue compares flag values as durations, numbers or strings.
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	if da, err := time.ParseDuration(a); err == nil {
		if db, err := time.ParseDuration(b); err == nil {
			return da == db
		}
	}
	if fa, err := strconv.ParseFloat(a, 64); err == nil {
		if fb, err := strconv.ParseFloat(b, 64); err == nil {
			return fa == fb
		}
	}
	return false
}

// TestBinaryAcceptsRenderedArgs runs the real binaries with the rendered
// command line (defaults, and every value set) and an unreadable kubeconfig
// appended: they must get past flag parsing and validation (exit code 2)
// and stop at loading the kubeconfig (exit code 1).
func TestBinaryAcceptsRenderedArgs(t *testing.T) {
	for _, c := range charts {
		every := map[string]any{}
		for _, f := range flagsOf(c.dir) {
			if f.value != "" && f.set != nil {
				set(every, f.value, f.set)
			}
		}
		for name, vals := range map[string]map[string]any{"defaults": nil, "every value set": every} {
			t.Run(c.dir+"/"+name, func(t *testing.T) {
				_, args := containerArgs(t, c.dir, vals)
				args = append(args, "--kubeconfig="+filepath.Join(t.TempDir(), "missing"),
					"--metrics-bind-address=0", "--health-probe-bind-address=0")
				cmd := exec.Command(binary(t, c.binary), args...)
				cmd.Env = append(os.Environ(), "KUBECONFIG=")
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "loading kubeconfig") {
					t.Fatalf("%s %q: %v, want exit code 1 at loading the kubeconfig:\n%s", c.binary, args, err, out)
				}
			})
		}
	}
}

// TestRenderedArgsParse parses the rendered command line with the binaries'
// own flag sets and option checks.
func TestRenderedArgsParse(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			_, args := containerArgs(t, c.dir, values("config.resourceTypes", []any{"Ingress.v1.networking.k8s.io"}))
			fs, finish := flagSet(c.dir)
			if err := fs.Parse(args); err != nil {
				t.Fatalf("parsing %q: %v", args, err)
			}
			if err := finish(); err != nil {
				t.Fatalf("options of %q: %v", args, err)
			}
			if fs.NArg() != 0 {
				t.Fatalf("arguments left over: %q", fs.Args())
			}
		})
	}
}
