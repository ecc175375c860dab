package transform

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	template "github.com/DataDog/datadog-agent/pkg/template/text"
)

// errAbandoned stops a template whose execution outlived its Timeout: the
// caller has stopped waiting, so the goroutine should stop working too.
var errAbandoned = errors.New("template execution abandoned after its timeout")

// budget is the allowance of one template execution. Every function that
// builds a string charges the string's size, or a bound on it, before
// building it, so an execution holds at most MaxOutput bytes of results
// however its calls nest (replace inside replace grows geometrically, and
// variables keep results alive). The output writer has its own MaxOutput.
//
// Only the goroutine that executes the template touches left; ctx is shared
// with the caller, which cancels it when it stops waiting.
type budget struct {
	ctx  context.Context
	left int
}

// charge takes n bytes from the budget, or fails if they are not there or
// the execution has been abandoned.
func (b *budget) charge(n int) error {
	if b.ctx.Err() != nil {
		return errAbandoned
	}
	if n > b.left {
		return fmt.Errorf("result of %d bytes is over the remaining budget of %d bytes (limit on what one template may produce)", n, b.left)
	}
	b.left -= n
	return nil
}

// settle replaces an earlier charge of bound bytes by the actual size.
func (b *budget) settle(bound, actual int) { b.left += bound - actual }

// alive fails once the execution has been abandoned. Functions that build
// nothing still call it, so an abandoned goroutine stops at its next call.
func (b *budget) alive() error {
	if b.ctx.Err() != nil {
		return errAbandoned
	}
	return nil
}

// funcs returns the function map of one execution, bound to b. It starts
// from an empty map: nothing here reads files, the environment, the network
// or the clock. Besides the functions the contract names, it replaces the
// builtins that build strings (print, printf, println, html, js, urlquery)
// by bounded versions with the same names: a FuncMap entry wins over a
// builtin, and fmt alone would pad "%999999d" a thousand times over. The argument orders follow Sprig, which Helm users know:
// the string being worked on comes last, so it can be piped in.
func (b *budget) funcs() template.FuncMap {
	return template.FuncMap{
		"upper":      b.upper,
		"lower":      b.lower,
		"replace":    b.replace,
		"trimPrefix": b.trimPrefix,
		"trimSuffix": b.trimSuffix,
		"hasPrefix":  b.hasPrefix,
		"hasSuffix":  b.hasSuffix,
		"default":    b.dflt,
		"quote":      b.quote,
		"b64enc":     b.b64enc,
		"b64dec":     b.b64dec,
		"print":      b.print,
		"printf":     b.printf,
		"println":    b.println,
		"html":       b.html,
		"js":         b.js,
		"urlquery":   b.urlquery,
	}
}

// parseFuncs is the function map templates are parsed with: parsing only
// checks names, so the functions are never called.
var parseFuncs = (&budget{ctx: context.Background()}).funcs()

func (b *budget) upper(s string) (string, error) {
	if err := b.charge(mappedLen(s, unicode.ToUpper)); err != nil {
		return "", err
	}
	return strings.ToUpper(s), nil
}

func (b *budget) lower(s string) (string, error) {
	if err := b.charge(mappedLen(s, unicode.ToLower)); err != nil {
		return "", err
	}
	return strings.ToLower(s), nil
}

// mappedLen is len(strings.Map(f, s)) without building it. strings.Map
// writes U+FFFD (3 bytes) for each invalid byte, as ranging over s yields.
func mappedLen(s string, f func(rune) rune) int {
	n := 0
	for _, r := range s {
		n += utf8.RuneLen(f(r))
	}
	return n
}

// replace replaces every old in s by new: replace "old" "new" s.
func (b *budget) replace(old, new, s string) (string, error) {
	var n int
	if old == "" {
		// strings.Replace inserts new before each rune and at the end.
		n = len(s) + (utf8.RuneCountInString(s)+1)*len(new)
	} else {
		n = len(s) + strings.Count(s, old)*(len(new)-len(old))
	}
	if err := b.charge(n); err != nil {
		return "", err
	}
	return strings.ReplaceAll(s, old, new), nil
}

// trimPrefix and trimSuffix return a substring: nothing to charge.
func (b *budget) trimPrefix(prefix, s string) (string, error) {
	return strings.TrimPrefix(s, prefix), b.alive()
}

func (b *budget) trimSuffix(suffix, s string) (string, error) {
	return strings.TrimSuffix(s, suffix), b.alive()
}

func (b *budget) hasPrefix(prefix, s string) (bool, error) {
	return strings.HasPrefix(s, prefix), b.alive()
}

func (b *budget) hasSuffix(suffix, s string) (bool, error) {
	return strings.HasSuffix(s, suffix), b.alive()
}

// dflt is "default": default "x" .Labels.team is .Labels.team, or "x" when
// that is empty (a zero value or an empty map, slice or string).
func (b *budget) dflt(d any, given ...any) (any, error) {
	if err := b.alive(); err != nil {
		return nil, err
	}
	if len(given) == 0 || isEmpty(given[0]) {
		return d, nil
	}
	return given[0], nil
}

func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.String:
		return rv.Len() == 0
	case reflect.Struct:
		return false
	default:
		return rv.IsZero()
	}
}

// quote returns s as a Go double-quoted string. strconv.Quote writes at
// most 4 bytes per input byte (\xNN) plus the quotes.
func (b *budget) quote(s string) (string, error) {
	bound := 4*len(s) + 2
	if err := b.charge(bound); err != nil {
		return "", err
	}
	out := strconv.Quote(s)
	b.settle(bound, len(out))
	return out, nil
}

func (b *budget) b64enc(s string) (string, error) {
	if err := b.charge(base64.StdEncoding.EncodedLen(len(s))); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func (b *budget) b64dec(s string) (string, error) {
	if err := b.charge(base64.StdEncoding.DecodedLen(len(s))); err != nil {
		return "", err
	}
	out, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// print, println: fmt.Sprint and fmt.Sprintln, one operand at a time so the
// budget is charged before the result grows.
func (b *budget) print(args ...any) (string, error) { return b.sprint(args, false) }

func (b *budget) println(args ...any) (string, error) { return b.sprint(args, true) }

func (b *budget) sprint(args []any, ln bool) (string, error) {
	var sb strings.Builder
	prevString := false
	for i, a := range args {
		isString := a != nil && reflect.TypeOf(a).Kind() == reflect.String
		// fmt.Sprint separates operands when neither is a string;
		// fmt.Sprintln always does.
		if i > 0 && (ln || !isString && !prevString) {
			if err := b.charge(1); err != nil {
				return "", err
			}
			sb.WriteByte(' ')
		}
		if err := b.operand(&sb, a); err != nil {
			return "", err
		}
		prevString = isString
	}
	if ln {
		if err := b.charge(1); err != nil {
			return "", err
		}
		sb.WriteByte('\n')
	}
	return sb.String(), nil
}

// operand appends fmt.Sprint(a) to sb. A string is charged before it is
// copied. Other operands (numbers, booleans, the Target's maps) are
// formatted first: their text is proportional to data the API server
// already bounds.
func (b *budget) operand(sb *strings.Builder, a any) error {
	s, ok := a.(string)
	if !ok {
		if err := b.alive(); err != nil {
			return err
		}
		s = fmt.Sprint(a)
	}
	if err := b.charge(len(s)); err != nil {
		return err
	}
	sb.WriteString(s)
	return nil
}

// printf is fmt.Sprintf formatted one verb at a time, so that widths and
// precisions (fmt allows up to 1e6 each, per verb) are checked against the
// budget before fmt pads anything. It rejects '*' and explicit argument
// indexes, and a missing or extra argument is an error rather than
// "%!v(MISSING)" text in a mirror.
func (b *budget) printf(format string, args ...any) (string, error) {
	var sb strings.Builder
	emit := func(s string) error {
		if err := b.charge(len(s)); err != nil {
			return err
		}
		sb.WriteString(s)
		return nil
	}
	next := 0
	for i := 0; i < len(format); {
		j := strings.IndexByte(format[i:], '%')
		if j < 0 {
			if err := emit(format[i:]); err != nil {
				return "", err
			}
			break
		}
		if err := emit(format[i : i+j]); err != nil {
			return "", err
		}
		start := i + j
		i = start + 1
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		width, n := leadingNumber(format[i:])
		i += n
		prec := 0
		if i < len(format) && format[i] == '.' {
			prec, n = leadingNumber(format[i+1:])
			i += 1 + n
		}
		if i >= len(format) {
			return "", fmt.Errorf("printf: format ends in an incomplete verb %q", format[start:])
		}
		if c := format[i]; c == '*' || c == '[' {
			return "", fmt.Errorf("printf: '*' widths and [n] argument indexes are not supported")
		}
		verb, size := utf8.DecodeRuneInString(format[i:])
		i += size
		spec := format[start:i]
		if verb == '%' {
			if err := emit("%"); err != nil {
				return "", err
			}
			continue
		}
		if next >= len(args) {
			return "", fmt.Errorf("printf: no argument for %s", spec)
		}
		if width > b.left || prec > b.left {
			return "", fmt.Errorf("printf: width or precision of %s is over the remaining budget of %d bytes", spec, b.left)
		}
		arg := args[next]
		next++
		// A string's text is at most 5 bytes per byte (%q and % #x, the
		// worst verbs) plus padding; %s and %v copy it.
		bound := 0
		if s, ok := arg.(string); ok {
			factor := 5
			if (verb == 's' || verb == 'v') && !strings.Contains(spec, "#") {
				factor = 1
			}
			bound = factor*len(s) + 2 + max(width, prec)
		}
		if err := b.charge(bound); err != nil {
			return "", err
		}
		out := fmt.Sprintf(spec, arg)
		b.settle(bound, 0)
		if err := emit(out); err != nil {
			return "", err
		}
	}
	if next < len(args) {
		return "", fmt.Errorf("printf: %d arguments but the format uses %d", len(args), next)
	}
	return sb.String(), nil
}

// leadingNumber parses the decimal number at the start of s, saturating
// well above any budget, and returns it and its length.
func leadingNumber(s string) (int, int) {
	n, i := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if n < 1<<40 {
			n = n*10 + int(s[i]-'0')
		}
		i++
	}
	return n, i
}

// html, js and urlquery are text/template's escapers over the fmt.Sprint of
// their arguments, charged at their worst growth per byte first: 5 for
// html (&#34;), 6 for js (\u003C), 3 for urlquery (%XX).
func (b *budget) html(args ...any) (string, error) {
	return b.escape(args, 5, template.HTMLEscapeString)
}

func (b *budget) js(args ...any) (string, error) {
	return b.escape(args, 6, template.JSEscapeString)
}

func (b *budget) urlquery(args ...any) (string, error) {
	return b.escape(args, 3, url.QueryEscape)
}

func (b *budget) escape(args []any, factor int, esc func(string) string) (string, error) {
	// Like text/template, a single string is escaped as is.
	s, ok := "", false
	if len(args) == 1 {
		s, ok = args[0].(string)
	}
	if !ok {
		var err error
		if s, err = b.sprint(args, false); err != nil {
			return "", err
		}
	}
	bound := factor * len(s)
	if err := b.charge(bound); err != nil {
		return "", err
	}
	out := esc(s)
	b.settle(bound, len(out))
	return out, nil
}
