package desired

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The content hash must be the one encoding/json gives, byte for byte:
// hashes stamped by earlier versions are compared with it.
func TestHashEncodingIsEncodingJSON(t *testing.T) {
	for name, v := range map[string]any{
		"decoded object": map[string]any{
			"data": map[string]any{"b": "dg==", "a": "plain text with spaces", "c": ""},
			"type": "Opaque", "immutable": true, "n": int64(-42), "i": 7, "f": 1.5, "big": 1e21, "small": 1e-7,
			"list": []any{"x", int64(1), nil, false, map[string]any{}, []any{}},
			"null": nil, "nilMap": map[string]any(nil), "nilList": []any(nil),
		},
		"escapes": map[string]any{
			"html": "<b>&</b>", "quote": `say "hi"`, "backslash": `a\b`, "control": "line\nbreak\ttab\x01\x7f",
			"unicode": "héllo 世界", "separators": "\u2028\u2029", "invalid": "\xff\xfe", "key<&>": "v",
		},
		"labels":     map[string]string{"app.kubernetes.io/name": "db", "z": "<>", "a": ""},
		"nil labels": map[string]string(nil),
		"other type": map[string]any{"bytes": []byte("raw"), "strings": []string{"a", "b"}, "uint": uint8(3)},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := appendJSON(nil, v); err != nil || string(got) != string(want) {
				t.Errorf("appendJSON = %s, %v\nencoding/json = %s", got, err, want)
			}
		})
	}
}

func TestHashOfIsTheHashOfEncodingJSON(t *testing.T) {
	content := map[string]any{"data": map[string]any{"k": "v<"}}
	labels, annots := map[string]string{"app": "db"}, map[string]string(nil)
	b, err := json.Marshal(struct {
		C map[string]any    `json:"c"`
		L map[string]string `json:"l"`
		A map[string]string `json:"a"`
	}{content, labels, annots})
	if err != nil {
		t.Fatal(err)
	}
	// The hash of that encoding, as the agent computed it before.
	want := hashOfBytes(b)
	if got := hashOf(content, labels, annots); got != want {
		t.Errorf("hashOf = %s, want %s", got, want)
	}
}

// MarshalJSON writes a write's body: what Unstructured's MarshalJSON
// writes, without its newline, in a slice that holds no spare capacity;
// what encoding/json refuses is an error, not a panic.
func TestMarshalJSONIsUnstructuredsEncoding(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": "db", "namespace": "team-a", "labels": map[string]any{"app": "<db>"}},
		"data":     map[string]any{"password": "cGFzcw==", "list": []any{int64(1), 2.5, nil, "é"}},
	}}
	want, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := MarshalJSON(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != strings.TrimSuffix(string(want), "\n") {
		t.Errorf("MarshalJSON = %s\nUnstructured.MarshalJSON = %s", got, want)
	}
	if cap(got) != len(got) {
		t.Errorf("the body holds %d bytes of spare capacity", cap(got)-len(got))
	}
	if _, err := MarshalJSON(map[string]any{"f": []any{math.Inf(1)}}); err == nil {
		t.Error("no error for +Inf")
	}
}

func TestHashOfPanicsOnWhatJSONCannotEncode(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for NaN")
		}
	}()
	hashOf(map[string]any{"f": math.NaN()}, nil, nil)
}

// FuzzHashEncoding checks the hash's encoding against encoding/json for
// any object as the API server's JSON decodes (numbers as int64 or
// float64), and for any label.
func FuzzHashEncoding(f *testing.F) {
	f.Add(`{"data":{"k":"dg=="},"type":"Opaque"}`, "app", "db")
	f.Add(`{"a":[1,2.5,-3e30,null,true,"<\u2028>"],"b":{"c":{}}}`, "k<", "\xff")
	f.Add(`{"s":"\u0000\u001f\"\\/"}`, "", "")
	f.Fuzz(func(t *testing.T, object, key, value string) {
		var v map[string]any
		if utiljson.Unmarshal([]byte(object), &v) == nil {
			want, err := json.Marshal(v)
			if err != nil {
				return
			}
			if got, err := appendJSON(nil, v); err != nil || string(got) != string(want) {
				t.Errorf("appendJSON(%q) = %s, %v\nencoding/json = %s", object, got, err, want)
			}
		}
		labels := map[string]string{key: value}
		want, err := json.Marshal(labels)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendStrings(nil, labels); string(got) != string(want) {
			t.Errorf("appendStrings(%q) = %s\nencoding/json = %s", labels, got, want)
		}
	})
}

func hashOfBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// BenchmarkWriteBody encodes the body of one write: a Secret of 4 KiB of
// data with a mirror's metadata, as MarshalJSON does it and as
// Unstructured's MarshalJSON (encoding/json) did it before.
//
//	go test -run '^$' -bench BenchmarkWriteBody -benchmem ./pkg/desired
func BenchmarkWriteBody(b *testing.B) {
	data := map[string]any{}
	for i := range 8 {
		data[fmt.Sprintf("key-%d", i)] = base64.StdEncoding.EncodeToString(make([]byte, 384))
	}
	mirror := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
		"metadata": map[string]any{
			"name": "db", "namespace": "team-a",
			"labels":      map[string]any{"fleetmirror.io/mirror": "true", "fleetmirror.io/source-cluster": "local"},
			"annotations": map[string]any{"fleetmirror.io/source": "local/platform/db", "fleetmirror.io/content-hash": "0123456789abcdef0123456789abcdef"},
		},
	}}
	b.Run("MarshalJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := MarshalJSON(mirror.Object); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := mirror.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
