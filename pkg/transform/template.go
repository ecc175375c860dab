package transform

import (
	"bytes"
	"context"
	"fmt"
	"text/template/parse"

	// text/template with one change: it never calls methods of the data
	// (ours, Target, has none). The standard package looks methods up by
	// name (reflect.Value.MethodByName), and a reachable call of that makes
	// the linker keep every exported method of every type in the binary:
	// about 9 MB (a fifth) of each agent. Parsing stays the standard one.
	template "github.com/DataDog/datadog-agent/pkg/template/text"
)

// parseTemplate parses the text of a template rule and rejects the actions
// that loop or recurse: range (a loop), and template, define and block
// (named templates can call themselves). What remains runs each action of
// the tree at most once, which is what makes a timeout enough (see
// execute).
func parseTemplate(text string) (*template.Template, error) {
	var t *template.Template
	// A define of the root's own name replaces the root instead of adding a
	// second template, so parse under two names: a define shows up as an
	// extra template under at least one of them.
	for _, name := range []string{"define check", "template"} {
		var err error
		t, err = template.New(name).Option("missingkey=zero").Funcs(parseFuncs).Parse(text)
		if err != nil {
			return nil, err
		}
		if len(t.Templates()) > 1 {
			return nil, fmt.Errorf("define and block actions are not allowed")
		}
	}
	if t.Tree == nil {
		return nil, fmt.Errorf("template has no body")
	}
	if err := checkLoopFree(t.Root); err != nil {
		return nil, err
	}
	return t, nil
}

// checkLoopFree walks a parse tree and allows only the nodes that run at
// most once per execution. It lists what it allows rather than what it
// rejects, so a node kind added to text/template later is rejected until
// someone looks at it.
func checkLoopFree(n parse.Node) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkLoopFree(c); err != nil {
				return err
			}
		}
		return nil
	case *parse.IfNode:
		return checkBranch(n.List, n.ElseList)
	case *parse.WithNode:
		return checkBranch(n.List, n.ElseList)
	case *parse.ActionNode, *parse.TextNode, *parse.CommentNode:
		// Pipelines hold commands, never lists: no loop hides in them.
		return nil
	case *parse.RangeNode:
		return fmt.Errorf("range actions are not allowed: templates may not loop")
	case *parse.TemplateNode:
		return fmt.Errorf("template and block actions are not allowed: templates may not call templates")
	default:
		return fmt.Errorf("action %q is not allowed", n.String())
	}
}

func checkBranch(list, elseList *parse.ListNode) error {
	if err := checkLoopFree(list); err != nil {
		return err
	}
	if elseList == nil {
		return nil
	}
	return checkLoopFree(elseList)
}

// execute runs t with the Target as data and returns its output.
//
// Each execution gets a budget (see budget) and a writer that both fail
// past MaxOutput, and runs in its own goroutine so that it can be abandoned
// at Timeout. Abandoning a goroutine is only safe when its remaining work is
// bounded, and it is here: the action set is loop-free (checkLoopFree), so
// an execution evaluates each node of a tree built from at most MaxBytes of
// text at most once; every function that can build a large string charges
// the budget first and checks the cancelled context at entry, and so does
// every write. An abandoned execution therefore stops at its next function
// call or write, after at most one bounded call.
func execute(t *template.Template, data Target, l Limits) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.Timeout)
	defer cancel()

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned goroutine never blocks
	go func() {
		defer func() {
			// text/template turns panics in functions into errors; this
			// catches anything else, so no template can crash the agent.
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("template panicked: %v", p)}
			}
		}()
		b := &budget{ctx: ctx, left: l.MaxOutput}
		run, err := t.Clone()
		if err != nil {
			done <- result{err: err}
			return
		}
		run.Funcs(b.funcs())
		w := &limitedWriter{ctx: ctx, max: l.MaxOutput}
		if err := run.Execute(w, data); err != nil {
			done <- result{err: err}
			return
		}
		done <- result{out: w.buf.String()}
	}()

	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("template did not finish within %s", l.Timeout)
	}
}

// limitedWriter collects a template's output and fails once it would pass
// max bytes or the execution has been abandoned.
type limitedWriter struct {
	ctx context.Context
	max int
	buf bytes.Buffer
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.ctx.Err() != nil {
		return 0, errAbandoned
	}
	if w.buf.Len()+len(p) > w.max {
		return 0, fmt.Errorf("template output is over the limit of %d bytes", w.max)
	}
	return w.buf.Write(p)
}
