package charts_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

func appVersion(t *testing.T, chart string) string {
	t.Helper()
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join("charts", chart, "Chart.yaml"), &c)
	return c.AppVersion
}

func deployment(t *testing.T, chart string, vals map[string]any) (Manifests, *appsv1.Deployment) {
	t.Helper()
	ms := render(t, chart, vals)
	var d appsv1.Deployment
	ms.Get(t, "Deployment", "fleetmirror-"+chart).Decode(t, &d)
	return ms, &d
}

// TestDeploymentDefaults checks what every install gets: the chart's binary
// of the default image, run hardened as its own ServiceAccount with probes.
func TestDeploymentDefaults(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			ms, d := deployment(t, c.dir, nil)
			pod := d.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("want one container, got %d", len(pod.Containers))
			}
			ctr := pod.Containers[0]
			if want := []string{"/usr/local/bin/" + c.binary}; !reflect.DeepEqual(ctr.Command, want) {
				t.Errorf("command %q, want %q", ctr.Command, want)
			}
			if want := "ghcr.io/fleetmirror/fleetmirror:" + appVersion(t, c.dir); ctr.Image != want {
				t.Errorf("image %q, want %q", ctr.Image, want)
			}
			if d.Namespace != releaseNamespace || *d.Spec.Replicas != 1 {
				t.Errorf("namespace %q replicas %d", d.Namespace, *d.Spec.Replicas)
			}

			sa := ms.Get(t, "ServiceAccount", "fleetmirror-"+c.dir)
			if pod.ServiceAccountName != sa.Name {
				t.Errorf("serviceAccountName %q, want the chart's %q", pod.ServiceAccountName, sa.Name)
			}

			// Security contexts: non-root 65532, no privilege, read-only root, seccomp.
			psc := pod.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
				psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context %+v", psc)
			}
			csc := ctr.SecurityContext
			switch {
			case csc == nil:
				t.Fatal("no container security context")
			case csc.RunAsNonRoot == nil || !*csc.RunAsNonRoot || csc.RunAsUser == nil || *csc.RunAsUser != 65532:
				t.Errorf("container may run as root: %+v", csc)
			case csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem:
				t.Error("root filesystem is writable")
			case csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation:
				t.Error("privilege escalation allowed")
			case csc.Capabilities == nil || !reflect.DeepEqual(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) != 0:
				t.Errorf("capabilities %+v, want all dropped", csc.Capabilities)
			case csc.SeccompProfile == nil || csc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Errorf("container seccomp %+v", csc.SeccompProfile)
			case csc.Privileged != nil && *csc.Privileged:
				t.Error("privileged")
			}

			// Probes on the health port, metrics port named for the Service.
			ports := map[string]int32{}
			for _, p := range ctr.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["metrics"] != 8080 || ports["health"] != 8081 {
				t.Errorf("ports %v", ports)
			}
			for name, p := range map[string]*corev1.Probe{"/healthz": ctr.LivenessProbe, "/readyz": ctr.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "health" {
					t.Errorf("probe %s: %+v", name, p)
				}
			}
			if len(ctr.Env) == 0 || ctr.Env[0].Name != "POD_NAMESPACE" || ctr.Env[0].ValueFrom == nil ||
				ctr.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
				t.Errorf("env %+v, want POD_NAMESPACE from the downward API", ctr.Env)
			}
			if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v", ctr.Resources)
			}

			// Off by default.
			for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "PodDisruptionBudget", "ConfigMap"} {
				if got := ms.Kinds(kind); len(got) != 0 {
					t.Errorf("%s rendered by default", kind)
				}
			}
			if c.dir == "member" && len(ms.Kinds("Secret")) != 0 {
				t.Error("hub access rendered by default")
			}

			// The metrics Service selects the Pods and targets the metrics port.
			var svc corev1.Service
			ms.Get(t, "Service", "-metrics").Decode(t, &svc)
			for k, v := range svc.Spec.Selector {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("Service selector %s=%s does not match the Pods", k, v)
				}
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
				t.Errorf("Service ports %+v", svc.Spec.Ports)
			}
		})
	}
}

// TestPodSettingsPassThrough checks the values that are copied into the Pod.
func TestPodSettingsPassThrough(t *testing.T) {
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"infra"}}}}},
	}}}
	vals := values(
		"replicaCount", 2,
		"image.repository", "registry.example.com/fm",
		"image.tag", "v9.9.9",
		"image.pullPolicy", "Always",
		"imagePullSecrets", []any{map[string]any{"name": "pull"}},
		"resources", map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}},
		"nodeSelector", map[string]any{"pool": "infra"},
		"tolerations", []any{map[string]any{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity", affinity,
		"topologySpreadConstraints", []any{map[string]any{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}},
		"priorityClassName", "system-cluster-critical",
		"podAnnotations", map[string]any{"a": "b"},
		"podLabels", map[string]any{"team": "platform"},
		"extraArgs", []any{"--workers=9"},
		"extraEnv", []any{map[string]any{"name": "GOMEMLIMIT", "value": "200MiB"}},
		"extraVolumes", []any{map[string]any{"name": "kc", "secret": map[string]any{"secretName": "kc"}}},
		"extraVolumeMounts", []any{map[string]any{"name": "kc", "mountPath": "/etc/kc", "readOnly": true}},
		"terminationGracePeriodSeconds", 90,
		"serviceAccount.annotations", map[string]any{"eks.amazonaws.com/role-arn": "arn"},
	)
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			ms, d := deployment(t, c.dir, vals)
			pod := d.Spec.Template.Spec
			ctr := pod.Containers[0]
			checks := map[string]bool{
				"replicas":          *d.Spec.Replicas == 2,
				"image":             ctr.Image == "registry.example.com/fm:v9.9.9",
				"pullPolicy":        ctr.ImagePullPolicy == corev1.PullAlways,
				"imagePullSecrets":  len(pod.ImagePullSecrets) == 1 && pod.ImagePullSecrets[0].Name == "pull",
				"resources":         ctr.Resources.Requests.Memory().String() == "1Gi",
				"nodeSelector":      pod.NodeSelector["pool"] == "infra",
				"tolerations":       len(pod.Tolerations) == 1 && pod.Tolerations[0].Key == "infra",
				"affinity":          pod.Affinity != nil && pod.Affinity.NodeAffinity != nil,
				"topologySpread":    len(pod.TopologySpreadConstraints) == 1,
				"priorityClassName": pod.PriorityClassName == "system-cluster-critical",
				"podAnnotations":    d.Spec.Template.Annotations["a"] == "b",
				"podLabels":         d.Spec.Template.Labels["team"] == "platform",
				"extraArgs last":    ctr.Args[len(ctr.Args)-1] == "--workers=9",
				"extraEnv":          len(ctr.Env) == 2 && ctr.Env[1].Name == "GOMEMLIMIT",
				"extraVolumes":      len(pod.Volumes) == 1 && pod.Volumes[0].Secret != nil,
				"extraVolumeMounts": len(ctr.VolumeMounts) == 1 && ctr.VolumeMounts[0].MountPath == "/etc/kc",
				"terminationGrace":  *pod.TerminationGracePeriodSeconds == 90,
			}
			for name, ok := range checks {
				if !ok {
					t.Errorf("%s not applied", name)
				}
			}
			var sa corev1.ServiceAccount
			ms.Get(t, "ServiceAccount", "fleetmirror-"+c.dir).Decode(t, &sa)
			if sa.Annotations["eks.amazonaws.com/role-arn"] != "arn" {
				t.Errorf("ServiceAccount annotations %v", sa.Annotations)
			}
		})
	}
}

func TestImageDigestWinsOverTag(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range charts {
		_, d := deployment(t, c.dir, values("image.tag", "v1", "image.digest", digest))
		if want := "ghcr.io/fleetmirror/fleetmirror@" + digest; d.Spec.Template.Spec.Containers[0].Image != want {
			t.Errorf("%s: image %q, want %q", c.dir, d.Spec.Template.Spec.Containers[0].Image, want)
		}
	}
}

func TestExistingServiceAccount(t *testing.T) {
	for _, c := range charts {
		ms, d := deployment(t, c.dir, values("serviceAccount.create", false, "serviceAccount.name", "mine"))
		if len(ms.Kinds("ServiceAccount")) != 0 || d.Spec.Template.Spec.ServiceAccountName != "mine" {
			t.Errorf("%s: serviceAccount.create=false still creates one or does not use %q", c.dir, "mine")
		}
		for _, o := range slices.Concat(ms.Kinds("ClusterRoleBinding"), ms.Kinds("RoleBinding")) {
			if !strings.Contains(string(o.Raw), "name: mine") {
				t.Errorf("%s: %s %s does not bind ServiceAccount mine", c.dir, o.Kind, o.Name)
			}
		}
		if _, err := templateChart(t, c.dir, values("serviceAccount.create", false)); err == nil ||
			!strings.Contains(err.Error(), "serviceAccount.name is required") {
			t.Errorf("%s: no name for an existing ServiceAccount: %v", c.dir, err)
		}
	}
}

func TestMetricsDisabled(t *testing.T) {
	for _, c := range charts {
		got, _ := containerArgs(t, c.dir, values("metrics.enabled", false, "metrics.serviceMonitor.enabled", true))
		if got["metrics-bind-address"] != "0" {
			t.Errorf("%s: --metrics-bind-address=%q, want 0", c.dir, got["metrics-bind-address"])
		}
		ms := render(t, c.dir, values("metrics.enabled", false, "metrics.serviceMonitor.enabled", true))
		if len(ms.Kinds("Service"))+len(ms.Kinds("ServiceMonitor")) != 0 {
			t.Errorf("%s: metrics Service or ServiceMonitor without metrics", c.dir)
		}
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	for _, c := range charts {
		for name, tc := range map[string]struct {
			vals     map[string]any
			min, max string
		}{
			"minAvailable":   {values("podDisruptionBudget.enabled", true, "replicaCount", 2), "1", ""},
			"maxUnavailable": {values("podDisruptionBudget.enabled", true, "replicaCount", 3, "podDisruptionBudget.maxUnavailable", "50%"), "", "50%"},
		} {
			t.Run(c.dir+"/"+name, func(t *testing.T) {
				ms, d := deployment(t, c.dir, tc.vals)
				var pdb policyv1.PodDisruptionBudget
				ms.Get(t, "PodDisruptionBudget", "fleetmirror-"+c.dir).Decode(t, &pdb)
				str := func(v any) string {
					if reflect.ValueOf(v).IsNil() {
						return ""
					}
					b, _ := yaml.Marshal(v)
					return strings.Trim(strings.TrimSpace(string(b)), `"`)
				}
				if str(pdb.Spec.MinAvailable) != tc.min || str(pdb.Spec.MaxUnavailable) != tc.max {
					t.Errorf("minAvailable %q maxUnavailable %q, want %q %q", str(pdb.Spec.MinAvailable), str(pdb.Spec.MaxUnavailable), tc.min, tc.max)
				}
				for k, v := range pdb.Spec.Selector.MatchLabels {
					if d.Spec.Template.Labels[k] != v {
						t.Errorf("selector %s=%s does not match the Pods", k, v)
					}
				}
			})
		}
		// minAvailable 1 of 1 would block every node drain.
		t.Run(c.dir+"/one replica", func(t *testing.T) {
			ms := render(t, c.dir, values("podDisruptionBudget.enabled", true, "replicaCount", 1))
			if pdbs := ms.Kinds("PodDisruptionBudget"); len(pdbs) != 0 {
				t.Errorf("PodDisruptionBudget rendered for one replica: %s", pdbs[0].Raw)
			}
		})
	}
}

// TestSharedTemplatesAreIdentical keeps the charts' conventions from
// drifting: these files are copies; what differs lives in _chart.tpl.
func TestSharedTemplatesAreIdentical(t *testing.T) {
	shared := []string{
		"_helpers.tpl", "deployment.yaml", "serviceaccount.yaml", "clusterrole.yaml",
		"roles.yaml", "service.yaml", "servicemonitor.yaml", "prometheusrule.yaml",
		"poddisruptionbudget.yaml", "tests/ready.yaml", "admissionpolicy.yaml", "uninstall.yaml",
	}
	for _, f := range shared {
		a, err := os.ReadFile(filepath.Join(root, "charts", "member", "templates", f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, "charts", "hub", "templates", f))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("templates/%s differs between charts/member and charts/hub; keep them identical", f)
		}
	}
}

// TestHelmTestPod checks the `helm test` hook: it waits for an answer of
// the metrics Service (which routes only to ready Pods), runs hardened with
// no ServiceAccount token, so no role of the chart concerns it, and is not
// one of the agent's Pods for the Service or the PodDisruptionBudget.
func TestHelmTestPod(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			full := releaseName + "-fleetmirror-" + c.dir
			ms, d := deployment(t, c.dir, values("test.image", "registry.example.com/busybox:1", "metrics.service.port", 9090))
			var pod corev1.Pod
			ms.Get(t, "Pod", "-test-ready").Decode(t, &pod)
			if pod.Annotations["helm.sh/hook"] != "test" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("not a helm test hook: annotations %v restartPolicy %q", pod.Annotations, pod.Spec.RestartPolicy)
			}
			if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken || pod.Spec.ServiceAccountName != "" {
				t.Errorf("the test Pod may use a ServiceAccount: automount %v, name %q", pod.Spec.AutomountServiceAccountToken, pod.Spec.ServiceAccountName)
			}
			ctr := pod.Spec.Containers[0]
			if ctr.Image != "registry.example.com/busybox:1" {
				t.Errorf("image %q, want test.image", ctr.Image)
			}
			if url := "http://" + full + "-metrics:9090/metrics"; !strings.Contains(strings.Join(ctr.Command, " "), url) {
				t.Errorf("command %q does not fetch %s", ctr.Command, url)
			}
			sc := ctr.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.RunAsNonRoot == nil || !*pod.Spec.SecurityContext.RunAsNonRoot {
				t.Errorf("test Pod not hardened: %+v %+v", pod.Spec.SecurityContext, sc)
			}
			if labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels)) {
				t.Errorf("the agent's selector %v matches the test Pod's labels %v", d.Spec.Selector.MatchLabels, pod.Labels)
			}
			for _, vals := range []map[string]any{values("test.enabled", false), values("metrics.enabled", false)} {
				if pods := render(t, c.dir, vals).Kinds("Pod"); len(pods) != 0 {
					t.Errorf("with %v: test Pod rendered", vals)
				}
			}
		})
	}
}
