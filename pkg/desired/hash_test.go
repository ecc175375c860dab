package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

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
			if got := appendJSON(nil, v); string(got) != string(want) {
				t.Errorf("appendJSON = %s\nencoding/json = %s", got, want)
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
			if got := appendJSON(nil, v); string(got) != string(want) {
				t.Errorf("appendJSON(%q) = %s\nencoding/json = %s", object, got, want)
			}
		}
		labels := map[string]string{key: value}
		want, err := json.Marshal(labels)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendObject(nil, labels, appendString); string(got) != string(want) {
			t.Errorf("appendObject(%q) = %s\nencoding/json = %s", labels, got, want)
		}
	})
}

func hashOfBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
