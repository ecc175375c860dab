package cluster_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// policyCRD is the CRD the member chart renders (crds.enabled).
const policyCRD = "customresourcedefinition/mirrorpolicies.fleetmirror.io"

// TestRefusedInstall installs the member chart with values it refuses, on
// a node without the MirrorPolicy CRD: a key the schema does not know (a
// typo) and a kind whose plural the templates cannot tell, each into a new
// namespace (--create-namespace, as the README installs) and into one that
// exists. Helm refuses each, and the cluster is as it was: no CRD (Helm
// would have created it from a chart's crds/ before it looked at the
// values), no namespace, nothing new in the existing one, no cluster-wide
// object of the release.
func TestRefusedInstall(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	deleteCRD(t)
	const existing, created = "fm-refused", "fm-refused-new"
	namespace(t, cs, existing, nil)
	t.Cleanup(func() {
		// Only if Helm took what it should have refused.
		for _, ns := range []string{existing, created} {
			_, _ = tryCommand(env.helm, "uninstall", memberRelease, "--namespace", ns, "--wait", "--timeout", "5m")
		}
		_, _ = tryCommand(env.kubectl, "delete", "namespace", created, "--ignore-not-found", "--wait=false")
	})
	inNamespace, clusterWide := namespaceObjects(t, existing), releaseClusterObjects(t, memberRelease)

	for name, tc := range map[string]struct {
		values []string
		says   string
	}{
		"schema":    {[]string{"--set", "config.clustername=member-1"}, "additional properties 'clustername' not allowed"},
		"templates": {[]string{"--set", "config.resourceTypes={Widgets.v1.example.com}"}, "rbac.resourceNames"},
	} {
		t.Run(name, func(t *testing.T) {
			RegisterTestingT(t)
			values := append(imageValues(env.imageRepo, env.imageTag), tc.values...)
			for _, where := range [][]string{{"--namespace", created, "--create-namespace"}, {"--namespace", existing}} {
				out, err := tryCommand(env.helm, slices.Concat([]string{"install", memberRelease, memberChart, "--wait", "--timeout", "3m"}, where, values)...)
				Expect(err).To(HaveOccurred(), "helm install %s succeeded:\n%s", strings.Join(where, " "), out)
				Expect(out).To(ContainSubstring(tc.says))
			}
			_, err := cs.CoreV1().Namespaces().Get(context.Background(), created, metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s: %v", created, err)
			Expect(namespaceObjects(t, existing)).To(Equal(inNamespace))
			Expect(releaseClusterObjects(t, memberRelease)).To(Equal(clusterWide))
			Expect(crdExists(t)).To(BeFalse(), "the refused install left the MirrorPolicy CRD")
		})
	}
}

// namespaceObjects lists what ns holds of the kinds a chart could create
// there, and Helm's release records (Secrets), as kind/name.
func namespaceObjects(t testing.TB, ns string) []string {
	t.Helper()
	return names(t, "-n", ns, "all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases,jobs,poddisruptionbudgets")
}

// releaseClusterObjects lists the cluster-wide objects labelled as the
// release's, as kind/name.
func releaseClusterObjects(t testing.TB, release string) []string {
	t.Helper()
	return names(t, "-l", "app.kubernetes.io/instance="+release,
		"clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings")
}

// names runs kubectl get -o name with args and returns the names, sorted.
func names(t testing.TB, args ...string) []string {
	t.Helper()
	// Only the standard output: kubectl says "No resources found" on the
	// standard error.
	out, err := commandOf(env.kubectl, append([]string{"get", "-o", "name"}, args...)...).Output()
	if err != nil {
		t.Fatalf("kubectl get %s: %v", strings.Join(args, " "), err)
	}
	objects := strings.Fields(string(out))
	slices.Sort(objects)
	return objects
}

func crdExists(t testing.TB) bool {
	t.Helper()
	out, err := tryCommand(env.kubectl, "get", policyCRD, "-o", "name")
	if err != nil && !strings.Contains(out, "NotFound") {
		t.Fatalf("kubectl get %s: %v\n%s", policyCRD, err, out)
	}
	return err == nil
}

// deleteCRD deletes the MirrorPolicy CRD, and with it every MirrorPolicy
// of the node, and waits until it is gone: for tests that start from a
// cluster without it (a later install of the member chart creates it).
func deleteCRD(t testing.TB) {
	t.Helper()
	kubectl(t, "delete", policyCRD, "--ignore-not-found", "--timeout=2m")
}

// crdUID is the UID of the MirrorPolicy CRD: the same UID means the same
// CRD, never deleted (which would have deleted every MirrorPolicy).
func crdUID(t testing.TB) string {
	t.Helper()
	return kubectl(t, "get", policyCRD, "-o", "jsonpath={.metadata.uid}")
}

// handOverCRD gives the MirrorPolicy CRD, when it exists, to the member
// chart's release in ns, as charts/member/README.md says to before
// installing a release where another one, or the chart's crds/ before
// crds.enabled, created it (Helm refuses to take over an object that
// another release owns). The tests install the chart in a namespace of
// their own each, one after the other, in one cluster.
func handOverCRD(t testing.TB, release, ns string) {
	t.Helper()
	if !crdExists(t) {
		return
	}
	kubectl(t, "label", policyCRD, "app.kubernetes.io/managed-by=Helm", "--overwrite")
	kubectl(t, "annotate", policyCRD, "--overwrite", "meta.helm.sh/release-name="+release, "meta.helm.sh/release-namespace="+ns)
}

// policyFinalizers lists the MirrorPolicies of the node that hold a
// fleetmirror finalizer, as mirrorpolicy/ns/name.
func policyFinalizers(t testing.TB) []string {
	t.Helper()
	if !crdExists(t) {
		return nil
	}
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "get", "mirrorpolicies", "-A", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, p := range list.Items {
		if hasOurFinalizer(p.Finalizers) {
			held = append(held, "mirrorpolicy/"+p.Namespace+"/"+p.Name)
		}
	}
	return held
}
