package providers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capisecret "sigs.k8s.io/cluster-api/util/secret"
)

const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    CLUSTER
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user:
    USER
`

func kubeconfig(cluster, user string) []byte {
	return []byte(strings.NewReplacer("CLUSTER", cluster, "USER", user).Replace(kubeconfigTemplate))
}

func plainSecret(data []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"fleetmirror.io/cluster-name": "eu-1"}},
		Data:       map[string][]byte{"value": data},
	}
}

func TestParseRegistration(t *testing.T) {
	tests := []struct {
		name         string
		secret       *corev1.Secret
		allowPlugins bool
		wantErr      string
	}{
		{"token", plainSecret(kubeconfig("insecure-skip-tls-verify: true", "token: abc")), false, ""},
		{"exec plugin", plainSecret(kubeconfig("insecure-skip-tls-verify: true", "exec: {command: /bin/true, apiVersion: client.authentication.k8s.io/v1}")), false, "plugin"},
		{"exec plugin allowed", plainSecret(kubeconfig("insecure-skip-tls-verify: true", "exec: {command: /bin/true, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}")), true, ""},
		{"token file", plainSecret(kubeconfig("insecure-skip-tls-verify: true", "tokenFile: /etc/passwd")), false, "files on the hub"},
		{"ca file", plainSecret(kubeconfig("certificate-authority: /etc/ca.crt", "token: abc")), false, "CA file"},
		{"garbage", plainSecret([]byte("{{{")), false, "does not parse"},
		{"missing key", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"fleetmirror.io/cluster-name": "eu-1"}}}, false, "missing"},
		{"bad name", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"fleetmirror.io/cluster-name": "EU_1"}}}, false, "invalid"},
		{"capi secret of wrong type", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "eu-1-kubeconfig", Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "eu-1"}},
			Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"value": kubeconfig("insecure-skip-tls-verify: true", "token: abc")},
		}, false, "cluster.x-k8s.io/secret"},
	}
	for _, tt := range tests {
		reg, err := parseRegistration(tt.secret, tt.allowPlugins)
		if tt.wantErr == "" {
			if err != nil || reg.name != "eu-1" || reg.config.Host != "https://127.0.0.1:6443" || reg.hash == "" {
				t.Errorf("%s: got %+v, %v", tt.name, reg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error = %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestClusterName(t *testing.T) {
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   string
		ok     bool
	}{
		{"eu-1-kubeconfig", map[string]string{"cluster.x-k8s.io/cluster-name": "eu-1"}, "eu-1", true},
		{"eu-1-ca", map[string]string{"cluster.x-k8s.io/cluster-name": "eu-1"}, "", false},
		{"anything", map[string]string{"fleetmirror.io/cluster-name": "eu-2"}, "eu-2", true},
		{"unlabelled", nil, "", false},
	} {
		got, ok := clusterName(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Labels: tt.labels}})
		if got != tt.want || ok != tt.ok {
			t.Errorf("clusterName(%s) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseRegistration checks that no Secret content crashes the hub.
func FuzzParseRegistration(f *testing.F) {
	f.Add(kubeconfig("insecure-skip-tls-verify: true", "token: abc"), "eu-1")
	f.Add([]byte("{"), "x")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		s := plainSecret(data)
		s.Labels["fleetmirror.io/cluster-name"] = name
		reg, err := parseRegistration(s, false)
		if err == nil && (reg.config == nil || reg.name != name) {
			t.Fatalf("accepted without a config: %+v", reg)
		}
	})
}

// Mirrors never register a cluster: any of the marks every fleetmirror
// writer stamps on a mirror refuses the Secret, and nothing else does.
func TestMirroredRegistrationsAreRefused(t *testing.T) {
	for _, tt := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		refused     bool
	}{
		{name: "registration", labels: map[string]string{"fleetmirror.io/cluster-name": "a", "env": "prod"}},
		{name: "cluster api", labels: map[string]string{"cluster.x-k8s.io/cluster-name": "a"}},
		{name: "mirror label", labels: map[string]string{"cluster.x-k8s.io/cluster-name": "a", "fleetmirror.io/mirror": "true"}, refused: true},
		{name: "managed-by label", labels: map[string]string{"fleetmirror.io/cluster-name": "a", "fleetmirror.io/managed-by": "member"}, refused: true},
		{name: "source reference", labels: map[string]string{"fleetmirror.io/cluster-name": "a"},
			annotations: map[string]string{"fleetmirror.io/source": "m1/team/a-kubeconfig"}, refused: true},
		{name: "source uid", labels: map[string]string{"fleetmirror.io/cluster-name": "a"},
			annotations: map[string]string{"fleetmirror.io/source-uid": "1234"}, refused: true},
		{name: "status only", labels: map[string]string{"fleetmirror.io/cluster-name": "a"},
			annotations: map[string]string{"fleetmirror.io/status": "1/1 namespaces synced"}},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a-kubeconfig", Labels: tt.labels, Annotations: tt.annotations}}
		if why := mirrored(s); (why != "") != tt.refused {
			t.Errorf("%s: mirrored = %q, want refused %v", tt.name, why, tt.refused)
		}
	}
}

// A sync parses a registration Secret once per resourceVersion: the same
// version gives back what the previous sync parsed (a failure too), a new
// one is parsed again, and a Secret that a sync did not look at is
// forgotten.
func TestParsedOncePerVersion(t *testing.T) {
	secret := func(uid, rv string, data []byte) *corev1.Secret {
		s := plainSecret(data)
		s.UID, s.ResourceVersion = types.UID(uid), rv
		return s
	}
	good := kubeconfig("insecure-skip-tls-verify: true", "token: abc")
	first := parsedSecrets{}
	a1, err := first.parse(secret("a", "1", good), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	_, badErr := first.parse(secret("b", "1", []byte("{{{")), nil, false)
	if badErr == nil {
		t.Fatal("garbage parsed")
	}

	second := parsedSecrets{}
	steps := []struct {
		name     string
		uid, rv  string
		data     []byte
		samePtr  *registration // the registration expected back, when it must be the one parsed before
		sameErr  error
		newParse bool
	}{
		{"same version: parsed before", "a", "1", good, a1, nil, false},
		{"same version of a failure: the same failure", "b", "1", []byte("{{{"), nil, badErr, false},
		{"new version: parsed again", "a", "2", kubeconfig("insecure-skip-tls-verify: true", "token: xyz"), nil, nil, true},
	}
	for _, st := range steps {
		reg, err := second.parse(secret(st.uid, st.rv, st.data), first, false)
		switch {
		case st.sameErr != nil && err != st.sameErr: //nolint:errorlint // the very error kept
			t.Errorf("%s: error %v, want the one kept, %v", st.name, err, st.sameErr)
		case st.samePtr != nil && reg != st.samePtr:
			t.Errorf("%s: parsed again", st.name)
		case st.newParse && (reg == nil || reg == a1 || reg.config.BearerToken != "xyz"):
			t.Errorf("%s: got %+v, want the new version parsed", st.name, reg)
		}
	}
	// A third sync looks at a alone: a is kept, b is forgotten and parsed
	// again when it returns.
	third := parsedSecrets{}
	if _, err := third.parse(secret("a", "2", nil), second, false); err != nil {
		t.Fatalf("a, kept: %v", err)
	}
	if _, ok := third["b"]; ok {
		t.Error("b kept after a sync that did not see it")
	}
	if _, err := (parsedSecrets{}).parse(secret("b", "1", []byte("{{{")), third, false); err == badErr { //nolint:errorlint // the very error kept
		t.Error("b, forgotten, came back with the failure kept before")
	}
}

// TestClusterAPIConventions holds the conventions written in kubeconfig.go
// to Cluster API's own: its label, Secret type, data key and Secret name.
func TestClusterAPIConventions(t *testing.T) {
	for _, c := range []struct{ what, ours, capi string }{
		{"cluster name label", capiClusterNameLabel, clusterv1.ClusterNameLabel},
		{"Secret type", string(capiSecretType), string(clusterv1.ClusterSecretType)},
		{"kubeconfig data key", capiKubeconfigKey, capisecret.KubeconfigDataName},
		{"kubeconfig Secret name", capiKubeconfigName("prod-eu"), capisecret.Name("prod-eu", capisecret.Kubeconfig)},
	} {
		if c.ours != c.capi {
			t.Errorf("%s: %q here, %q in Cluster API", c.what, c.ours, c.capi)
		}
	}
}
