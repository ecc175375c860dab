package clusters_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

func TestParseKindsHint(t *testing.T) {
	at := "2026-11-27T10:00:00Z"
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1beta1", Kind: "Widget"}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cases := []struct {
		name      string
		data      map[string]string
		err       string // substring; empty: valid
		rulesOut  []schema.GroupVersionKind
		mayBeUsed []schema.GroupVersionKind
	}{
		{name: "valid", data: map[string]string{"covered": "Secret.v1\nWidget.v1beta1.example.com\nConfigMap.v1", "used": "Widget.v1beta1.example.com", "renewedAt": at},
			rulesOut: []schema.GroupVersionKind{secret, cm}, mayBeUsed: []schema.GroupVersionKind{widget, {Version: "v1", Kind: "Service"}}},
		{name: "nothing covered", data: map[string]string{"renewedAt": at}, mayBeUsed: []schema.GroupVersionKind{secret}},
		{name: "trailing newline", data: map[string]string{"covered": "Secret.v1\n", "renewedAt": at}, rulesOut: []schema.GroupVersionKind{secret}},
		{name: "no renewal", data: map[string]string{"covered": "Secret.v1"}, err: "renewedAt"},
		{name: "bad renewal", data: map[string]string{"covered": "Secret.v1", "renewedAt": "yesterday"}, err: "renewedAt"},
		{name: "unknown key", data: map[string]string{"covered": "Secret.v1", "renewedAt": at, "extra": ""}, err: `unknown key "extra"`},
		{name: "used not covered", data: map[string]string{"covered": "Secret.v1", "used": "ConfigMap.v1", "renewedAt": at}, err: "ConfigMap.v1"},
		{name: "no version", data: map[string]string{"covered": "Secret", "renewedAt": at}, err: "Kind.version"},
		{name: "lower-case kind", data: map[string]string{"covered": "secret.v1", "renewedAt": at}, err: "Kind.version"},
		{name: "empty version", data: map[string]string{"covered": "Secret..example.com", "renewedAt": at}, err: "version"},
		{name: "empty group", data: map[string]string{"covered": "Secret.v1.", "renewedAt": at}, err: "group"},
		{name: "bad group", data: map[string]string{"covered": "Secret.v1.Example_com", "renewedAt": at}, err: "group"},
		{name: "spaces", data: map[string]string{"covered": " Secret.v1", "renewedAt": at}, err: "Kind.version"},
		{name: "too many entries", data: map[string]string{"covered": strings.Repeat("A.v1\n", 2001), "renewedAt": at}, err: "more than 2000 entries"},
		{name: "too big", data: map[string]string{"covered": "Secret.v1" + strings.Repeat("\n", 65<<10), "renewedAt": at}, err: "bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := clusters.ParseKindsHint(tc.data)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.rulesOut {
				if !h.RulesOut(k) {
					t.Errorf("%s not ruled out", k)
				}
			}
			for _, k := range tc.mayBeUsed {
				if h.RulesOut(k) {
					t.Errorf("%s ruled out", k)
				}
			}
		})
	}
}

func TestFormatKindsHintRoundTrip(t *testing.T) {
	covered := []schema.GroupVersionKind{{Group: "example.com", Version: "v1", Kind: "Widget"}, {Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ConfigMap"}}
	used := covered[:1]
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	data := clusters.FormatKindsHint(covered, used, at)
	if got, want := data["covered"], "ConfigMap.v1\nSecret.v1\nWidget.v1.example.com"; got != want {
		t.Errorf("covered %q, want %q (sorted)", got, want)
	}
	h, err := clusters.ParseKindsHint(data)
	if err != nil {
		t.Fatal(err)
	}
	if !h.RenewedAt.Equal(at) || h.Covered.Len() != 3 || h.Used.Len() != 1 || h.RulesOut(used[0]) || !h.RulesOut(covered[1]) {
		t.Errorf("round trip: %+v", h)
	}
}

func FuzzParseKindsHint(f *testing.F) {
	f.Add("Secret.v1\nWidget.v1.example.com", "Widget.v1.example.com", "2026-11-27T10:00:00Z")
	f.Add("secret.v1", "", "")
	f.Add("A.v1.", "A.v1.", "2026-11-27T10:00:00+02:00")
	f.Fuzz(func(t *testing.T, covered, used, at string) {
		h, err := clusters.ParseKindsHint(map[string]string{"covered": covered, "used": used, "renewedAt": at})
		if err != nil {
			return
		}
		// What is accepted is within bounds and reads back the same.
		if h.Covered.Len()+h.Used.Len() > 2000 || !h.Covered.IsSuperset(h.Used) {
			t.Fatalf("accepted out of bounds: %d covered, %d used", h.Covered.Len(), h.Used.Len())
		}
		again, err := clusters.ParseKindsHint(clusters.FormatKindsHint(h.Covered.UnsortedList(), h.Used.UnsortedList(), h.RenewedAt))
		if err != nil || !again.Covered.Equal(h.Covered) || !again.Used.Equal(h.Used) {
			t.Fatalf("does not read back: %v", err)
		}
		for k := range h.Covered {
			if back, err := clusters.ParseKind(clusters.FormatKind(k)); err != nil || back != k {
				t.Fatalf("%v does not read back: %v", k, err)
			}
		}
	})
}
