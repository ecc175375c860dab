package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// How long the replay waits. Kyverno's tests sleep (3 s) to give its
// background controller time; the agent reacts within a second, and the
// replay polls instead.
const (
	// assertTimeout bounds an assert (and a delete's wait, and a
	// MirrorPolicy's readiness).
	assertTimeout = 15 * time.Second
	// assertHold is how long an assert's object must go on matching.
	assertHold = 2 * time.Second
	// errorHold is how long an error op's object must stay absent (or not
	// matching) once it is: a copy that comes back within it fails.
	errorHold = 5 * time.Second
	// sleepFor replaces every sleep of a test.
	sleepFor = time.Second
)

// Verdicts of a test.
const (
	verdictPass        = "pass"
	verdictFail        = "fail"
	verdictRefused     = "refused"
	verdictUnsupported = "unsupported"
)

// result is one test's line in the table.
type result struct {
	test    string
	trigger string
	verdict string
	detail  string
	// reasons are the kinds of migrate's decisions of a refused test.
	reasons []string
	took    time.Duration
}

// runner replays tests one after another against one API server.
type runner struct {
	// kubeconfig is the API server's, for the scripts' kubectl.
	kubeconfig string
	k          *kube
	tree       tree
	agent      *agent
	log        io.Writer
}

// testRun is the state of one test being replayed.
type testRun struct {
	*runner
	// ns is chainsaw's namespace of the test, for objects without one.
	ns string
	// created lists what the test created, in order, for cleanup.
	created []ref
	// applied holds the MirrorPolicies applied for each Kyverno policy.
	applied map[string][]ref
}

// stepError is a failed op: which step, what differed.
type stepError struct {
	step, what string
}

func (e *stepError) Error() string { return e.step + ": " + e.what }

// errUnsupported ends a test at an op the replay cannot run.
type errUnsupported string

func (e errUnsupported) Error() string { return string(e) }

// run replays the test in dir (relative to the repository) and cleans up
// after it.
func (r *runner) run(ctx context.Context, dir string, index int) (res result) {
	start := time.Now()
	res.test = strings.TrimPrefix(dir, generateDir+"/")
	defer func() { res.took = time.Since(start) }()
	_, ops, err := parseTest(r.tree, dir)
	if err != nil {
		res.verdict, res.detail = verdictUnsupported, err.Error()
		return res
	}

	pre := preflightOf(ops)
	res.trigger = pre.trigger
	if pre.refused != "" {
		res.verdict, res.detail, res.reasons = verdictRefused, pre.refused, pre.reasons
		return res
	}
	if err := r.agent.ensure(pre.agentFlags); err != nil {
		res.verdict, res.detail = verdictFail, "starting the agent: "+err.Error()
		return res
	}

	t := &testRun{runner: r, ns: fmt.Sprintf("chainsaw-%d", index), applied: map[string][]ref{}}
	err = t.create(ctx, namespaceObject(t.ns))
	for i := 0; err == nil && i < len(ops); i++ {
		err = t.do(ctx, ops[i])
	}
	var unsupported errUnsupported
	switch {
	case errors.As(err, &unsupported):
		res.verdict, res.detail = verdictUnsupported, err.Error()
	case err != nil:
		res.verdict, res.detail = verdictFail, err.Error()
		if why := t.degraded(ctx); why != "" {
			res.detail += " (" + why + ")"
		}
	default:
		res.verdict = verdictPass
	}
	if err := r.k.cleanup(ctx, t.created); err != nil {
		// A test that leaves something behind may change the next one's
		// result: always say so.
		fmt.Fprintf(os.Stderr, "%s: cleanup: %v\n", res.test, err)
	}
	return res
}

// degraded says what the agent reports on the test's MirrorPolicies that
// are Degraded (a kind it refuses, a conflict): often why a copy is
// missing.
func (t *testRun) degraded(ctx context.Context) string {
	var out []string
	for _, mps := range t.applied {
		for _, r := range mps {
			u := r.object()
			if err := t.k.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				continue
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Degraded" && m["status"] == "True" {
					out = append(out, fmt.Sprintf("MirrorPolicy %s/%s Degraded: %v: %v", r.namespace, r.name, m["reason"], m["message"]))
				}
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// preflight is what migrate makes of a test's Kyverno policies, known
// before anything runs.
type preflight struct {
	// trigger is that of the policies Kyverno accepts (triggerOf); a test
	// of Kyverno's validation has only those it refuses.
	trigger string
	// refused is the first refusal of a policy the test expects Kyverno to
	// accept: the test's verdict; reasons are the kinds of all the
	// decisions of such refusals (reasonKind).
	refused string
	reasons []string
	// agentFlags are those migrate tells the user to give the agent.
	agentFlags []string
}

func preflightOf(ops []op) preflight {
	var pre preflight
	var accepted, refusedByKyverno []*unstructured.Unstructured
	for _, o := range ops {
		if !isWrite(o.kind) {
			continue
		}
		for _, obj := range o.objects {
			if !isKyvernoPolicy(obj) {
				continue
			}
			t := translate(obj)
			if o.expectError {
				refusedByKyverno = append(refusedByKyverno, obj)
			} else {
				accepted = append(accepted, obj)
				if t.refused != "" && pre.refused == "" {
					pre.refused = fmt.Sprintf("%s (%s): %s", policyKey(obj), path.Base(o.file), t.refused)
				}
				for _, d := range t.decisions {
					if k := reasonKind(d); !slices.Contains(pre.reasons, k) {
						pre.reasons = append(pre.reasons, k)
					}
				}
			}
			if t.mentions(agentFlagPrivilege) && len(pre.agentFlags) == 0 {
				pre.agentFlags = append(pre.agentFlags, agentFlagPrivilege)
			}
		}
	}
	if pre.trigger = triggerOf(accepted); pre.trigger == "" {
		pre.trigger = triggerOf(refusedByKyverno)
	}
	return pre
}

func isWrite(kind string) bool {
	return kind == opApply || kind == opCreate || kind == opUpdate || kind == opPatch
}

func namespaceObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(name)
	return u
}

func (t *testRun) logf(format string, args ...any) {
	fmt.Fprintf(t.log, "  "+format+"\n", args...)
}

// do runs one op on each of its objects.
func (t *testRun) do(ctx context.Context, o op) error {
	fail := func(err error) error {
		if err == nil {
			return nil
		}
		var u errUnsupported
		if errors.As(err, &u) {
			return err
		}
		return &stepError{step: o.step, what: err.Error()}
	}
	switch o.kind {
	case opUnsupported:
		return errUnsupported(o.step + ": " + o.why)
	case opSkip:
		t.logf("%s: skipped: %s", o.step, o.why)
		return nil
	case opSleep:
		t.logf("%s: sleep %s", o.step, sleepFor)
		time.Sleep(sleepFor)
		return nil
	case opShell:
		out, err := t.shell(ctx, o.script)
		if err != nil {
			return fail(fmt.Errorf("script: %v: %s", err, strings.TrimSpace(out)))
		}
		t.logf("%s: script: ok", o.step)
		return nil
	}
	for _, obj := range o.objects {
		obj = obj.DeepCopy()
		if why := kyvernoOnly(obj); why != "" {
			t.logf("%s: %s %s: skipped: %s", o.step, o.kind, obj.GetName(), why)
			continue
		}
		if err := t.defaultNamespace(obj); err != nil && !isKyvernoPolicy(obj) {
			return fail(fmt.Errorf("%s %s: %v", o.kind, obj.GetKind(), err))
		}
		var err error
		switch {
		case isKyvernoPolicy(obj):
			err = t.doPolicy(ctx, o, obj)
		case isWrite(o.kind):
			err = t.write(ctx, o.kind, obj)
			switch {
			case o.expectError && err == nil:
				err = fmt.Errorf("%s %s: Kyverno refuses it; here it was accepted", o.kind, refOf(obj))
			case o.expectError:
				t.logf("%s: %s %s refused as expected: %v", o.step, o.kind, refOf(obj), err)
				err = nil
			}
		case o.kind == opAssert:
			err = t.assert(ctx, obj)
		case o.kind == opError:
			err = t.refute(ctx, obj)
		case o.kind == opDelete:
			err = t.delete(ctx, obj, o.ignoreNotFound)
		}
		if err != nil {
			return fail(err)
		}
		t.logf("%s: %s %s: ok", o.step, o.kind, refOf(obj))
	}
	return nil
}

// defaultNamespace puts a namespaced object without a namespace into the
// test's namespace, as chainsaw does.
func (t *testRun) defaultNamespace(obj *unstructured.Unstructured) error {
	if obj.GetNamespace() != "" {
		return nil
	}
	if isKyvernoPolicy(obj) {
		if obj.GetKind() == "Policy" {
			obj.SetNamespace(t.ns)
		}
		return nil
	}
	namespaced, err := t.k.c.IsObjectNamespaced(obj)
	if err != nil {
		return err
	}
	if namespaced {
		obj.SetNamespace(t.ns)
	}
	return nil
}

// doPolicy runs an op on a Kyverno policy: a write applies migrate's
// translation (and deletes the MirrorPolicies an earlier one made that
// this one does not), a delete deletes them, an assert (Kyverno's
// readiness template) waits until the agent has read them, an error on a
// policy is Kyverno's business.
func (t *testRun) doPolicy(ctx context.Context, o op, obj *unstructured.Unstructured) error {
	key := policyKey(obj)
	switch {
	case isWrite(o.kind):
		tr := translate(obj)
		switch {
		case o.expectError && tr.refused != "":
			t.logf("%s: %s refused by migrate, as Kyverno refuses it: %s", o.step, key, tr.refused)
			return nil
		case o.expectError:
			return fmt.Errorf("%s: Kyverno refuses this policy; migrate translates it", key)
		case tr.refused != "":
			// parse-time translation found no refusal: the policy changed
			return fmt.Errorf("%s: migrate refuses it: %s", key, tr.refused)
		}
		var now []ref
		for _, rule := range tr.rules {
			for i := range rule.MirrorPolicies {
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rule.MirrorPolicies[i])
				if err != nil {
					return err
				}
				mp := &unstructured.Unstructured{Object: u}
				if err := t.write(ctx, opUpdate+"-or-create", mp); err != nil {
					return fmt.Errorf("applying %s's translation %s: %v", key, refOf(mp), err)
				}
				now = append(now, refOf(mp))
			}
		}
		for _, old := range t.applied[key] {
			if !containsRef(now, old) {
				if err := t.k.deleteAndWait(ctx, old, assertTimeout); err != nil {
					return fmt.Errorf("deleting %s's former translation: %v", key, err)
				}
			}
		}
		t.applied[key] = now
		return nil
	case o.kind == opDelete:
		for _, mp := range t.applied[key] {
			if err := t.k.deleteAndWait(ctx, mp, assertTimeout); err != nil {
				return fmt.Errorf("deleting %s's translation: %v", key, err)
			}
		}
		delete(t.applied, key)
		return nil
	case o.kind == opAssert:
		mps, ok := t.applied[key]
		if !ok {
			return fmt.Errorf("%s: asserted, never applied", key)
		}
		return t.policiesObserved(ctx, mps)
	}
	t.logf("%s: error on %s: skipped: it asserts Kyverno's own policy object", o.step, key)
	return nil
}

func containsRef(refs []ref, r ref) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// policiesObserved waits until the agent has read each MirrorPolicy's
// current generation: the counterpart of Kyverno's policy being Ready.
func (t *testRun) policiesObserved(ctx context.Context, mps []ref) error {
	for _, r := range mps {
		var state string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, assertTimeout, true, func(ctx context.Context) (bool, error) {
			u := r.object()
			if err := t.k.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				state = err.Error()
				return false, nil
			}
			seen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			state = fmt.Sprintf("status.observedGeneration %d, generation %d", seen, u.GetGeneration())
			return seen == u.GetGeneration(), nil
		})
		if err != nil {
			return fmt.Errorf("%s not read by the agent within %s: %s", r, assertTimeout, state)
		}
	}
	return nil
}

// write sends obj as the op says: apply creates or merge-patches, create
// creates, update replaces, patch merge-patches; "update-or-create"
// replaces or creates (the MirrorPolicies: a new translation replaces the
// whole spec). What did not exist before is recorded for cleanup.
func (t *testRun) write(ctx context.Context, kind string, obj *unstructured.Unstructured) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(obj.GroupVersionKind())
	err := t.k.c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	switch {
	case apierrors.IsNotFound(err) && kind != opUpdate && kind != opPatch:
		if err := t.k.c.Create(ctx, obj); err != nil {
			return err
		}
		t.created = append(t.created, refOf(obj))
		return nil
	case err != nil:
		return err
	case kind == opCreate:
		return fmt.Errorf("create %s: it exists already", refOf(obj))
	case kind == opApply || kind == opPatch:
		b, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		return t.k.c.Patch(ctx, cur, client.RawPatch(types.MergePatchType, b))
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	return t.k.c.Update(ctx, obj)
}

func (t *testRun) create(ctx context.Context, obj *unstructured.Unstructured) error {
	return t.write(ctx, opCreate, obj)
}

// candidates are the objects an assert, error or delete of obj is about:
// the one of its name, or without a name those of its kind in its
// namespace that carry its labels.
func (t *testRun) candidates(ctx context.Context, obj *unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	if obj.GetName() != "" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(obj.GroupVersionKind())
		err := t.k.c.Get(ctx, client.ObjectKeyFromObject(obj), u)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return []unstructured.Unstructured{*u}, nil
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(obj.GroupVersionKind().GroupVersion().WithKind(obj.GetKind() + "List"))
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(obj.GetLabels())}}
	if obj.GetNamespace() != "" {
		opts = append(opts, client.InNamespace(obj.GetNamespace()))
	}
	if err := t.k.c.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// matching returns the first candidate that contains obj, or why none
// does.
func (t *testRun) matching(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, string, error) {
	cs, err := t.candidates(ctx, obj)
	if err != nil {
		return nil, "", err
	}
	if len(cs) == 0 {
		return nil, "not found", nil
	}
	var why string
	for i := range cs {
		d := contains(obj.Object, cs[i].Object)
		if d == "" {
			return &cs[i], "", nil
		}
		if why == "" {
			why = d
		}
	}
	return nil, why, nil
}

// assert waits until an object contains obj and goes on containing it
// for assertHold: a copy the agent is about to delete or revert (a rule
// just removed, a copy just edited) may still match for a moment.
func (t *testRun) assert(ctx context.Context, obj *unstructured.Unstructured) error {
	var why string
	var since time.Time
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, assertTimeout, true, func(ctx context.Context) (bool, error) {
		m, w, err := t.matching(ctx, obj)
		switch {
		case err != nil:
			if why == "" && ctx.Err() == nil {
				why = err.Error()
			}
			return false, nil
		case m == nil:
			why, since = w, time.Time{}
			return false, nil
		case since.IsZero():
			since = time.Now()
		}
		return time.Since(since) >= assertHold, nil
	})
	if err != nil {
		if !since.IsZero() {
			why = "it matched only in the last " + time.Since(since).Round(100*time.Millisecond).String()
		}
		return fmt.Errorf("assert %s: after %s: %s", refOf(obj), assertTimeout, why)
	}
	return nil
}

// refute waits until no object contains obj, then checks that none does
// for errorHold: a copy that comes back (a controller that recreates or
// reverts it) fails.
func (t *testRun) refute(ctx context.Context, obj *unstructured.Unstructured) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, assertTimeout, true, func(ctx context.Context) (bool, error) {
		m, _, err := t.matching(ctx, obj)
		if err != nil {
			if ctx.Err() == nil {
				last = err
			}
			return false, nil
		}
		last = nil
		return m == nil, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("error %s: %v", refOf(obj), last)
		}
		return fmt.Errorf("error %s: still there and matching after %s", refOf(obj), assertTimeout)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, errorHold, true, func(ctx context.Context) (bool, error) {
		m, _, err := t.matching(ctx, obj)
		return err == nil && m != nil, nil
	})
	if err == nil {
		return fmt.Errorf("error %s: gone or different at first, then back and matching within %s", refOf(obj), errorHold)
	}
	return nil
}

// delete deletes the objects obj names and waits until they are gone.
func (t *testRun) delete(ctx context.Context, obj *unstructured.Unstructured, ignoreNotFound bool) error {
	cs, err := t.candidates(ctx, obj)
	if err != nil {
		return err
	}
	if len(cs) == 0 && obj.GetName() != "" && !ignoreNotFound {
		// chainsaw's delete of something absent succeeds too; say so in -v
		t.logf("delete %s: not found", refOf(obj))
	}
	for i := range cs {
		if err := t.k.deleteAndWait(ctx, incarnation(&cs[i]), assertTimeout); err != nil {
			return fmt.Errorf("delete %s: %v", refOf(&cs[i]), err)
		}
	}
	return nil
}

// shell runs script with bash, kubectl reaching the replay's API server
// (the kubectl of KUBEBUILDER_ASSETS first on PATH).
func (t *testRun) shell(ctx context.Context, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, assertTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+t.kubeconfig, "PATH="+os.Getenv("KUBEBUILDER_ASSETS")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}
