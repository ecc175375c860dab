package charts_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// fakeKubectl answers the reads hack/hub-kubeconfig.sh makes of a member,
// as kubectl would, and logs its arguments.
const fakeKubectl = `#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
case "$*" in
  *"get secret"*"{.type}"*) printf '%s' "$FAKE_TYPE" ;;
  *"get secret"*"{.data.token}"*) printf '%s' "$FAKE_TOKEN_B64" ;;
  *"get secret"*"{.data.ca\\.crt}"*) printf '%s' "$FAKE_CA_B64" ;;
  *"config view"*) printf '%s' "https://member-1.example.com:6443" ;;
  *) echo "unexpected kubectl $*" >&2; exit 1 ;;
esac
`

func runHubKubeconfig(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(fakeKubectl), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "hub-kubeconfig.sh"), args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_LOG="+filepath.Join(dir, "log"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	return stdout.String(), string(log) + stderr.String(), err
}

// TestHubKubeconfigScript turns a member's token Secret (served by a fake
// kubectl) into the hub's registration Secret and checks it is what the hub
// accepts: label fleetmirror.io/cluster-name, key "value", a kubeconfig with
// the server, the embedded CA and the token, and no plugin or file.
func TestHubKubeconfigScript(t *testing.T) {
	ca := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	env := map[string]string{
		"FAKE_TYPE":      "kubernetes.io/service-account-token",
		"FAKE_TOKEN_B64": base64.StdEncoding.EncodeToString([]byte("eyJhbGciOi.token")),
		"FAKE_CA_B64":    base64.StdEncoding.EncodeToString([]byte(ca)),
	}
	out, log, err := runHubKubeconfig(t, env, "--cluster-name", "member-1", "--context", "m1", "--namespace", "fleetmirror-system",
		"--secret", "fm-fleetmirror-member-hub-token", "--hub-namespace", "fleet", "--label", "env=prod")
	if err != nil {
		t.Fatalf("hub-kubeconfig.sh: %v\n%s", err, log)
	}
	if !strings.Contains(log, "--context m1") || !strings.Contains(log, "--namespace fleetmirror-system") ||
		!strings.Contains(log, "fm-fleetmirror-member-hub-token") {
		t.Errorf("kubectl was not pointed at the member's Secret:\n%s", log)
	}
	var s corev1.Secret
	if err := yaml.UnmarshalStrict([]byte(out), &s); err != nil {
		t.Fatalf("output is not a Secret: %v\n%s", err, out)
	}
	if s.Name != "member-1-fleetmirror" || s.Namespace != "fleet" || s.Type != corev1.SecretTypeOpaque ||
		s.Labels["fleetmirror.io/cluster-name"] != "member-1" || s.Labels["env"] != "prod" || len(s.Data) != 1 {
		t.Errorf("Secret %+v", s)
	}
	kc, err := clientcmd.Load(s.Data["value"])
	if err != nil {
		t.Fatalf("value is not a kubeconfig: %v\n%s", err, s.Data["value"])
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil {
		t.Fatalf("no current context in %+v", kc)
	}
	cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	switch {
	case cluster == nil || user == nil:
		t.Fatalf("context %+v names no cluster or user", ctx)
	case cluster.Server != "https://member-1.example.com:6443":
		t.Errorf("server %q", cluster.Server)
	case string(cluster.CertificateAuthorityData) != ca || cluster.CertificateAuthority != "":
		t.Errorf("CA %q (file %q), want embedded", cluster.CertificateAuthorityData, cluster.CertificateAuthority)
	case user.Token != "eyJhbGciOi.token" || user.TokenFile != "" || user.Exec != nil || user.AuthProvider != nil:
		t.Errorf("user %+v, want only the token", user)
	}
	if _, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig(); err != nil {
		t.Errorf("kubeconfig is unusable: %v", err)
	}
}

func TestHubKubeconfigScriptRefuses(t *testing.T) {
	good := map[string]string{
		"FAKE_TYPE":      "kubernetes.io/service-account-token",
		"FAKE_TOKEN_B64": base64.StdEncoding.EncodeToString([]byte("t")),
		"FAKE_CA_B64":    base64.StdEncoding.EncodeToString([]byte("ca")),
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range good {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	for name, tc := range map[string]struct {
		env   map[string]string
		args  []string
		match string
	}{
		"not a token Secret":   {with("FAKE_TYPE", "Opaque"), []string{"--cluster-name", "m1", "--secret", "s"}, "not kubernetes.io/service-account-token"},
		"token not filled yet": {with("FAKE_TOKEN_B64", ""), []string{"--cluster-name", "m1", "--secret", "s"}, "no token"},
		"bad cluster name":     {good, []string{"--cluster-name", "Member_1", "--secret", "s"}, "DNS-1123"},
		"no cluster name":      {good, []string{"--secret", "s"}, "--cluster-name is required"},
		"plain http server":    {good, []string{"--cluster-name", "m1", "--secret", "s", "--server", "http://x:8080"}, "not https"},
		"flag without a value": {good, []string{"--cluster-name", "m1", "--secret"}, "needs a value"},
	} {
		t.Run(name, func(t *testing.T) {
			out, log, err := runHubKubeconfig(t, tc.env, tc.args...)
			if err == nil || !strings.Contains(log, tc.match) {
				t.Errorf("want a failure saying %q, got %v:\n%s%s", tc.match, err, out, log)
			}
		})
	}
}
