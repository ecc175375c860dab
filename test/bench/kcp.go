package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// hub-shards with -kcp runs its member clusters as logical clusters of kcp
// (github.com/kcp-dev/kcp), the control plane whose one process serves
// many clusters, each under its own path /clusters/<name>: a thousand
// members cost a few kcp processes instead of a thousand kube-apiservers,
// which no single machine can hold (hub-fleet's slim API servers take
// 111 MiB each). The hub's own cluster stays an envtest API server: it
// holds the registration Secrets, the sources and the shard Leases.
//
// Each member is a logical cluster written directly with kcp's shard
// admin identity (system:masters), not a tenancy.kcp.io Workspace: on the
// bench's machine (2 cores) kcp v0.30.0 brought 100 Workspaces to Ready
// in 35 s, one after another through its initializers, each costing it
// 8.8 MiB and 300 goroutines, against 0.75 MiB and 28 goroutines for a
// logical cluster written directly, a thousand of them with their
// namespaces in 13 s. Such a logical cluster serves every built-in API
// (discovery, namespaces, Secrets, ConfigMaps, Events, Leases), has no
// LogicalCluster object and no kube-system Namespace until one is created:
// the bench creates it, since its UID is the cluster's identity to the
// hub. Only the shard admin may use it (kcp's own admin, not in
// system:masters, is refused there), so the hub's requests are exempt from
// kcp's max-in-flight limits (400 reads, 200 writes; kcp refuses flags
// that raise them), as they are on envtest API servers, where the bench
// also registers admin kubeconfigs; watches never count against them.
//
// What limits one process is its watch cache: it hands every event of a
// resource to every watcher of that resource that is not scoped to a
// namespace or name, whichever logical cluster the watcher is in, and the
// watcher drops what is not its cluster's. The hub watches the mirrors of
// each cluster across namespaces, so one update of a source, a write in
// each of a thousand clusters, is a million deliveries in one process,
// and kcp closes the watchers that fall behind (apiserver_terminated_
// watchers_total, about two thousand an update); a real cluster's API
// server has the hub's one watcher. The clusters are therefore spread over
// -kcp-processes (4), each with its own watch cache: a quarter of the
// deliveries, for about 5% of a core idle and 0.7 to 0.9 GiB more a
// process (test/bench/README.md).

// kcpShardAdmin is the context of kcp's admin.kubeconfig with the shard
// admin's token on the server's base URL.
const kcpShardAdmin = "shard-base"

// kcpClusterAnnotation names, on every object kcp serves, the logical
// cluster it is in: here the bench's name of the cluster.
const kcpClusterAnnotation = "kcp.io/cluster"

// kcpStartTimeout bounds the start of one kcp process until it is ready:
// 17 to 35 s alone on 2 cores, longer when several start at once.
const kcpStartTimeout = 5 * time.Minute

// kcpStopGrace is how long a kcp process has to exit after SIGTERM.
const kcpStopGrace = 30 * time.Second

// kcpServer is one kcp process.
type kcpServer struct {
	index   int
	dir     string // --root-directory
	logPath string
	// base reaches the server as the shard admin; a cluster is at
	// base.Host + "/clusters/<name>".
	base  *rest.Config
	cmd   *exec.Cmd
	done  chan struct{} // closed once the process has exited
	err   error
	names []string // the logical clusters the bench created in it
	// pprofAddr is --profiler-address (-pprof), else empty.
	pprofAddr string
}

// kcpFleet are the kcp processes of a run, the member clusters spread
// over them round-robin.
type kcpFleet struct {
	servers []*kcpServer
	info    *kcpInfo
}

// kcpInfo is what the bench measured of kcp.
type kcpInfo struct {
	Binary    string `json:"binary"`
	Version   string `json:"version"`
	Processes int    `json:"processes"`
	Clusters  int    `json:"clusters"`
	// Args are the extra flags of every process (-kcp-args), Env its
	// extra environment (-kcp-env).
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	// StartSeconds is from starting the processes until every one was
	// ready; CreateSeconds the creation of the logical clusters (one
	// kube-system Namespace each) after that.
	StartSeconds  float64 `json:"startSeconds"`
	CreateSeconds float64 `json:"createSeconds"`
	// Before and End are the processes' memory and CPU once the clusters
	// were seeded (before any hub started) and at the end of the run.
	Before []usage `json:"before"`
	End    []usage `json:"end"`
	// Bench is the bench's own process at the end: its clients and its
	// tracker's wildcard watches, two per kcp process.
	Bench usage `json:"bench"`
	// WatchesBefore and WatchesSplit are the watches open in all kcp
	// processes (apiserver_longrunning_requests, WATCH), by resource,
	// before the hub started and once its replicas were idle after the
	// split: the difference is the hub's.
	WatchesBefore map[string]float64 `json:"watchesBefore,omitempty"`
	WatchesSplit  map[string]float64 `json:"watchesSplit,omitempty"`
	// Floor is kcp's own cost of one write per cluster, before any hub.
	Floor *kcpFloor `json:"floor,omitempty"`
	// SettleSeconds is how long kcp's controllers took, after the
	// seeding, to give every namespace of the member clusters its default
	// ServiceAccount and kube-root-ca.crt ConfigMap (settle).
	SettleSeconds float64 `json:"settleSeconds"`
	// IdleCPU is the share of one core the kcp processes used in a window
	// of -idle once settled, before the hub started, HubIdleCPU once the
	// replicas were idle after the split: the cost of the hub's open
	// watches and probes.
	IdleCPU    float64 `json:"idleCPUPercent"`
	HubIdleCPU float64 `json:"hubIdleCPUPercent"`
	// Throttled are the requests kcp answered 429 (Too Many Requests) in
	// the whole run, every process, by "VERB resource".
	Throttled counts `json:"throttled"`
}

// kcpBinary returns the kcp binary hack/kcp.sh prints (KCP_BIN, or a
// build from the kcp snapshot, cached per user), building it if needed.
func kcpBinary(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "kcp.sh")) //nolint:gosec // this repository's own script
	// The first build takes many minutes: show its progress.
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/kcp.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// startKCP starts n kcp processes at once, each in a directory under dir
// with its log in logDir, and returns when every one is ready. On error,
// whatever started is stopped.
func startKCP(bin, dir, logDir, label string, n int, pprof bool, extra, env []string) (*kcpFleet, error) {
	if n < 1 {
		return nil, errors.New("-kcp-processes must be at least 1")
	}
	k := &kcpFleet{info: &kcpInfo{Binary: bin, Processes: n, Args: extra, Env: env}}
	if out, err := exec.Command(bin, "--version").Output(); err == nil { //nolint:gosec // the binary hack/kcp.sh printed
		k.info.Version = strings.TrimSpace(string(out))
	}
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		s := &kcpServer{index: i, dir: filepath.Join(dir, fmt.Sprintf("kcp-%d", i)), logPath: filepath.Join(logDir, fmt.Sprintf("%s-kcp-%d.log", label, i))}
		k.servers = append(k.servers, s)
		if pprof {
			addr, err := fleettest.FreeAddr()
			if err != nil {
				return nil, errors.Join(err, k.stop())
			}
			s.pprofAddr = addr
		}
		wg.Go(func() { errs[i] = s.start(bin, extra, env) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, k.stop())
	}
	k.info.StartSeconds = time.Since(start).Seconds()
	return k, nil
}

// startKCPMembers starts the kcp processes and creates the member
// clusters member-1 to member-<members> in them, round-robin, with the
// bench's clients of each.
func (b *bench) startKCPMembers(members int) error {
	progress("%s: starting %d kcp processes for %d member clusters", b.workload, b.opts.kcpProcesses, members)
	k, err := startKCP(b.opts.kcpBin, filepath.Join(b.work, "kcp"), filepath.Join(b.opts.out, "logs"), b.label, b.opts.kcpProcesses, b.opts.pprof, strings.Fields(b.opts.kcpArgs), strings.Fields(b.opts.kcpEnv))
	if err != nil {
		return err
	}
	b.kcp = k
	for _, s := range k.servers {
		if s.pprofAddr != "" {
			progress("%s: kcp %d's pprof at http://%s/debug/pprof/", b.workload, s.index, s.pprofAddr)
		}
	}
	progress("%s: kcp ready after %.1fs; creating %d logical clusters", b.workload, k.info.StartSeconds, members)
	names := make([]string, members)
	for i := range names {
		names[i] = fmt.Sprintf("member-%d", i+1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kcpStartTimeout)
	defer cancel()
	fcs, err := k.createClusters(ctx, names, b.opts.workers)
	if err != nil {
		return err
	}
	for _, fc := range fcs {
		c, err := newCluster(fc.Name, fc)
		if err != nil {
			return err
		}
		b.clusters = append(b.clusters, c)
	}
	progress("%s: %d logical clusters created in %.1fs", b.workload, members, k.info.CreateSeconds)
	return nil
}

// start starts the process, bound to loopback only, and waits until it
// answers /readyz.
func (s *kcpServer) start(bin string, extra, env []string) error {
	var ports [3]string
	for i := range ports {
		addr, err := fleettest.FreeAddr()
		if err != nil {
			return err
		}
		ports[i] = addr[strings.LastIndexByte(addr, ':')+1:]
	}
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return err
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	args := []string{"start",
		"--root-directory=" + s.dir,
		// Every listener on loopback: the API (with the virtual
		// workspaces and the cache server on the same port) and the
		// embedded etcd, which listens on localhost.
		"--bind-address=127.0.0.1",
		"--secure-port=" + ports[0],
		"--embedded-etcd-client-port=" + ports[1],
		"--embedded-etcd-peer-port=" + ports[2],
		// The admin.kubeconfig and nothing else (no sample
		// WorkspaceTypes).
		"--batteries-included=admin",
	}
	if s.pprofAddr != "" {
		args = append(args, "--profiler-address="+s.pprofAddr)
	}
	args = append(args, extra...)
	fmt.Fprintf(logFile, "=== %s %s %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(env, " "), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...) //nolint:gosec // the binary hack/kcp.sh printed, with the bench's flags
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	// As the agents (agent.start): a group of its own, killed should the
	// bench die without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting kcp: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		s.err = cmd.Wait()
		_ = logFile.Close()
		close(s.done)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), kcpStartTimeout)
	defer cancel()
	kubeconfig := filepath.Join(s.dir, "admin.kubeconfig")
	for {
		if s.base == nil {
			if cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
				&clientcmd.ConfigOverrides{CurrentContext: kcpShardAdmin}).ClientConfig(); err == nil {
				s.base = cfg
			}
		}
		if s.base != nil && s.ready(ctx) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kcp %d not ready after %s; see %s", s.index, kcpStartTimeout, s.logPath)
		case <-s.done:
			return fmt.Errorf("kcp %d exited (%v); see %s", s.index, s.err, s.logPath)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ready checks /readyz.
func (s *kcpServer) ready(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(s.base)
	if err != nil {
		return err
	}
	return cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// at is the shard admin's config of the logical cluster name ("*": all of
// them, for list and watch).
func (s *kcpServer) at(name string) *rest.Config {
	cfg := rest.CopyConfig(s.base)
	cfg.Host = strings.TrimSuffix(s.base.Host, "/") + "/clusters/" + name
	return cfg
}

// createClusters creates a logical cluster per name, spread over the
// servers round-robin, each with its kube-system Namespace, workers at a
// time, and returns them as fleettest clusters: Config and Kubeconfig are
// the shard admin's on /clusters/<name>.
func (k *kcpFleet) createClusters(ctx context.Context, names []string, workers int) ([]*fleettest.Cluster, error) {
	start := time.Now()
	out := make([]*fleettest.Cluster, len(names))
	for i, name := range names {
		s := k.servers[i%len(k.servers)]
		s.names = append(s.names, name)
		out[i] = &fleettest.Cluster{Name: name, Config: s.at(name)}
	}
	err := parallel(ctx, len(out), workers, func(ctx context.Context, i int) error {
		cfg := rest.CopyConfig(out[i].Config)
		cfg.QPS, cfg.Burst = -1, 0
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("logical cluster %s: %w", names[i], err)
		}
		return nil
	})
	k.info.Clusters = len(names)
	k.info.CreateSeconds = time.Since(start).Seconds()
	return out, err
}

// usage reads the memory and CPU of every kcp process.
func (k *kcpFleet) usage() ([]usage, error) {
	out := make([]usage, len(k.servers))
	for i, s := range k.servers {
		u, err := procUsage(s.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("kcp %d: %w", i, err)
		}
		out[i] = u
	}
	return out, nil
}

// watches counts the watches open in every kcp process, by resource.
func (k *kcpFleet) watches(ctx context.Context) (map[string]float64, error) {
	return k.sumSeries(ctx, "apiserver_longrunning_requests", []string{"verb", "WATCH"}, func(m *dto.Metric) string {
		return resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), fleettest.Label(m, "subresource"))
	})
}

// requests counts the requests every kcp process has served, by "VERB
// resource", with the code appended when it is not 2xx; only those
// answered with code when code is not empty.
func (k *kcpFleet) requests(ctx context.Context, code string) (counts, error) {
	return k.sumSeries(ctx, "apiserver_request_total", nil, func(m *dto.Metric) string {
		if code != "" && fleettest.Label(m, "code") != code {
			return ""
		}
		res := resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), fleettest.Label(m, "subresource"))
		if res == "" {
			res = nonResource
		}
		key := fleettest.Label(m, "verb") + " " + res
		if c := fleettest.Label(m, "code"); !strings.HasPrefix(c, "2") {
			key += " " + c
		}
		return key
	})
}

// terminatedWatchers counts the watchers every kcp process closed because
// they fell behind its dispatch of events (apiserver_terminated_watchers_total),
// by resource. One process dispatches every event of a resource to the
// watchers of every logical cluster it serves, so a burst of writes to a
// thousand clusters reaches a thousand watchers at once, where each
// cluster's own API server would have one.
func (k *kcpFleet) terminatedWatchers(ctx context.Context) (counts, error) {
	return k.sumSeries(ctx, "apiserver_terminated_watchers_total", nil, func(m *dto.Metric) string {
		return resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), "")
	})
}

// sumSeries adds up the series of metric name (those with labelPairs)
// over every kcp process, by the key keyOf gives each ("" leaves it out).
func (k *kcpFleet) sumSeries(ctx context.Context, name string, labelPairs []string, keyOf func(*dto.Metric) string) (counts, error) {
	out := counts{}
	for _, s := range k.servers {
		fams, err := s.metrics(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, m := range fams.Series(name, labelPairs...) {
			if key := keyOf(m); key != "" {
				out[key] += fleettest.SampleValue(m)
			}
		}
	}
	return out, nil
}

// metrics reads the families named of the server's /metrics.
func (s *kcpServer) metrics(ctx context.Context, names ...string) (fleettest.Families, error) {
	cs, err := kubernetes.NewForConfig(s.base)
	if err != nil {
		return nil, err
	}
	fams, err := apiServerFamilies(ctx, cs.CoreV1().RESTClient(), names...)
	if err != nil {
		return nil, fmt.Errorf("kcp %d: %w", s.index, err)
	}
	return fams, nil
}

// cpuSeconds is the CPU every kcp process used so far.
func (k *kcpFleet) cpuSeconds() float64 {
	us, err := k.usage()
	if err != nil {
		return 0
	}
	var total float64
	for _, u := range us {
		total += u.CPUSeconds
	}
	return total
}

// stop stops every process (SIGTERM, then SIGKILL after kcpStopGrace) and
// removes their directories.
func (k *kcpFleet) stop() error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range k.servers {
		wg.Go(func() {
			err := s.stop()
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *kcpServer) stop() error {
	if s.cmd != nil {
		pid := s.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(kcpStopGrace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-s.done
		}
	}
	return os.RemoveAll(s.dir)
}

// track makes t follow the mirrors of every logical cluster with two
// watches per kcp process (/clusters/*, Secrets and ConfigMaps labelled
// as mirrors) instead of two per cluster: at a thousand clusters, two
// thousand informers and their watches would make the bench a load on kcp
// of its own. It returns once every watch has listed.
func (k *kcpFleet) track(ctx context.Context, t *tracker) error {
	for _, s := range k.servers {
		cfg := rest.CopyConfig(s.at("*"))
		cfg.QPS, cfg.Burst = -1, 0
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		for _, kind := range []string{kindSecret, kindConfigMap} {
			if err := t.watchWildcard(ctx, cs, kind); err != nil {
				return fmt.Errorf("kcp %d: %w", s.index, err)
			}
		}
	}
	return nil
}

// watchWildcard feeds t from one list and watch of kind across the
// logical clusters cs reaches. An informer does not fit: its store keys
// objects by namespace and name, and every cluster has a mirror of the
// same name in the same namespace. The reflector's store here is
// mirrorFeed, which keys them by cluster too and keeps nothing but the
// keys.
func (t *tracker) watchWildcard(ctx context.Context, cs kubernetes.Interface, kind string) error {
	selector := annotations.LabelMirror + "=true"
	var lw *cache.ListWatch
	var example runtime.Object
	switch kind {
	case kindSecret:
		example = &corev1.Secret{}
		lw = &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = selector
				return cs.CoreV1().Secrets("").List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = selector
				return cs.CoreV1().Secrets("").Watch(ctx, o)
			},
		}
	default:
		example = &corev1.ConfigMap{}
		lw = &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = selector
				return cs.CoreV1().ConfigMaps("").List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = selector
				return cs.CoreV1().ConfigMaps("").Watch(ctx, o)
			},
		}
	}
	feed := &mirrorFeed{t: t, kind: kind, keys: map[mirrorKey]bool{}, synced: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	r := cache.NewReflectorWithOptions(listOnly{lw}, example, feed, cache.ReflectorOptions{Name: "bench-kcp-" + kind})
	go r.RunWithContext(ctx)
	t.stops = append(t.stops, cancel)
	select {
	case <-feed.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s mirrors not listed: %w", kind, ctx.Err())
	}
}

// listOnly makes a reflector list, never stream its list through a watch
// (client-go's WatchListClient, on by default since 1.35): a streamed
// list is gathered in a store of the reflector's own, keyed by namespace
// and name, where the mirrors of every logical cluster are one object, so
// that each relist would hand mirrorFeed one mirror of the many and have
// it report the others gone (249 of 250 were, after a watch ended).
type listOnly struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector so
// (watchlist.DoesClientNotSupportWatchListSemantics).
func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// mirrorFeed is the store of a wildcard reflector: it hands every object
// to the tracker under its cluster (kcpClusterAnnotation) and remembers
// only the keys it reported present, so that a relist (Replace) can
// report those gone. The reflector calls it from one goroutine.
type mirrorFeed struct {
	t      *tracker
	kind   string
	keys   map[mirrorKey]bool
	synced chan struct{}
	once   sync.Once
}

var _ cache.ReflectorStore = (*mirrorFeed)(nil)

// key is obj's mirror key and digest (digestTransform drops its data).
func (f *mirrorFeed) key(obj any) (mirrorKey, string, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	obj, _ = digestTransform(obj)
	m, ok := obj.(metav1.Object)
	if !ok {
		return mirrorKey{}, "", false
	}
	a := m.GetAnnotations()
	return mirrorKey{Cluster: a[kcpClusterAnnotation], Kind: f.kind, Namespace: m.GetNamespace(), Name: m.GetName()}, a[digestAnnotation], true
}

func (f *mirrorFeed) Add(obj any) error {
	if k, d, ok := f.key(obj); ok {
		f.keys[k] = true
		f.t.observe(k, d, true)
	}
	return nil
}

func (f *mirrorFeed) Update(obj any) error { return f.Add(obj) }

func (f *mirrorFeed) Delete(obj any) error {
	if k, _, ok := f.key(obj); ok {
		delete(f.keys, k)
		f.t.observe(k, "", false)
	}
	return nil
}

func (f *mirrorFeed) Replace(list []any, _ string) error {
	old := f.keys
	f.keys = make(map[mirrorKey]bool, len(list))
	for _, obj := range list {
		if err := f.Add(obj); err != nil {
			return err
		}
	}
	for k := range old {
		if !f.keys[k] {
			f.t.observe(k, "", false)
		}
	}
	f.once.Do(func() { close(f.synced) })
	return nil
}

func (f *mirrorFeed) Resync() error { return nil }

// settle waits until kcp's controllers have done what the seeding gave
// them: every namespace of the member clusters has its default
// ServiceAccount and its kube-root-ca.crt ConfigMap, as in any cluster.
// Until then kcp spends a core on them, which would count against the
// figures that follow.
func (k *kcpFleet) settle(ctx context.Context, timeout time.Duration) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range k.servers {
		cfg := s.at("*")
		cfg.QPS, cfg.Burst = -1, 0
		mc, err := metadata.NewForConfig(cfg)
		if err != nil {
			return err
		}
		ours := map[string]bool{}
		for _, name := range s.names {
			ours[name] = true
		}
		// count lists resource (those named name, if not empty) across
		// every logical cluster and counts those of the bench's clusters.
		count := func(resource, name string) (int, error) {
			o := metav1.ListOptions{}
			if name != "" {
				o.FieldSelector = "metadata.name=" + name
			}
			l, err := mc.Resource(corev1.SchemeGroupVersion.WithResource(resource)).List(ctx, o)
			if err != nil {
				return 0, err
			}
			n := 0
			for _, m := range l.Items {
				if ours[m.Annotations[kcpClusterAnnotation]] {
					n++
				}
			}
			return n, nil
		}
		for {
			ns, err1 := count("namespaces", "")
			sa, err2 := count("serviceaccounts", "default")
			ca, err3 := count("configmaps", "kube-root-ca.crt")
			if errors.Join(err1, err2, err3) == nil && sa >= ns && ca >= ns {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kcp %d: %d namespaces, %d with their default ServiceAccount, %d with kube-root-ca.crt after %s: %w", s.index, ns, sa, ca, timeout, errors.Join(ctx.Err(), err1, err2, err3))
			case <-time.After(2 * time.Second):
			}
		}
	}
	k.info.SettleSeconds = time.Since(start).Seconds()
	return nil
}

// idleCPU returns the share of one core, in percent, the kcp processes
// use in a window of d.
func (k *kcpFleet) idleCPU(ctx context.Context, d time.Duration) (float64, error) {
	cpu0, t0 := k.cpuSeconds(), time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d): // a measuring window, not a wait for a condition
	}
	return 100 * (k.cpuSeconds() - cpu0) / time.Since(t0).Seconds(), nil
}

// kcpFloor is what one write per member cluster costs kcp with a plain
// client and no hub: the simulator's share of every fan-out.
type kcpFloor struct {
	Writes  int     `json:"writes"`
	Workers int     `json:"workers"`
	Seconds float64 `json:"seconds"`
	// CPUSeconds are the kcp processes' over the writes.
	CPUSeconds float64 `json:"cpuSeconds"`
}

// floor creates a ConfigMap in the system namespace of every cluster
// (untimed), then rewrites each once with workers writers, timed until
// the last write returned. The ConfigMaps carry no mirror label: the
// tracker does not see them, the hub neither.
func (k *kcpFleet) floor(ctx context.Context, clusters []*cluster, workers int, value func() []byte) (*kcpFloor, error) {
	cm := func(v []byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "bench-floor"}, Data: map[string]string{"key-0": string(v)}}
	}
	if err := parallel(ctx, len(clusters), workers, func(ctx context.Context, i int) error {
		_, err := clusters[i].cs.CoreV1().ConfigMaps(systemNS).Create(ctx, cm(value()), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	cpu0 := k.cpuSeconds()
	start := time.Now()
	if err := parallel(ctx, len(clusters), workers, func(ctx context.Context, i int) error {
		_, err := clusters[i].cs.CoreV1().ConfigMaps(systemNS).Update(ctx, cm(value()), metav1.UpdateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	f := &kcpFloor{Writes: len(clusters), Workers: workers, Seconds: time.Since(start).Seconds(), CPUSeconds: k.cpuSeconds() - cpu0}
	k.info.Floor = f
	return f, nil
}

// print prints kcp's rows.
func (i *kcpInfo) print(row func(name, value, detail string)) {
	sum := func(us []usage) (rss, anon, cpu float64) {
		for _, u := range us {
			rss += u.RSSMiB
			anon += u.RSSAnonMiB
			cpu += u.CPUSeconds
		}
		return rss, anon, cpu
	}
	args := ""
	if len(i.Args) > 0 {
		args = ", flags " + strings.Join(i.Args, " ")
	}
	if len(i.Env) > 0 {
		args += ", environment " + strings.Join(i.Env, " ")
	}
	row("kcp member clusters", fmt.Sprintf("%d", i.Clusters),
		fmt.Sprintf("logical clusters over %d kcp processes (%s%s); started in %.1fs, clusters created in %.1fs", i.Processes, i.Version, args, i.StartSeconds, i.CreateSeconds))
	for _, u := range []struct {
		when string
		us   []usage
	}{{"seeded, before the hub", i.Before}, {"at the end", i.End}} {
		if len(u.us) == 0 {
			continue
		}
		rss, anon, cpu := sum(u.us)
		var each []string
		for _, x := range u.us {
			each = append(each, fmt.Sprintf("%.0f", x.RSSMiB))
		}
		row("  kcp RSS, "+u.when, fmt.Sprintf("%.0f MiB", rss),
			fmt.Sprintf("all processes (anonymous %.0f MiB); each %s MiB; CPU so far %.1fs", anon, strings.Join(each, ", "), cpu))
	}
	if i.WatchesSplit != nil && i.Clusters > 0 {
		var total float64
		byRes := counts{}
		for res, v := range i.WatchesSplit {
			if d := v - i.WatchesBefore[res]; d != 0 {
				byRes[res] = d / float64(i.Clusters)
				total += d
			}
		}
		row("  hub's watches per cluster", fmt.Sprintf("%.2f", total/float64(i.Clusters)),
			fmt.Sprintf("open in kcp once the replicas are idle after the split, less those before the hub (apiserver_longrunning_requests, WATCH); by resource %s", formatPerCluster(byRes)))
	}
	var throttled float64
	for _, v := range i.Throttled {
		throttled += v
	}
	row("  kcp's 429 answers", fmt.Sprintf("%.0f", throttled), fmt.Sprintf("Too Many Requests, every process, the whole run: %s", formatCounts(i.Throttled)))
	row("  kcp CPU while idle", fmt.Sprintf("%.1f%%", i.IdleCPU),
		fmt.Sprintf("of one core, every process, before the hub started, once its controllers had filled the seeded namespaces (%.1fs after the seeding); %.1f%% once the hub's replicas were idle after the split (their watches and probes)", i.SettleSeconds, i.HubIdleCPU))
	if f := i.Floor; f != nil {
		row("  kcp write floor", fmt.Sprintf("%.3fs", f.Seconds),
			fmt.Sprintf("%d ConfigMap updates, one per cluster, plain client, %d writers, no hub; kcp CPU %.1fs (%.1f ms a write)", f.Writes, f.Workers, f.CPUSeconds, 1000*f.CPUSeconds/float64(max(f.Writes, 1))))
	}
	row("  bench process", fmt.Sprintf("%.1f MiB", i.Bench.RSSMiB),
		fmt.Sprintf("RSS at the end; CPU %.1fs over the run (clients, seeding, its tracker's %d wildcard watches)", i.Bench.CPUSeconds, 2*i.Processes))
}
