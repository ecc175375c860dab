package transform

import (
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	key := func(k string) segment { return segment{key: k} }
	idx := func(i int) segment { return segment{index: i, isIndex: true} }
	tests := []struct {
		in        string
		want      fieldPath
		canonical string // "" means in
		wantErr   string
	}{
		{in: "data", want: fieldPath{key("data")}},
		{in: "data.LOG_LEVEL", want: fieldPath{key("data"), key("LOG_LEVEL")}},
		{in: "spec.template.spec.containers[0].image", want: fieldPath{key("spec"), key("template"), key("spec"), key("containers"), idx(0), key("image")}},
		{in: "spec.a[1][2]", want: fieldPath{key("spec"), key("a"), idx(1), idx(2)}},
		{in: `data["tls.crt"]`, want: fieldPath{key("data"), key("tls.crt")}},
		{in: `metadata.annotations["example.com/x"]`, want: fieldPath{key("metadata"), key("annotations"), key("example.com/x")}},
		{in: `metadata.labels.app.kubernetes.io/name`, want: fieldPath{key("metadata"), key("labels"), key("app"), key("kubernetes"), key("io/name")}},
		{in: `data["plain"]`, want: fieldPath{key("data"), key("plain")}, canonical: "data.plain"},
		{in: `["a.b"].c`, want: fieldPath{key("a.b"), key("c")}},
		{in: `data["with \"quote\" and \\"]`, want: fieldPath{key("data"), key(`with "quote" and \`)}},
		{in: `data["ünï cödé"]`, want: fieldPath{key("data"), key("ünï cödé")}},
		{in: `data[""]`, want: fieldPath{key("data"), key("")}},
		{in: `data["a]b"].c`, want: fieldPath{key("data"), key("a]b"), key("c")}},
		{in: "a-b_c/d.e", want: fieldPath{key("a-b_c/d"), key("e")}},
		{in: "list[1000000]", want: fieldPath{key("list"), idx(1000000)}},

		{in: "", wantErr: "empty path"},
		{in: ".data", wantErr: "must start with a key"},
		{in: "[0]", wantErr: "must start with a key, not a list index"},
		{in: "data.", wantErr: "expected a key after '.'"},
		{in: "data..x", wantErr: "expected a key after '.'"},
		{in: "data.x y", wantErr: "unexpected ' '"},
		{in: "data.tls.crt:x", wantErr: "unexpected ':'"},
		{in: "data[", wantErr: "unterminated '['"},
		{in: "data[0", wantErr: "expected [N]"},
		{in: "data[]", wantErr: "expected [N]"},
		{in: "data[-1]", wantErr: "expected [N]"},
		{in: "data[01]", wantErr: "leading zero"},
		{in: "data[1000001]", wantErr: "larger than"},
		{in: "data[99999999999999999999]", wantErr: "larger than"},
		{in: `data["x"`, wantErr: "expected ']'"},
		{in: `data["x`, wantErr: "unterminated quoted key"},
		{in: `data["x\"]`, wantErr: "unterminated quoted key"},
		{in: `data["\q"]`, wantErr: "bad quoted key"},
		{in: `data['x']`, wantErr: "expected [N]"},
		{in: `data["x"]y`, wantErr: "unexpected 'y'"},
		{in: "data]", wantErr: "unexpected ']'"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePath(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parsePath(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePath(%q): %v", tt.in, err)
			}
			if !equalPaths(got, tt.want) {
				t.Fatalf("parsePath(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
			canonical := tt.canonical
			if canonical == "" {
				canonical = tt.in
			}
			if got.String() != canonical {
				t.Errorf("String() = %q, want %q", got.String(), canonical)
			}
			again, err := parsePath(got.String())
			if err != nil || !equalPaths(again, got) {
				t.Errorf("parsePath(%q) = %#v, %v; want %#v", got.String(), again, err, got)
			}
		})
	}
}

func equalPaths(a, b fieldPath) bool {
	return len(a) == len(b) && a.hasPrefix(b)
}
