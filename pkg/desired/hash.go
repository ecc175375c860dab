package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
)

// The content hash is the SHA-256 of the JSON encoding of {"c": content,
// "l": labels, "a": annotations} as encoding/json writes it (map keys
// sorted, HTML characters escaped). Hashes are stamped on every mirror and
// compared with those computed from the cache, also by earlier versions of
// the agent: the encoding must stay byte for byte that of encoding/json.
//
// It is computed for every watch event of a mirror (in the cache's
// transform, on the goroutine that reads the watch) and for every mirror
// built, so it is written by hand: encoding/json escapes strings byte by
// byte through reflection, which made the hash cost as much as decoding
// the object. The types of decoded objects (maps, slices, strings,
// integers, booleans, nil) are written directly, strings that need no
// escaping as they are; anything else (floats, escapes, other types) goes
// through encoding/json, so the result is the same. FuzzHashEncoding
// checks that against encoding/json.

// hashBuffers recycles the encodings' buffers.
var hashBuffers = sync.Pool{New: func() any { return new([]byte) }}

func hashOf(content map[string]any, labels, annots map[string]string) string {
	bp := hashBuffers.Get().(*[]byte)
	b := append((*bp)[:0], `{"c":`...)
	b = appendJSON(b, content)
	b = append(b, `,"l":`...)
	b = appendObject(b, labels, appendString)
	b = append(b, `,"a":`...)
	b = appendObject(b, annots, appendString)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	*bp = b
	hashBuffers.Put(bp)
	return hex.EncodeToString(sum[:16])
}

// appendJSON appends encoding/json's encoding of v to b.
func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case map[string]any:
		return appendObject(b, x, appendJSON)
	case []any:
		if x == nil {
			return append(b, "null"...)
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case map[string]string:
		return appendObject(b, x, appendString)
	default:
		return appendMarshal(b, v)
	}
}

// appendObject appends encoding/json's encoding of m to b: null when nil,
// else its keys sorted, each value written by value.
func appendObject[V any](b []byte, m map[string]V, value func([]byte, V) []byte) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = value(b, m[k])
	}
	return append(b, '}')
}

// appendString appends s quoted as encoding/json quotes it: as it is when
// it holds only printable ASCII that needs no escape, else by encoding/json.
func appendString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendMarshal(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendMarshal(b []byte, v any) []byte {
	enc, err := json.Marshal(v)
	if err != nil {
		// Unstructured content decoded from JSON always encodes again.
		panic(fmt.Sprintf("content hash: %v", err))
	}
	return append(b, enc...)
}
