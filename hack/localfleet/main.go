// Command localfleet runs a fleet on this machine for demos and manual tests:
// a hub and the members member-a and member-b, each a real kube-apiserver
// with its etcd (pkg/fleettest), with fleetmirror-member running against
// every cluster and fleetmirror-hub against the hub.
//
// It writes the admin kubeconfigs to .fleet/, registers member-a with the hub
// in Cluster API form and member-b in plain form, applies examples/*.yaml,
// shows which mirrors appeared where, and runs until SIGINT or SIGTERM, when
// it stops the agents and the API servers. Agent logs go to .fleet/logs/.
//
//	make build && go run ./hack/localfleet   # or: make demo
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// Flags of the agents. The placeholders {kubeconfig} and {cluster} are
// replaced by the kubeconfig path and the name of the cluster an agent runs
// against. Adjust as the binaries' flags change.
var (
	memberFlags = []string{
		"--kubeconfig", "{kubeconfig}",
		"--cluster-name", "{cluster}",
		"--metrics-bind-address", "127.0.0.1:0",
		"--health-probe-bind-address", "127.0.0.1:0",
	}
	hubFlags = []string{
		"--kubeconfig", "{kubeconfig}",
		"--cluster-name", "{cluster}",
		"--cluster-secrets-namespace", secretsNamespace,
		"--metrics-bind-address", "127.0.0.1:0",
		"--health-probe-bind-address", "127.0.0.1:0",
	}
)

const (
	// secretsNamespace holds the members' registration Secrets on the hub.
	secretsNamespace = "fleetmirror-system"
	// fieldOwner is the server-side apply field manager of the examples.
	fieldOwner = "fleetmirror-localfleet"
	// mirrorWait is how long to wait for mirrors before showing them.
	mirrorWait = 30 * time.Second
	// stopGrace is how long an agent has to exit after SIGTERM.
	stopGrace = 10 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctrllog.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{}))

	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "localfleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	root, err := fleettest.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, ".fleet")
	assets, err := fleettest.Assets()
	if err != nil {
		return err
	}

	fmt.Println("Starting API servers: hub, member-a, member-b")
	fleet, err := fleettest.Start(dir, "member-a", "member-b")
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("Stopping API servers")
		err = errors.Join(err, fleet.Stop())
	}()
	if ctx.Err() != nil {
		return nil
	}

	if err := register(ctx, fleet); err != nil {
		return err
	}

	agentsCtx, stopAgents := context.WithCancel(ctx)
	agents := startAgents(agentsCtx, root, filepath.Join(dir, "logs"), fleet)
	defer func() {
		stopAgents()
		if len(agents) > 0 {
			fmt.Println("Stopping agents")
		}
		for _, a := range agents {
			a.wait()
		}
	}()

	kinds, err := applyExamples(ctx, filepath.Join(root, "examples"), fleet)
	if err != nil {
		return err
	}

	if len(agents) == 0 {
		fmt.Println("No agent is running, so no mirror will appear.")
	} else {
		fmt.Printf("Waiting up to %s for mirrors...\n", mirrorWait)
	}
	printMirrors(os.Stdout, waitForMirrors(ctx, fleet, kinds, len(agents) > 0))

	fmt.Println("\nKubeconfigs:")
	for _, c := range fleet.Clusters() {
		fmt.Printf("  %-9s %s\n", c.Name, relative(c.KubeconfigPath))
	}
	fmt.Println("\nTry:")
	fmt.Printf("  %s --kubeconfig %s get secrets -A -l %s=true\n",
		filepath.Join(assets, "kubectl"), relative(fleet.Cluster("member-a").KubeconfigPath), annotations.LabelMirror)
	fmt.Println("\nFleet is running. Press Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

// register creates the hub's secrets namespace and registers member-a in
// Cluster API form and member-b in plain form.
func register(ctx context.Context, fleet *fleettest.Fleet) error {
	hub := fleet.Hub.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretsNamespace}}
	if err := hub.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s on the hub: %w", secretsNamespace, err)
	}
	if err := fleettest.RegisterCAPI(ctx, hub, secretsNamespace, fleet.Cluster("member-a"), nil); err != nil {
		return err
	}
	if err := fleettest.RegisterPlain(ctx, hub, secretsNamespace, fleet.Cluster("member-b"), nil,
		map[string]string{"region": "eu"}); err != nil {
		return err
	}
	fmt.Printf("Registered member-a (Cluster API Secret %s) and member-b (plain Secret %s) in %s of the hub\n",
		fleettest.CAPISecretName("member-a"), fleettest.PlainSecretName("member-b"), secretsNamespace)
	return nil
}

// agent is one fleetmirror process.
type agent struct {
	name string
	cmd  *exec.Cmd
	tail *tailBuffer
	done chan struct{}
}

// startAgents starts fleetmirror-member against every cluster and
// fleetmirror-hub against the hub. A missing binary is reported and skipped.
// Each agent leads a process group of its own, which is sent SIGTERM when ctx
// ends; wait then collects it.
func startAgents(ctx context.Context, root, logDir string, fleet *fleettest.Fleet) []*agent {
	member := filepath.Join(root, "bin", "fleetmirror-member")
	hub := filepath.Join(root, "bin", "fleetmirror-hub")
	var agents []*agent
	start := func(bin string, flags []string, c *fleettest.Cluster) {
		if _, err := os.Stat(bin); err != nil {
			fmt.Printf("Note: %s not found, not starting it for %s (run `make build`, or `make demo`)\n", relative(bin), c.Name)
			return
		}
		a, err := startAgent(ctx, bin, flags, c, logDir)
		if err != nil {
			fmt.Printf("Note: could not start %s: %v\n", a.name, err)
			return
		}
		fmt.Printf("Started %s (pid %d), log %s\n", a.name, a.cmd.Process.Pid, relative(filepath.Join(logDir, a.name+".log")))
		agents = append(agents, a)
	}
	for _, c := range fleet.Clusters() {
		start(member, memberFlags, c)
	}
	start(hub, hubFlags, fleet.Hub)
	return agents
}

func startAgent(ctx context.Context, bin string, flags []string, c *fleettest.Cluster, logDir string) (*agent, error) {
	a := &agent{name: filepath.Base(bin) + "-" + c.Name, tail: &tailBuffer{max: 4096}, done: make(chan struct{})}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return a, err
	}
	logFile, err := os.Create(filepath.Join(logDir, a.name+".log"))
	if err != nil {
		return a, err
	}
	r := strings.NewReplacer("{kubeconfig}", c.KubeconfigPath, "{cluster}", c.Name)
	args := make([]string, len(flags))
	for i, f := range flags {
		args[i] = r.Replace(f)
	}

	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = io.MultiWriter(logFile, a.tail)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return a, err
	}
	a.cmd = cmd

	go func() {
		defer close(a.done)
		err := cmd.Wait()
		// Whatever the agent started in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = logFile.Close()
		if ctx.Err() == nil {
			fmt.Printf("\n%s exited (%v). Last lines of its stderr:\n%s\n", a.name, exitReason(err), indent(a.tail.String()))
		}
	}()
	return a, nil
}

// wait returns once the agent has exited.
func (a *agent) wait() { <-a.done }

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if len(t.buf) == t.max { // drop the partial first line
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}

// applyExamples applies every YAML document of dir/*.yaml: namespaces to every
// cluster, everything else to the hub only. It returns the kinds of the
// objects applied to the hub, where mirrors are looked for.
func applyExamples(ctx context.Context, dir string, fleet *fleettest.Fleet) ([]schema.GroupVersionKind, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var namespaces, others []*unstructured.Unstructured
	for _, file := range files {
		objs, err := decodeFile(file)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GroupVersionKind() == corev1.SchemeGroupVersion.WithKind("Namespace") {
				namespaces = append(namespaces, o)
			} else {
				others = append(others, o)
			}
		}
	}

	for _, c := range fleet.Clusters() {
		for _, ns := range namespaces {
			if err := apply(ctx, c, ns); err != nil {
				return nil, err
			}
		}
	}
	var kinds []schema.GroupVersionKind
	for _, o := range others {
		if err := apply(ctx, fleet.Hub, o); err != nil {
			return nil, err
		}
		if gvk := o.GroupVersionKind(); !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	fmt.Printf("Applied %d namespaces to every cluster and %d objects to the hub from %s\n",
		len(namespaces), len(others), relative(dir))
	return kinds, nil
}

func decodeFile(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(o.Object) > 0 { // an empty document between two ---
			objs = append(objs, o)
		}
	}
}

func apply(ctx context.Context, c *fleettest.Cluster, o *unstructured.Unstructured) error {
	err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
		client.FieldOwner(fieldOwner), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("applying %s %s to %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), c.Name, err)
	}
	return nil
}

// mirror is one row of the mirrors table.
type mirror struct {
	cluster, namespace, kind, name, source string
}

// waitForMirrors polls every cluster for mirrors of the given kinds until the
// list has been non-empty and unchanged for a few polls, mirrorWait passes or
// ctx ends. Without agents it looks once.
func waitForMirrors(ctx context.Context, fleet *fleettest.Fleet, kinds []schema.GroupVersionKind, agentsRunning bool) []mirror {
	const interval, stableFor = 2 * time.Second, 3
	deadline := time.Now().Add(mirrorWait)
	var last []mirror
	stable := 0
	for {
		rows := listMirrors(ctx, fleet, kinds)
		if slices.Equal(rows, last) && len(rows) > 0 {
			stable++
		} else {
			stable = 0
		}
		last = rows
		if !agentsRunning || stable >= stableFor || time.Now().After(deadline) {
			return rows
		}
		select {
		case <-ctx.Done():
			return rows
		case <-time.After(interval):
		}
	}
}

// listMirrors lists the objects labelled as mirrors in every cluster. A
// cluster that cannot be listed is reported and skipped.
func listMirrors(ctx context.Context, fleet *fleettest.Fleet, kinds []schema.GroupVersionKind) []mirror {
	var rows []mirror
	for _, c := range fleet.Clusters() {
		for _, gvk := range kinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			listCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Client.List(listCtx, list, client.MatchingLabels{annotations.LabelMirror: "true"})
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					fmt.Printf("Listing %s mirrors on %s: %v\n", gvk.Kind, c.Name, err)
				}
				continue
			}
			for _, o := range list.Items {
				rows = append(rows, mirror{
					cluster:   c.Name,
					namespace: o.GetNamespace(),
					kind:      gvk.Kind,
					name:      o.GetName(),
					source:    o.GetAnnotations()[annotations.AnnotationSource],
				})
			}
		}
	}
	slices.SortFunc(rows, func(a, b mirror) int {
		return strings.Compare(
			strings.Join([]string{a.cluster, a.namespace, a.kind, a.name}, "\x00"),
			strings.Join([]string{b.cluster, b.namespace, b.kind, b.name}, "\x00"))
	})
	return rows
}

func printMirrors(w io.Writer, rows []mirror) {
	fmt.Fprintf(w, "\nMirrors (label %s=true): %d\n", annotations.LabelMirror, len(rows))
	if len(rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tNAMESPACE\tKIND\tNAME\tSOURCE")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.cluster, r.namespace, r.kind, r.name, r.source)
	}
	_ = tw.Flush()
}

// relative shortens path to be relative to the working directory when it is
// below it.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return path
	}
	return rel
}

func indent(s string) string {
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
