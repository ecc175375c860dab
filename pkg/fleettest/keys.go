package fleettest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// DeclaredKeys reads pkg/annotations/keys.go at path and returns the key
// of each constant named Annotation* or Label*, by constant name: the
// contract that hand-kept lists (the charts' admission policy, the
// plugin's known keys) are checked against. A constant of those names
// that is not written Prefix + "..." is an error, so that none is missed.
func DeclaredKeys(path string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	keys := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || err != nil {
			return err == nil
		}
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Annotation") && !strings.HasPrefix(name.Name, "Label") || i >= len(vs.Values) {
				continue
			}
			lit, ok := prefixed(vs.Values[i])
			if !ok {
				err = fmt.Errorf("%s is not Prefix + \"...\"", name.Name)
				return false
			}
			s, uerr := strconv.Unquote(lit.Value)
			if uerr != nil {
				err = fmt.Errorf("%s: %w", name.Name, uerr)
				return false
			}
			keys[name.Name] = annotations.Prefix + s
		}
		return true
	})
	return keys, err
}

// prefixed returns the literal of an expression written Prefix + "...".
func prefixed(e ast.Expr) (*ast.BasicLit, bool) {
	bin, ok := e.(*ast.BinaryExpr)
	if !ok || bin.Op != token.ADD {
		return nil, false
	}
	x, isIdent := bin.X.(*ast.Ident)
	lit, isLit := bin.Y.(*ast.BasicLit)
	return lit, isIdent && x.Name == "Prefix" && isLit && lit.Kind == token.STRING
}
