// Command kyverno-replay measures how Kyverno's users fare with
// `kubectl fleetmirror migrate`: it replays Kyverno's own conformance tests
// of generate rules that clone (test/conformance/chainsaw/generate in the
// kyverno/kyverno repository) against a real API server with the member
// agent running, each Kyverno policy replaced by the MirrorPolicies that
// migrate's translation (cli.TranslateKyverno) makes of it.
//
// Each test ends as one of:
//   - pass: every step did what Kyverno's test expects;
//   - fail: a step did not (which step, what differed);
//   - refused: migrate does not translate one of the test's policies (its
//     reason), so a user would have nothing to apply;
//   - unsupported: the test needs what the replay does not run (a shell
//     script, a JMESPath expression), and why.
//
// It prints a table and the totals, among them how many of the tests whose
// copies are made when a Namespace appears pass. It runs chainsaw's
// operations itself (apply, create, update, patch, assert, error, delete,
// sleep), with envtest's kube-apiserver, which has no namespace controller:
// the replay empties and finalizes deleted namespaces itself.
//
//	go run ./hack/kyverno-replay -kyverno /path/to/kyverno [-run REGEXP] [-v]
//
// The Kyverno repository may be a checkout or a bare clone (read at HEAD).
// It is not part of make test: CI has no Kyverno repository. make
// kyverno-replay KYVERNO=path runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

func main() {
	repo := flag.String("kyverno", "", "the kyverno/kyverno repository: a checkout, or a bare clone read at HEAD")
	run := flag.String("run", "", "replay only the tests whose path (under "+generateDir+") matches this regular expression")
	verbose := flag.Bool("v", false, "print each operation as it runs")
	flag.Parse()
	if *repo == "" {
		fmt.Fprintln(os.Stderr, "kyverno-replay: -kyverno is required")
		flag.Usage()
		os.Exit(2)
	}
	if err := replay(*repo, *run, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "kyverno-replay:", err)
		os.Exit(1)
	}
}

func replay(repo, run string, verbose bool) error {
	filter, err := regexp.Compile(run)
	if err != nil {
		return fmt.Errorf("-run: %v", err)
	}
	t, err := openTree(repo)
	if err != nil {
		return err
	}
	tests, err := cloneTests(t)
	if err != nil {
		return err
	}
	var selected []string
	for _, d := range tests {
		if filter.MatchString(strings.TrimPrefix(d, generateDir+"/")) {
			selected = append(selected, d)
		}
	}
	if len(selected) == 0 {
		return fmt.Errorf("no test of %d matches -run %q", len(tests), run)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fleettest.SetLogger()
	fmt.Fprintf(os.Stderr, "Starting an API server and the agent for %d tests\n", len(selected))
	f, err := fleettest.Start("")
	if err != nil {
		return err
	}
	defer func() { _ = f.Stop() }()
	if _, err := fleettest.InstallPolicyCRD(f.Hub.Config); err != nil {
		return err
	}
	if err := f.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}); err != nil {
		return err
	}
	k, err := newKube(f.Hub.Config)
	if err != nil {
		return err
	}
	if err := k.snapshot(ctx); err != nil {
		return err
	}
	go k.runNamespaceController(ctx)
	a := &agent{cfg: f.Hub.Config}
	defer a.stop()
	log := io.Discard
	if verbose {
		log = os.Stderr
	}
	kc, err := f.Hub.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(os.TempDir(), fmt.Sprintf("kyverno-replay-%d.kubeconfig", os.Getpid()))
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	defer func() { _ = os.Remove(kubeconfig) }()
	r := &runner{kubeconfig: kubeconfig, k: k, tree: t, agent: a, log: log}

	var results []result
	for i, d := range selected {
		fmt.Fprintf(log, "=== %s\n", strings.TrimPrefix(d, generateDir+"/"))
		res := r.run(ctx, d, i)
		if ctx.Err() != nil {
			// interrupted: its verdict would be the interruption's
			break
		}
		fmt.Fprintf(os.Stderr, "%-7s %s (%s)\n", res.verdict, res.test, res.took.Round(100*time.Millisecond))
		results = append(results, res)
	}
	printResults(os.Stdout, results)
	return ctx.Err()
}

// cloneTests lists the test directories under generateDir whose Kyverno
// policies have a generate rule that clones (clone or cloneList).
func cloneTests(t tree) ([]string, error) {
	files, err := t.files(generateDir)
	if err != nil {
		return nil, err
	}
	byDir := map[string][]string{}
	var dirs []string
	for _, f := range files {
		d := path.Dir(f)
		if path.Base(f) == "chainsaw-test.yaml" {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	var out []string
	for _, d := range dirs {
		if clones(t, byDir[d]) {
			out = append(out, d)
		}
	}
	return out, nil
}

func clones(t tree, files []string) bool {
	for _, f := range files {
		if ext := path.Ext(f); ext != ".yaml" && ext != ".yml" {
			continue
		}
		raw, err := t.read(f)
		if err != nil {
			continue
		}
		docs, _ := yamlDocs(raw)
		for _, d := range docs {
			u := &unstructured.Unstructured{Object: d}
			if isKyvernoPolicy(u) && len(cloneRules(u)) > 0 {
				return true
			}
		}
	}
	return false
}

// printResults writes the table and the totals.
func printResults(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST\tTRIGGER\tRESULT\tDETAIL")
	counts := map[string]int{}
	nsCounts := map[string]int{}
	nsTotal := 0
	for _, r := range results {
		trigger := r.trigger
		if trigger == "" {
			trigger = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.test, trigger, r.verdict, oneLine(r.detail))
		counts[r.verdict]++
		if r.trigger == "Namespace" {
			nsTotal++
			nsCounts[r.verdict]++
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nTotal %d: %s\n", len(results), verdictCounts(counts))
	fmt.Fprintf(w, "Namespace-trigger tests: %d pass of %d (%s)\n", nsCounts[verdictPass], nsTotal, verdictCounts(nsCounts))
	fmt.Fprintf(w, "Other triggers: %d tests\n", len(results)-nsTotal)
	printReasons(w, results)
}

// printReasons counts, for each kind of migrate's decisions, the refused
// tests it blocks (a test refused for several reasons counts under each),
// Namespace-trigger tests apart.
func printReasons(w io.Writer, results []result) {
	all, ns := map[string]int{}, map[string]int{}
	for _, r := range results {
		for _, k := range r.reasons {
			all[k]++
			if r.trigger == "Namespace" {
				ns[k]++
			}
		}
	}
	if len(all) == 0 {
		return
	}
	kinds := make([]string, 0, len(all))
	for k := range all {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if all[kinds[i]] != all[kinds[j]] {
			return all[kinds[i]] > all[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	fmt.Fprintln(w, "\nRefused tests by migrate's reason (all, Namespace-trigger):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range kinds {
		fmt.Fprintf(tw, "  %d\t%d\t%s\n", all[k], ns[k], k)
	}
	_ = tw.Flush()
}

func verdictCounts(c map[string]int) string {
	var parts []string
	for _, v := range []string{verdictPass, verdictFail, verdictRefused, verdictUnsupported} {
		parts = append(parts, fmt.Sprintf("%d %s", c[v], v))
	}
	return strings.Join(parts, ", ")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
