package charts_test

import "testing"

// On the hub's own cluster the member agent must never mirror into the
// namespace the hub reads registration Secrets from: the member chart adds
// it to the exclusions when told where it is, and only then.
func TestMemberExcludesHubClusterSecretsNamespace(t *testing.T) {
	got, _ := containerArgs(t, "member", values("hubClusterSecretsNamespace", "capi-clusters"))
	if want := "kube-system,kube-public,kube-node-lease,capi-clusters"; got["excluded-namespaces"] != want {
		t.Errorf("--excluded-namespaces=%s, want %s", got["excluded-namespaces"], want)
	}
	got, _ = containerArgs(t, "member", values("hubClusterSecretsNamespace", "capi-clusters", "config.excludedNamespaces", []any{}))
	if want := "capi-clusters"; got["excluded-namespaces"] != want {
		t.Errorf("with no other exclusions: --excluded-namespaces=%s, want %s", got["excluded-namespaces"], want)
	}
	got, _ = containerArgs(t, "member", nil)
	if want := "kube-system,kube-public,kube-node-lease"; got["excluded-namespaces"] != want {
		t.Errorf("by default: --excluded-namespaces=%s, want %s", got["excluded-namespaces"], want)
	}
	if _, err := templateChart(t, "member", values("hubClusterSecretsNamespace", "Not/A-Namespace")); err == nil {
		t.Error("the schema accepts a value that is not a namespace name")
	}
}
