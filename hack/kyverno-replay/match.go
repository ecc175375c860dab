package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// contains reports how actual fails to contain expected, as chainsaw's
// assertions compare: every key of a map in expected must be in actual,
// with a value that contains the expected one; a list must have as many
// elements, each containing the expected one at its position; scalars are
// equal. Numbers compare by value, whatever their Go type. It returns ""
// when actual contains expected.
func contains(expected, actual any) string {
	return diff(normalize(expected), normalize(actual), "")
}

func diff(expected, actual any, at string) string {
	switch e := expected.(type) {
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, have %s", where(at), show(actual))
		}
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			av, ok := a[k]
			if !ok {
				return fmt.Sprintf("%s.%s: missing (want %s)", at, k, show(e[k]))
			}
			if d := diff(e[k], av, at+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		a, ok := actual.([]any)
		if !ok {
			return fmt.Sprintf("%s: want a list, have %s", where(at), show(actual))
		}
		if len(a) != len(e) {
			return fmt.Sprintf("%s: want %d elements, have %d", where(at), len(e), len(a))
		}
		for i := range e {
			if d := diff(e[i], a[i], fmt.Sprintf("%s[%d]", at, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(expected, actual) {
		return fmt.Sprintf("%s: want %s, have %s", where(at), show(expected), show(actual))
	}
	return ""
}

func where(at string) string {
	if at == "" {
		return "."
	}
	return at
}

// show prints a value short enough for a table row.
func show(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

// normalize gives v the types JSON decoding gives (float64 numbers,
// map[string]any, []any), so that YAML's ints and an object's int64s
// compare by value.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}
