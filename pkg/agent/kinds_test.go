package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// servedKinds is a slice of what a real API server with a CRD serves.
var servedKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "external-secrets.io", Version: "v1beta1", Kind: "SecretStore"},
	{Group: "external-secrets.io", Version: "v1", Kind: "SecretStore"},
	{Group: "example.com", Version: "v1", Kind: "Widget"},
}

func TestSuggestKinds(t *testing.T) {
	tests := []struct {
		want string
		near string // comma-separated, closest first
	}{
		{"Secrt.v1", "Secret.v1"},
		{"secret.v1", "Secret.v1"}, // case does not count
		{"Secret.v2", "Secret.v1"},
		{"ConfigMaps.v1", "ConfigMap.v1"},
		{"Configmap.v1", "ConfigMap.v1"},
		{"Ingress.v1beta1.networking.k8s.io", "Ingress.v1.networking.k8s.io"},
		{"Ingress.v1", "Ingress.v1.networking.k8s.io"},
		{"Widget.v1", "Widget.v1.example.com"},
		{"Deploymnet.v1.apps", "Deployment.v1.apps"},
		{"SecretStore.v2.external-secrets.io", "SecretStore.v1.external-secrets.io,SecretStore.v1beta1.external-secrets.io"},
		{"Servic.v1", "Service.v1"},
		{"Srvice.v1", "Service.v1"},
		{"Gadget.v1", "Widget.v1.example.com"},
		{"Xyzzy.v1", ""},
		{"Certificate.v1.cert-manager.io", ""},
		{"Secret.v1", ""}, // served: nothing to suggest
	}
	for _, tt := range tests {
		k := mustKind(t, tt.want)
		var got []string
		for _, gvk := range suggestKinds(k, servedKinds) {
			got = append(got, formatKind(gvk))
		}
		if strings.Join(got, ",") != tt.near {
			t.Errorf("suggestKinds(%s) = %q, want %q", tt.want, got, tt.near)
		}
	}
}

func TestCheckServed(t *testing.T) {
	s := served{kinds: map[schema.GroupVersionKind]bool{
		{Version: "v1", Kind: "Namespace"}: false,
	}, unavailable: map[schema.GroupVersion]error{
		{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("the server is currently unable to handle the request"),
	}}
	for _, k := range servedKinds {
		s.kinds[k] = true
	}
	tests := []struct {
		kinds   string
		want    string // empty: accepted
		unasked bool
	}{
		{kinds: "Secret.v1,Ingress.v1.networking.k8s.io"},
		{kinds: "Secrt.v1", want: "--resource-types: Secrt.v1 is not served by the API server; did you mean Secret.v1?"},
		{kinds: "Secret.v1,Srvice.v1", want: "--resource-types: Srvice.v1 is not served by the API server; did you mean Service.v1?"},
		{kinds: "SecretStore.v2.external-secrets.io", want: "did you mean SecretStore.v1.external-secrets.io or SecretStore.v1beta1.external-secrets.io?"},
		{kinds: "Xyzzy.v1", want: "--resource-types: Xyzzy.v1 is not served by the API server"},
		{kinds: "Namespace.v1", want: "--resource-types: Namespace.v1 is cluster-scoped; only namespaced kinds are mirrored"},
		{kinds: "PodMetrics.v1beta1.metrics.k8s.io", want: "metrics.k8s.io/v1beta1: the server is currently unable", unasked: true},
	}
	for _, tt := range tests {
		kinds, err := ParseResourceTypes(tt.kinds)
		if err != nil {
			t.Fatal(err)
		}
		err = s.check(kinds)
		var unasked *unaskedError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tt.kinds, err)
		case tt.want != "" && (err == nil || !strings.HasSuffix(err.Error(), tt.want) && !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.kinds, err, tt.want)
		case errors.As(err, &unasked) != tt.unasked:
			t.Errorf("%s: error %v is taken for a server that could not be asked: %v, want %v", tt.kinds, err, !tt.unasked, tt.unasked)
		}
	}
	if err := (served{err: errors.New("connection refused")}).check(servedKinds[:1]); !errors.As(err, new(*unaskedError)) {
		t.Errorf("failed discovery: %v, want a server that could not be asked", err)
	}
}

// A server that does not answer is no reason to call a kind unknown: the
// agent asks again until the deadline, then says it could not ask.
func TestCheckResourceTypesServerDown(t *testing.T) {
	addr, err := fleettest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = checkResourceTypes(context.Background(), &rest.Config{Host: "https://" + addr}, servedKinds[:1], 2*time.Second)
	if err == nil || !strings.HasPrefix(err.Error(), "--resource-types: could not ask the API server at https://"+addr+" which kinds it serves (tried for 2s): ") {
		t.Errorf("error %v, want one saying the server could not be asked", err)
	}
	if took := time.Since(start); took < 2*time.Second || took > 10*time.Second {
		t.Errorf("gave up after %s, want after the 2s deadline", took)
	}
}

// Against a real API server with an aggregated API that is down (its
// Service does not exist, so its discovery answers 503): a kind of that
// group version is one the server could not be asked about, never an
// unknown kind, while the kinds of every other group are checked as
// usual.
func TestCheckResourceTypesAggregatedAPIDown(t *testing.T) {
	fleet, ctx := fleettest.APIServer(t)
	if err := fleet.Hub.Client.Create(ctx, fleettest.UnavailableAPIService(schema.GroupVersion{Group: "broken.example.com", Version: "v1"})); err != nil {
		t.Fatal(err)
	}
	check := func(kinds string) error {
		parsed, err := ParseResourceTypes(kinds)
		if err != nil {
			t.Fatal(err)
		}
		return checkResourceTypes(ctx, fleet.Hub.Config, parsed, time.Second)
	}

	// The API server lists the group version soon after it is registered;
	// until then the kind is not served.
	unasked := "--resource-types: could not ask the API server at " + fleet.Hub.Config.Host +
		" which kinds it serves (tried for 1s): broken.example.com/v1: its discovery is stale: the API server that serves it does not answer"
	var got error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if got = check("Thing.v1.broken.example.com"); got != nil && got.Error() == unasked {
			break
		}
	}
	if got == nil || got.Error() != unasked {
		t.Errorf("a kind of the aggregated API that is down: error %v, want %q", got, unasked)
	}

	for _, tt := range []struct{ kinds, want string }{
		{kinds: "Secret.v1,Deployment.v1.apps"},
		{kinds: "Secrt.v1", want: "--resource-types: Secrt.v1 is not served by the API server; did you mean Secret.v1?"},
		{kinds: "Namespace.v1", want: "--resource-types: Namespace.v1 is cluster-scoped; only namespaced kinds are mirrored"},
	} {
		err := check(tt.kinds)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want) {
			t.Errorf("%s: error %v, want %q", tt.kinds, err, tt.want)
		}
	}
}

// FuzzSuggestKinds: whatever kind is asked for, the suggestions are served
// kinds, at most three, and never the kind asked for.
func FuzzSuggestKinds(f *testing.F) {
	for _, s := range []string{"Secrt", "secret", "ConfigMaps", "Ingress", "", "ÄÖÜ", strings.Repeat("x", 300)} {
		f.Add(s, "v1", "")
	}
	f.Add("Ingress", "v1beta1", "networking.k8s.io")
	f.Fuzz(func(t *testing.T, kind, version, group string) {
		want := schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
		got := suggestKinds(want, servedKinds)
		if len(got) > maxSuggestions {
			t.Fatalf("%d suggestions for %v", len(got), want)
		}
		for _, g := range got {
			if g == want || !containsKind(servedKinds, g) {
				t.Fatalf("suggested %v for %v", g, want)
			}
		}
	})
}

func containsKind(kinds []schema.GroupVersionKind, k schema.GroupVersionKind) bool {
	for _, s := range kinds {
		if s == k {
			return true
		}
	}
	return false
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"secret", "secret", 3, 0},
		{"secrt", "secret", 3, 1},
		{"srvice", "service", 3, 1},
		{"deploymnet", "deployment", 3, 2},
		{"kitten", "sitting", 10, 3},
		{"kitten", "sitting", 2, 3}, // beyond the limit: limit+1
		{"", "abc", 5, 3},
		{"a", "abcdefgh", 2, 3},
	} {
		if got := editDistance(tt.a, tt.b, tt.limit); got != tt.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tt.a, tt.b, tt.limit, got, tt.want)
		}
	}
}

func mustKind(t *testing.T, s string) schema.GroupVersionKind {
	t.Helper()
	kind, rest, _ := strings.Cut(s, ".")
	version, group, _ := strings.Cut(rest, ".")
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}
