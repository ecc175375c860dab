package main

import (
	"fmt"
	"regexp"
	"strings"
)

// word is one word of an instruction's arguments, quotes removed and
// variables expanded.
type word struct {
	text string
	// assign is set for NAME=VALUE where NAME and = are unquoted: a
	// shell assignment in a RUN command, a key=value pair elsewhere.
	assign bool
}

// lexer splits instruction arguments into words as a POSIX shell does, for
// the part of the shell that Dockerfiles commonly use: blanks separate
// words; '…' is literal; in "…" and bare text $NAME and ${NAME} expand and
// a backslash escapes. With shell set (RUN), unquoted && and ; end a
// command, and what this tool cannot run as the shell would (pipes,
// redirections, subshells, $(…), field splitting) is an error rather than
// a different result.
type lexer struct {
	s     string
	pos   int
	shell bool
}

var (
	varName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// isName says whether s is a variable name.
func isName(s string) bool { return s != "" && varName.FindString(s) == s }

// done says whether every word has been read.
func (l *lexer) done() bool {
	l.skipBlanks()
	return l.pos >= len(l.s)
}

func (l *lexer) skipBlanks() {
	for l.pos < len(l.s) && (l.s[l.pos] == ' ' || l.s[l.pos] == '\t') {
		l.pos++
	}
}

// command reads the words up to the end of the next command (shell) or of
// the text. vars gives the values for expansion; a variable it does not
// know is an error, not an empty string, so that a missing ARG is noticed.
func (l *lexer) command(vars map[string]string) ([]word, error) {
	var words []word
	for {
		l.skipBlanks()
		if l.pos >= len(l.s) {
			return words, nil
		}
		if l.shell {
			switch {
			case strings.HasPrefix(l.s[l.pos:], "&&"):
				l.pos += 2
				return words, nil
			case l.s[l.pos] == ';':
				l.pos++
				return words, nil
			case l.s[l.pos] == '#':
				return nil, fmt.Errorf("a shell comment is not supported")
			}
		}
		w, err := l.word(vars)
		if err != nil {
			return nil, err
		}
		words = append(words, w)
	}
}

// word reads one word starting at l.pos.
func (l *lexer) word(vars map[string]string) (word, error) {
	assign := assignment.MatchString(l.s[l.pos:])
	var b strings.Builder
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		switch {
		case c == ' ' || c == '\t', l.shell && (c == ';' || strings.HasPrefix(l.s[l.pos:], "&&")):
			return word{text: b.String(), assign: assign}, nil
		case l.shell && strings.ContainsRune("|&<>()`", rune(c)):
			return word{}, fmt.Errorf("shell syntax %q is not supported", c)
		case c == '\'':
			end := strings.IndexByte(l.s[l.pos+1:], '\'')
			if end < 0 {
				return word{}, fmt.Errorf("unterminated '")
			}
			b.WriteString(l.s[l.pos+1 : l.pos+1+end])
			l.pos += end + 2
		case c == '"':
			if err := l.doubleQuoted(&b, vars); err != nil {
				return word{}, err
			}
		case c == '\\':
			if l.pos+1 < len(l.s) {
				b.WriteByte(l.s[l.pos+1])
			}
			l.pos += 2
		case c == '$':
			v, err := l.expand(vars)
			if err != nil {
				return word{}, err
			}
			if l.shell && strings.ContainsAny(v, " \t\n") {
				return word{}, fmt.Errorf("an unquoted variable with blanks in its value would be split into words: quote it")
			}
			b.WriteString(v)
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
	return word{text: b.String(), assign: assign}, nil
}

// doubleQuoted reads "…" starting at its opening quote.
func (l *lexer) doubleQuoted(b *strings.Builder, vars map[string]string) error {
	l.pos++
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		switch {
		case c == '"':
			l.pos++
			return nil
		case c == '\\' && l.pos+1 < len(l.s) && strings.IndexByte("$\"\\`", l.s[l.pos+1]) >= 0:
			b.WriteByte(l.s[l.pos+1])
			l.pos += 2
		case c == '`' && l.shell:
			return fmt.Errorf("command substitution is not supported")
		case c == '$':
			v, err := l.expand(vars)
			if err != nil {
				return err
			}
			b.WriteString(v)
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
	return fmt.Errorf(`unterminated "`)
}

// expand reads $NAME or ${NAME} starting at the $ and returns its value; a
// $ that starts neither stands for itself.
func (l *lexer) expand(vars map[string]string) (string, error) {
	rest := l.s[l.pos+1:]
	var name string
	switch {
	case strings.HasPrefix(rest, "{"):
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${")
		}
		name = rest[1:end]
		if !isName(name) {
			return "", fmt.Errorf("${%s}: only ${NAME} and $NAME are supported", name)
		}
		l.pos += 1 + end + 1
	case strings.HasPrefix(rest, "(") && l.shell:
		return "", fmt.Errorf("command substitution is not supported")
	default:
		name = varName.FindString(rest)
		if name == "" {
			l.pos++
			return "$", nil
		}
		l.pos += 1 + len(name)
	}
	v, ok := vars[name]
	if !ok {
		return "", fmt.Errorf("$%s is not declared (no ARG or assignment before it)", name)
	}
	return v, nil
}
