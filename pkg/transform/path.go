package transform

import (
	"fmt"
	"strconv"
	"strings"
)

// maxIndex bounds a list index in a path. No Kubernetes object has a list
// this long, and the bound keeps index arithmetic far from overflow.
const maxIndex = 1_000_000

// segment is one step of a fieldPath: a map key or a list index.
type segment struct {
	key     string
	index   int
	isIndex bool
}

// fieldPath addresses a field of an object. It has at least one segment and
// the first is a key, because an object is a map.
type fieldPath []segment

// parsePath parses the path syntax of a rule:
//
//	data.LOG_LEVEL                         bare keys joined by dots
//	spec.template.spec.containers[0].image [N] indexes a list
//	data["tls.crt"]                        ["..."] quotes any key
//	metadata.annotations["example.com/x"]
//
// A bare key is one or more of A-Z a-z 0-9 _ - /. Any other key, a key
// containing a dot among them, is written in brackets as a Go
// double-quoted string (so \" and \\ escape a quote and a backslash).
func parsePath(s string) (fieldPath, error) {
	if s == "" {
		return nil, fmt.Errorf("empty path")
	}
	var p fieldPath
	i := 0
	for i < len(s) {
		switch {
		case s[i] == '[':
			seg, n, err := parseBracket(s[i:])
			if err != nil {
				return nil, fmt.Errorf("path %q at offset %d: %w", s, i, err)
			}
			p = append(p, seg)
			i += n
		case s[i] == '.' && len(p) > 0:
			i++
			n := bareLen(s[i:])
			if n == 0 {
				return nil, fmt.Errorf("path %q at offset %d: expected a key after '.'", s, i)
			}
			p = append(p, segment{key: s[i : i+n]})
			i += n
		case len(p) == 0:
			n := bareLen(s)
			if n == 0 {
				return nil, fmt.Errorf("path %q: must start with a key", s)
			}
			p = append(p, segment{key: s[:n]})
			i = n
		default:
			return nil, fmt.Errorf("path %q at offset %d: unexpected %q (quote keys with other characters: [\"key\"])", s, i, s[i])
		}
	}
	if p[0].isIndex {
		return nil, fmt.Errorf("path %q: must start with a key, not a list index", s)
	}
	return p, nil
}

// parseBracket parses `[N]` or `["key"]` at the start of s and returns the
// segment and the number of bytes it spans.
func parseBracket(s string) (segment, int, error) {
	if len(s) < 2 {
		return segment{}, 0, fmt.Errorf("unterminated '['")
	}
	if s[1] == '"' {
		end := 2
		for end < len(s) && s[end] != '"' {
			if s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(s) {
			return segment{}, 0, fmt.Errorf("unterminated quoted key")
		}
		key, err := strconv.Unquote(s[1 : end+1])
		if err != nil {
			return segment{}, 0, fmt.Errorf("bad quoted key %s: %w", s[1:end+1], err)
		}
		if end+1 >= len(s) || s[end+1] != ']' {
			return segment{}, 0, fmt.Errorf("expected ']' after quoted key")
		}
		return segment{key: key}, end + 2, nil
	}
	end := 1
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 1 || end >= len(s) || s[end] != ']' {
		return segment{}, 0, fmt.Errorf("expected [N] with a decimal index or [\"key\"]")
	}
	digits := s[1:end]
	if len(digits) > 1 && digits[0] == '0' {
		return segment{}, 0, fmt.Errorf("index %s has a leading zero", digits)
	}
	if len(digits) > 7 {
		return segment{}, 0, fmt.Errorf("index %s is larger than %d", digits, maxIndex)
	}
	n, _ := strconv.Atoi(digits) // at most 7 digits: cannot fail
	if n > maxIndex {
		return segment{}, 0, fmt.Errorf("index %d is larger than %d", n, maxIndex)
	}
	return segment{index: n, isIndex: true}, end + 1, nil
}

// bareLen returns the length of the bare key at the start of s.
func bareLen(s string) int {
	n := 0
	for n < len(s) && isBare(s[n]) {
		n++
	}
	return n
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '/'
}

// String returns p in canonical form: bare keys where possible, quoted keys
// otherwise. parsePath(p.String()) equals p.
func (p fieldPath) String() string {
	var b strings.Builder
	for i, seg := range p {
		switch {
		case seg.isIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(seg.index))
			b.WriteByte(']')
		case seg.key != "" && bareLen(seg.key) == len(seg.key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg.key)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(seg.key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// hasPrefix reports whether q is p or a path below it.
func (p fieldPath) hasPrefix(q fieldPath) bool {
	if len(q) > len(p) {
		return false
	}
	for i := range q {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}
