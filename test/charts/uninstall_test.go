package charts_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// hookName is the name of the uninstall hook's objects in the release.
func hookName(chart string) string { return releaseName + "-fleetmirror-" + chart + "-uninstall" }

// uninstallHooks splits a render of chart into the release's objects and
// the uninstall hook's.
func uninstallHooks(t *testing.T, chart string, vals map[string]any) (release, hooks Manifests) {
	t.Helper()
	for _, o := range renderAll(t, chart, vals) {
		switch o.Hook() {
		case "post-delete":
			hooks = append(hooks, o)
		case "":
			release = append(release, o)
		}
	}
	return release, hooks
}

// uninstallJob returns the hook's Job and the agent's Deployment.
func uninstallJob(t *testing.T, release, hooks Manifests, chart string) (*batchv1.Job, *appsv1.Deployment) {
	t.Helper()
	var job batchv1.Job
	hooks.Get(t, "Job", hookName(chart)).Decode(t, &job)
	var d appsv1.Deployment
	release.Get(t, "Deployment", "fleetmirror-"+chart).Decode(t, &d)
	return &job, &d
}

func annotation(o Object, key string) string {
	meta, _ := o.Map["metadata"].(map[string]any)
	annots, _ := meta["annotations"].(map[string]any)
	v, _ := annots[key].(string)
	return v
}

// TestUninstallHook checks the post-delete hook of both charts: every object
// is a post-delete hook, deleted before it is made again and once every hook
// succeeded; what the Job needs comes first (lower weights), bindings after
// what they bind; the Job runs the agent's image, binary and arguments plus
// --uninstall, as hardened and placed as the agent's Pods, fails fast, and
// has Helm print its log when it fails.
func TestUninstallHook(t *testing.T) {
	vals := values(
		"nodeSelector", map[string]any{"kubernetes.io/os": "linux"},
		"tolerations", []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}}}}}}}},
		"imagePullSecrets", []any{map[string]any{"name": "registry"}},
		"priorityClassName", "system-cluster-critical",
		"extraVolumes", []any{map[string]any{"name": "kubeconfigs", "secret": map[string]any{"secretName": "kubeconfigs"}}},
		"extraVolumeMounts", []any{map[string]any{"name": "kubeconfigs", "mountPath": "/etc/fleetmirror/clusters"}},
		"extraEnv", []any{map[string]any{"name": "GOMEMLIMIT", "value": "200MiB"}},
		"podAnnotations", map[string]any{"sidecar.istio.io/inject": "false"},
	)
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			release, hooks := uninstallHooks(t, c.dir, vals)
			if len(hooks) == 0 {
				t.Fatal("no uninstall hook rendered")
			}
			weight := map[string]int{}
			for _, h := range hooks {
				if got := annotation(h, "helm.sh/hook-delete-policy"); got != "before-hook-creation,hook-succeeded" {
					t.Errorf("%s %s: hook-delete-policy %q", h.Kind, h.Name, got)
				}
				w, err := strconv.Atoi(annotation(h, "helm.sh/hook-weight"))
				if err != nil {
					t.Errorf("%s %s: hook-weight: %v", h.Kind, h.Name, err)
				}
				weight[h.Kind] = w
			}
			for _, before := range [][2]string{
				{"ServiceAccount", "RoleBinding"}, {"ClusterRole", "ClusterRoleBinding"}, {"Role", "RoleBinding"},
				{"ClusterRoleBinding", "Job"}, {"RoleBinding", "Job"}, {"ServiceAccount", "Job"},
			} {
				if weight[before[0]] >= weight[before[1]] {
					t.Errorf("%s (weight %d) is not created before %s (weight %d)", before[0], weight[before[0]], before[1], weight[before[1]])
				}
			}
			if got := annotation(hooks.Get(t, "Job", hookName(c.dir)), "helm.sh/hook-output-log-policy"); got != "hook-failed" {
				t.Errorf("hook-output-log-policy %q: helm does not print the log of a failed Job", got)
			}

			job, d := uninstallJob(t, release, hooks, c.dir)
			pod, agentPod := job.Spec.Template.Spec, d.Spec.Template.Spec
			ctr, agentCtr := pod.Containers[0], agentPod.Containers[0]
			wantArgs := slices.Concat(agentCtr.Args, []string{"--uninstall", "--uninstall-keep-mirrors=false", "--uninstall-timeout=120s"})
			if !reflect.DeepEqual(ctr.Args, wantArgs) {
				t.Errorf("args\n got %q\nwant %q", ctr.Args, wantArgs)
			}
			for _, f := range []struct {
				what      string
				got, want any
			}{
				{"image", ctr.Image, agentCtr.Image},
				{"command", ctr.Command, agentCtr.Command},
				{"env", ctr.Env, agentCtr.Env},
				{"resources", ctr.Resources, agentCtr.Resources},
				{"container securityContext", ctr.SecurityContext, agentCtr.SecurityContext},
				{"volume mounts", ctr.VolumeMounts, agentCtr.VolumeMounts},
				{"pod securityContext", pod.SecurityContext, agentPod.SecurityContext},
				{"volumes", pod.Volumes, agentPod.Volumes},
				{"nodeSelector", pod.NodeSelector, agentPod.NodeSelector},
				{"tolerations", pod.Tolerations, agentPod.Tolerations},
				{"affinity", pod.Affinity, agentPod.Affinity},
				{"imagePullSecrets", pod.ImagePullSecrets, agentPod.ImagePullSecrets},
				{"priorityClassName", pod.PriorityClassName, agentPod.PriorityClassName},
				{"pod annotations", job.Spec.Template.Annotations, d.Spec.Template.Annotations},
			} {
				if !reflect.DeepEqual(f.got, f.want) {
					t.Errorf("%s differs from the agent's:\n got %+v\nwant %+v", f.what, f.got, f.want)
				}
			}

			if pod.RestartPolicy != corev1.RestartPolicyNever || pod.ServiceAccountName != hookName(c.dir) {
				t.Errorf("restartPolicy %q serviceAccountName %q", pod.RestartPolicy, pod.ServiceAccountName)
			}
			if b := job.Spec.BackoffLimit; b == nil || *b > 3 {
				t.Errorf("backoffLimit %v, want a small one", b)
			}
			if a := job.Spec.ActiveDeadlineSeconds; a == nil || *a <= 120 {
				t.Errorf("activeDeadlineSeconds %v, want more than the uninstall's 120s", a)
			}
			if ttl := job.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl < 3600 {
				t.Errorf("ttlSecondsAfterFinished %v: a failed Job's log must stay a while", ttl)
			}
			if p := job.Spec.PodFailurePolicy; p == nil || p.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob ||
				p.Rules[0].OnExitCodes == nil || p.Rules[0].OnExitCodes.ContainerName == nil || *p.Rules[0].OnExitCodes.ContainerName != ctr.Name ||
				!reflect.DeepEqual(p.Rules[0].OnExitCodes.Values, []int32{1, 2}) {
				t.Errorf("podFailurePolicy %+v: an incomplete uninstall (exit 1) or bad flags (exit 2) must not be retried", p)
			}
			if labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(job.Spec.Template.Labels)) {
				t.Errorf("the agent's selector %v matches the Job's Pod %v", d.Spec.Selector.MatchLabels, job.Spec.Template.Labels)
			}
			var sa corev1.ServiceAccount
			hooks.Get(t, "ServiceAccount", hookName(c.dir)).Decode(t, &sa)
		})
	}
}

// uninstallRBACCases are the values under which the hook's RBAC is
// compared with the agent's.
var uninstallRBACCases = []struct {
	name  string
	vals  map[string]any
	chart string // empty: both
}{
	{name: "default"},
	{name: "several groups", vals: values("config.resourceTypes", []any{"Secret.v1", "Ingress.v1.networking.k8s.io", "Gateway.v1.gateway.networking.k8s.io"},
		"rbac.extraRules", []any{map[string]any{"apiGroups": []any{"example.com"}, "resources": []any{"widgets"}, "verbs": []any{"get"}}})},
	{name: "own lease", vals: values("leaderElection.id", "lease-a", "leaderElection.namespace", "leases", "replicaCount", 2)},
	{name: "no leader election", vals: values("leaderElection.enabled", false)},
	{name: "sharded", vals: values("sharding.enabled", true, "replicaCount", 3), chart: "hub"},
	{name: "own secrets namespace", vals: values("config.clusterSecretsNamespace", "clusters"), chart: "hub"},
}

// TestUninstallHookRBACIsTheAgents checks that the hook's RBAC is the
// agent's, rule for rule, bound to the hook's ServiceAccount: its
// ClusterRole, and each namespaced Role in the same namespace (the Lease,
// and for the hub the registration Secrets and the shard Leases).
func TestUninstallHookRBACIsTheAgents(t *testing.T) {
	for _, c := range charts {
		for _, tc := range uninstallRBACCases {
			if tc.chart != "" && tc.chart != c.dir {
				continue
			}
			t.Run(c.dir+"/"+tc.name, func(t *testing.T) {
				release, hooks := uninstallHooks(t, c.dir, tc.vals)
				full, hook := releaseName+"-fleetmirror-"+c.dir, hookName(c.dir)
				subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: hook, Namespace: releaseNamespace}}

				var agentCR, hookCR rbacv1.ClusterRole
				release.Get(t, "ClusterRole", full).Decode(t, &agentCR)
				hooks.Get(t, "ClusterRole", hook).Decode(t, &hookCR)
				if !reflect.DeepEqual(hookCR.Rules, agentCR.Rules) {
					t.Errorf("ClusterRole rules\n got %+v\nwant the agent's %+v", hookCR.Rules, agentCR.Rules)
				}
				var crb rbacv1.ClusterRoleBinding
				hooks.Get(t, "ClusterRoleBinding", hook).Decode(t, &crb)
				if crb.RoleRef.Name != hook || !reflect.DeepEqual(crb.Subjects, subject) {
					t.Errorf("ClusterRoleBinding binds %s to %+v", crb.RoleRef.Name, crb.Subjects)
				}

				agentRoles := release.Kinds("Role")
				if got := len(hooks.Kinds("Role")); got != len(agentRoles) {
					t.Errorf("%d Roles in the hook, %d of the agent", got, len(agentRoles))
				}
				for _, o := range agentRoles {
					var agentRole, hookRole rbacv1.Role
					o.Decode(t, &agentRole)
					suffix := strings.TrimPrefix(agentRole.Name, full)
					hooks.Get(t, "Role", hook+suffix).Decode(t, &hookRole)
					if hookRole.Namespace != agentRole.Namespace || !reflect.DeepEqual(hookRole.Rules, agentRole.Rules) {
						t.Errorf("Role %s in %s with %+v, want the agent's in %s with %+v", hookRole.Name, hookRole.Namespace, hookRole.Rules, agentRole.Namespace, agentRole.Rules)
					}
					var rb rbacv1.RoleBinding
					hooks.Get(t, "RoleBinding", hook+suffix).Decode(t, &rb)
					if rb.Namespace != agentRole.Namespace || rb.RoleRef.Name != hookRole.Name || !reflect.DeepEqual(rb.Subjects, subject) {
						t.Errorf("RoleBinding %s/%s binds %s to %+v", rb.Namespace, rb.Name, rb.RoleRef.Name, rb.Subjects)
					}
				}
			})
		}
	}
}

// TestUninstallHookDiscoveryMode checks the hook's ClusterRoles without
// config.resourceTypes, on an API server: an aggregated ClusterRole that
// holds what the cluster admins granted the agent (the agent's aggregation
// label) and a base with the agent's base rules. The API server takes the
// Job too (a dry run).
func TestUninstallHookDiscoveryMode(t *testing.T) {
	api := apiServer(t)
	fleettest.CreateNamespaces(t, releaseNamespace, nil, api)
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			release, hooks := uninstallHooks(t, c.dir, values("config.resourceTypes", []any{}))
			full, hook := releaseName+"-fleetmirror-"+c.dir, hookName(c.dir)
			var agentAgg, agentBase, hookAgg, hookBase rbacv1.ClusterRole
			release.Get(t, "ClusterRole", full).Decode(t, &agentAgg)
			release.Get(t, "ClusterRole", full+"-base").Decode(t, &agentBase)
			hooks.Get(t, "ClusterRole", hook).Decode(t, &hookAgg)
			hooks.Get(t, "ClusterRole", hook+"-base").Decode(t, &hookBase)
			if !reflect.DeepEqual(hookAgg.AggregationRule, agentAgg.AggregationRule) || len(hookAgg.Rules) != 0 {
				t.Errorf("hook ClusterRole aggregates %+v with rules %+v, want the agent's %+v", hookAgg.AggregationRule, hookAgg.Rules, agentAgg.AggregationRule)
			}
			label := "fleetmirror.io/aggregate-to-" + full
			if hookBase.Labels[label] != "true" || !reflect.DeepEqual(hookBase.Rules, agentBase.Rules) {
				t.Errorf("hook base labels %v rules %+v, want %s and the agent's %+v", hookBase.Labels, hookBase.Rules, label, agentBase.Rules)
			}
			applyRendered(context.Background(), t, api.Client, hooks, "ClusterRole", "ClusterRoleBinding")
			job, _ := uninstallJob(t, release, hooks, c.dir)
			if err := api.Client.Create(context.Background(), job, client.DryRunAll); err != nil {
				t.Errorf("the API server refuses the Job: %v", err)
			}
		})
	}
}

// TestUninstallHookValues checks the uninstall values: off, mirrors kept
// and a longer timeout, no RBAC, an existing ServiceAccount.
func TestUninstallHookValues(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir+"/disabled", func(t *testing.T) {
			if _, hooks := uninstallHooks(t, c.dir, values("uninstall.enabled", false)); len(hooks) != 0 {
				t.Errorf("uninstall.enabled=false renders %v", hooks.names())
			}
		})
		t.Run(c.dir+"/keep mirrors, longer", func(t *testing.T) {
			release, hooks := uninstallHooks(t, c.dir, values("uninstall.keepMirrors", true, "uninstall.timeoutSeconds", 300))
			job, _ := uninstallJob(t, release, hooks, c.dir)
			args := job.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--uninstall-keep-mirrors=true") || !slices.Contains(args, "--uninstall-timeout=300s") {
				t.Errorf("args %q", args)
			}
			if a := job.Spec.ActiveDeadlineSeconds; a == nil || *a <= 300 {
				t.Errorf("activeDeadlineSeconds %v with a 300s uninstall", a)
			}
		})
		t.Run(c.dir+"/no rbac", func(t *testing.T) {
			_, hooks := uninstallHooks(t, c.dir, values("rbac.create", false))
			var kinds []string
			for _, h := range hooks {
				kinds = append(kinds, h.Kind)
			}
			if slices.Sort(kinds); !slices.Equal(kinds, []string{"Job", "ServiceAccount"}) {
				t.Errorf("with rbac.create=false the hook renders %v", hooks.names())
			}
		})
		t.Run(c.dir+"/existing ServiceAccount", func(t *testing.T) {
			release, hooks := uninstallHooks(t, c.dir, values("serviceAccount.create", false, "serviceAccount.name", "mirror-bot"))
			if sas := hooks.Kinds("ServiceAccount"); len(sas) != 0 {
				t.Errorf("the hook creates a ServiceAccount: %v", sas)
			}
			job, _ := uninstallJob(t, release, hooks, c.dir)
			if got := job.Spec.Template.Spec.ServiceAccountName; got != "mirror-bot" {
				t.Errorf("the Job runs as %q, want the ServiceAccount given", got)
			}
			var crb rbacv1.ClusterRoleBinding
			hooks.Get(t, "ClusterRoleBinding", hookName(c.dir)).Decode(t, &crb)
			if crb.Subjects[0].Name != "mirror-bot" {
				t.Errorf("the hook's ClusterRoleBinding binds %+v", crb.Subjects)
			}
		})
	}
}

// TestUninstallHookArgs parses the Job's command line with the binaries'
// own flag sets, which must select the uninstall mode, and runs the real
// binaries with it and an unreadable kubeconfig: past flag parsing and
// validation (exit code 2), they stop at loading the kubeconfig (exit 1).
func TestUninstallHookArgs(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			release, hooks := uninstallHooks(t, c.dir, values("uninstall.keepMirrors", true))
			job, _ := uninstallJob(t, release, hooks, c.dir)
			args := job.Spec.Template.Spec.Containers[0].Args
			fs, finish := flagSet(c.dir)
			if err := fs.Parse(args); err != nil {
				t.Fatalf("parsing %q: %v", args, err)
			}
			if err := finish(); err != nil {
				t.Fatalf("options of %q: %v", args, err)
			}
			for name, want := range map[string]string{"uninstall": "true", "uninstall-keep-mirrors": "true", "uninstall-timeout": "2m0s"} {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s=%s, want %s", name, got, want)
				}
			}
			cmd := exec.Command(binary(t, c.binary), append(slices.Clone(args), "--kubeconfig="+filepath.Join(t.TempDir(), "missing"))...)
			cmd.Env = append(os.Environ(), "KUBECONFIG=")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "loading kubeconfig") {
				t.Fatalf("%s %q: %v, want exit code 1 at loading the kubeconfig:\n%s", c.binary, args, err, out)
			}
		})
	}
}
