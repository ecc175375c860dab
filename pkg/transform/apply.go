package transform

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
)

// ErrObjectTooLarge is wrapped by the error Apply returns when the object
// is over MaxOutput bytes of JSON after its rules. Unlike a failing rule it
// cannot be skipped: the caller must not write the object.
var ErrObjectTooLarge = errors.New("object too large after transforms")

// Target is the mirror a set of rules is applied for. Templates see its
// fields as .TargetNamespace, .TargetCluster and so on; namespacePattern and
// clusterPattern match TargetNamespace and TargetCluster. It has no methods,
// so templates can call none.
type Target struct {
	TargetNamespace string
	TargetCluster   string
	TargetName      string
	SourceNamespace string
	SourceCluster   string
	SourceName      string
	// Labels and Annotations are the source's.
	Labels      map[string]string
	Annotations map[string]string
}

// Apply applies the rules that match t to obj, a whole unstructured object
// (apiVersion, kind, metadata, data, spec...), in order. When secret is
// true obj is a Secret: its data values are base64 in obj, while rules
// under data (value and template at data.KEY, value and merge at data)
// are written as decoded text and Apply encodes them.
//
// A rule that fails changes nothing and is reported; the others still
// apply. Apply returns one error per failing rule, naming its index, and
// leaves strictness to the caller, except for ErrObjectTooLarge, after
// which obj must not be used. Run it on the desired mirror before the
// agent stamps its own labels and annotations, so a rule that replaces or
// deletes metadata.labels cannot remove them.
func (r *Rules) Apply(obj map[string]any, t Target, secret bool) []error {
	if r == nil || len(r.rules) == 0 {
		return nil
	}
	if obj == nil {
		return []error{fmt.Errorf("no object to transform")}
	}
	var errs []error
	// added bounds what the rules applied since the last size check can
	// have added. Checking after every rule would cost a walk of obj per
	// rule; checking only at the end would let 50 rules grow obj to 50
	// times MaxOutput first.
	added := 0
	for i := range r.rules {
		ru := &r.rules[i]
		if !ru.matches(t) {
			continue
		}
		n, err := ru.apply(obj, t, secret, r.limits)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules[%d] (%s): %w", ru.index, ru.path, err))
			continue
		}
		if added += n; added > r.limits.MaxOutput {
			if err := checkSize(obj, r.limits.MaxOutput); err != nil {
				return append(errs, err)
			}
			added = 0
		}
	}
	if err := checkSize(obj, r.limits.MaxOutput); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkSize fails if obj's JSON is over max bytes.
func checkSize(obj map[string]any, max int) error {
	if n, over := jsonSize(obj, max); over {
		return fmt.Errorf("%w: over %d bytes of JSON (at least %d)", ErrObjectTooLarge, max, n)
	}
	return nil
}

// apply applies one rule to obj and returns a bound on the bytes of JSON
// it added. It changes obj only when it succeeds.
func (ru *rule) apply(obj map[string]any, t Target, secret bool, l Limits) (int, error) {
	// A Secret's data maps keys to base64 strings: rules address data or
	// data.KEY and work with decoded text.
	secretData := secret && ru.path[0] == segment{key: "data"}
	if secretData && (len(ru.path) > 2 || len(ru.path) == 2 && ru.path[1].isIndex) {
		return 0, fmt.Errorf("a Secret's data holds strings: a path may not go below data.KEY")
	}

	switch ru.action {
	case actionDelete:
		_, err := deleteIn(obj, ru.path, nil)
		return 0, err

	case actionValue:
		v := runtime.DeepCopyJSONValue(ru.value)
		if secretData {
			var err error
			if v, err = encodeSecretData(v, len(ru.path) == 1); err != nil {
				return 0, err
			}
		}
		_, err := setIn(obj, ru.path, v, nil)
		// Base64 adds a third; the margin covers JSON escapes.
		return 2 * ru.size, err

	case actionTemplate:
		if secretData && len(ru.path) == 1 {
			return 0, fmt.Errorf("a template yields a string, and a Secret's data is a map: use path data.KEY")
		}
		out, err := execute(ru.tmpl, t, l)
		if err != nil {
			return 0, err
		}
		var v any = out
		if secretData {
			v = base64.StdEncoding.EncodeToString([]byte(out))
		}
		_, err = setIn(obj, ru.path, v, nil)
		// JSON escapes grow a string at most 6 times (\u00XX).
		return 6*len(out) + 2, err

	case actionMerge:
		m := ru.merge
		if secretData {
			if len(ru.path) == 2 {
				return 0, fmt.Errorf("a Secret's data.KEY holds a string: merge into data instead")
			}
			enc, err := encodeSecretData(runtime.DeepCopyJSONValue(m), true)
			if err != nil {
				return 0, err
			}
			m = enc.(map[string]any)
		}
		return 2 * ru.size, mergeAt(obj, ru.path, m)
	}
	return 0, fmt.Errorf("unknown action %d", ru.action)
}

// encodeSecretData base64-encodes a Secret data value (isMap false) or
// every value of a data map (isMap true). Numbers and booleans are written
// as their text; null map values are kept, as merge deletes those keys.
func encodeSecretData(v any, isMap bool) (any, error) {
	if !isMap {
		s, err := scalarText(v)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString([]byte(s)), nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a Secret's data must be a map, not %s", describe(v))
	}
	for k, e := range m {
		if e == nil {
			continue
		}
		s, err := scalarText(e)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		m[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	return m, nil
}

// scalarText is the text of a Secret value.
func scalarText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	default:
		return "", fmt.Errorf("a Secret's data values are strings, not %s", describe(v))
	}
}

// setIn returns container cur with v placed at rest, creating missing maps
// (a nil cur is a missing map) but never lists. It fails before changing
// anything: existing containers are changed only at the last step, and a
// map it creates is attached to its parent only after the step below it
// succeeded. done is the path walked so far, for messages.
func setIn(cur any, rest fieldPath, v any, done fieldPath) (any, error) {
	seg := rest[0]
	here := append(done[:len(done):len(done)], seg)
	if seg.isIndex {
		list, ok := cur.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: cannot index %s (lists are not created)", here, describe(cur))
		}
		if seg.index >= len(list) {
			return nil, fmt.Errorf("%s: index out of range, the list has %d items", here, len(list))
		}
		if len(rest) == 1 {
			list[seg.index] = v
			return list, nil
		}
		child, err := setIn(list[seg.index], rest[1:], v, here)
		if err != nil {
			return nil, err
		}
		list[seg.index] = child
		return list, nil
	}
	m, ok := cur.(map[string]any)
	switch {
	case ok && m == nil, cur == nil:
		m = map[string]any{}
	case !ok:
		return nil, fmt.Errorf("%s: cannot set a key in %s", here, describe(cur))
	}
	if len(rest) == 1 {
		m[seg.key] = v
		return m, nil
	}
	child, err := setIn(m[seg.key], rest[1:], v, here)
	if err != nil {
		return nil, err
	}
	m[seg.key] = child
	return m, nil
}

// deleteIn returns container cur without the field at rest. A field that
// is missing, a key or an index beyond a list's end, is not an error; a
// path through a value that is not a container is. Removing a list item
// builds a new list rather than shifting the items of a shared one.
func deleteIn(cur any, rest fieldPath, done fieldPath) (any, error) {
	if cur == nil {
		return nil, nil
	}
	seg := rest[0]
	here := append(done[:len(done):len(done)], seg)
	if seg.isIndex {
		list, ok := cur.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: cannot index %s", here, describe(cur))
		}
		if seg.index >= len(list) {
			return list, nil
		}
		if len(rest) == 1 {
			return append(list[:seg.index:seg.index], list[seg.index+1:]...), nil
		}
		child, err := deleteIn(list[seg.index], rest[1:], here)
		if err != nil {
			return nil, err
		}
		list[seg.index] = child
		return list, nil
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: cannot delete a key from %s", here, describe(cur))
	}
	if len(rest) == 1 {
		delete(m, seg.key)
		return m, nil
	}
	child, present := m[seg.key]
	if !present {
		return m, nil
	}
	child, err := deleteIn(child, rest[1:], here)
	if err != nil {
		return nil, err
	}
	m[seg.key] = child
	return m, nil
}

// mergeAt merges src into the map at p, creating it if it is missing. Maps
// merge key by key, recursively; any other value replaces what was there;
// a null value deletes the key (JSON merge patch semantics).
func mergeAt(obj map[string]any, p fieldPath, src map[string]any) error {
	cur, err := lookup(obj, p)
	if err != nil {
		return err
	}
	if m, ok := cur.(map[string]any); ok && m == nil {
		cur = nil
	}
	if cur == nil {
		_, err := setIn(obj, p, mergeCopy(src), nil)
		return err
	}
	dst, ok := cur.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: cannot merge a map into %s", p, describe(cur))
	}
	mergeInto(dst, src)
	return nil
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		switch v := v.(type) {
		case nil:
			delete(dst, k)
		case map[string]any:
			if d, ok := dst[k].(map[string]any); ok && d != nil {
				mergeInto(d, v)
			} else {
				dst[k] = mergeCopy(v)
			}
		default:
			dst[k] = runtime.DeepCopyJSONValue(v)
		}
	}
}

// mergeCopy deep-copies src without its null values, as merging it into an
// empty map would.
func mergeCopy(src map[string]any) map[string]any {
	out := make(map[string]any, len(src))
	mergeInto(out, src)
	return out
}

// lookup returns the value at p, or nil if a key or index on the way is
// missing. It fails when the path runs through a value that is not a
// container.
func lookup(obj map[string]any, p fieldPath) (any, error) {
	var cur any = obj
	for i, seg := range p {
		if cur == nil {
			return nil, nil
		}
		if seg.isIndex {
			list, ok := cur.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: cannot index %s", p[:i+1], describe(cur))
			}
			if seg.index >= len(list) {
				return nil, fmt.Errorf("%s: index out of range, the list has %d items", p[:i+1], len(list))
			}
			cur = list[seg.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: cannot look up a key in %s", p[:i+1], describe(cur))
		}
		cur = m[seg.key]
	}
	return cur, nil
}

// describe names the JSON type of v for messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "a missing value"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64, int, int32, json.Number:
		return "a number"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// jsonSize returns the length of v's JSON encoding as encoding/json writes
// it, stopping as soon as it passes limit (over is then true). It walks v
// without encoding it, so an oversized object costs no allocation.
func jsonSize(v any, limit int) (n int, over bool) {
	s := sizer{limit: limit}
	s.value(v)
	return s.n, s.n > limit
}

type sizer struct {
	n, limit int
	buf      [64]byte
}

func (s *sizer) value(v any) {
	if s.n > s.limit {
		return
	}
	switch v := v.(type) {
	case nil:
		s.n += 4
	case bool:
		s.n += len(strconv.AppendBool(s.buf[:0], v))
	case string:
		s.str(v)
	case int64:
		s.n += len(strconv.AppendInt(s.buf[:0], v, 10))
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			s.n += 4 // json.Marshal fails on these; count them as small
			return
		}
		s.n += len(strconv.AppendFloat(s.buf[:0], v, 'g', -1, 64))
	case map[string]any:
		s.n += 2 + max(len(v)-1, 0) // braces and commas
		for k, e := range v {
			if s.n > s.limit {
				return
			}
			s.str(k)
			s.n++ // colon
			s.value(e)
		}
	case []any:
		s.n += 2 + max(len(v)-1, 0)
		for _, e := range v {
			if s.n > s.limit {
				return
			}
			s.value(e)
		}
	default:
		// Not what JSON decoding yields, but valid in an unstructured object
		// built in code (int, map[string]string...): encode it.
		b, err := json.Marshal(v)
		if err != nil {
			s.n += 4
			return
		}
		s.n += len(b)
	}
}

// str counts a JSON string as encoding/json escapes it: \" \\ \n \r \t
// \b \f in two bytes; other control bytes, < > & (HTML-safe escaping),
// U+2028, U+2029 and each invalid byte (as \ufffd) in six.
func (s *sizer) str(v string) {
	s.n += 2
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				s.n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				s.n += 6
			default:
				s.n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			s.n += 6
		case r == '\u2028' || r == '\u2029':
			s.n += 6
		default:
			s.n += size
		}
		i += size
	}
}
