package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

const (
	// systemNS is the agents' namespace and where the hub reads
	// registration Secrets.
	systemNS = "fleetmirror-system"
	// sourceNS holds the sources; it does not match the targets' glob.
	sourceNS = "source"
	// targetPrefix starts every target namespace; sources target prefix*.
	targetPrefix = "bench-"
	// sourceKeys is the number of data keys of a source.
	sourceKeys = 3
	// memberClusterName is the member agent's --cluster-name.
	memberClusterName = "local"
	// noiseProbeObjects is how many unlabelled objects of each kind the
	// noise probe creates.
	noiseProbeObjects = 50
)

// cluster is one API server as the bench uses it: clients that count their
// requests and have no client-side rate limit.
type cluster struct {
	name    string
	fc      *fleettest.Cluster
	cs      kubernetes.Interface
	ctrl    client.Client
	raw     rest.Interface
	counter *requestCounter
	// controlPlanePids are its kube-apiserver's and etcd's (controlPlane).
	controlPlanePids []int
}

func newCluster(name string, fc *fleettest.Cluster) (*cluster, error) {
	c := &cluster{name: name, fc: fc, counter: newRequestCounter()}
	cfg := c.counter.instrument(fc.Config)
	var err error
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.ctrl, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	rawCfg := rest.CopyConfig(cfg)
	rawCfg.GroupVersion = &corev1.SchemeGroupVersion
	rawCfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	if c.raw, err = rest.RESTClientFor(rawCfg); err != nil {
		return nil, err
	}
	return c, nil
}

// source is one source object and the data the bench last wrote to it.
type source struct {
	Kind, Namespace, Name string
	data                  map[string][]byte
	digest                string
	deleted               bool
}

// target is a namespace of a cluster that receives mirrors.
type target struct {
	cluster, namespace string
}

// bench runs one workload.
type bench struct {
	opts     *options
	workload string
	label    string // names the run's results and logs: the workload[-mode]
	scale    scale
	bins     binaries
	work     string
	res      *Result

	fleet    *fleettest.Fleet
	clusters []*cluster // every cluster of the fleet
	srcC     *cluster   // where the sources are and the agent runs
	tgtC     []*cluster // where the mirrors go
	groups   map[string][]*cluster
	tracker  *tracker
	sources  []*source
	targets  []target
	agent    *agent
	// ownWatches are, per cluster, the watches open before the agent first
	// started that are not the bench's: the API server's own, by resource.
	ownWatches map[string]map[string]float64
	// apiServerLog receives the logs of hub-fleet's API servers.
	apiServerLog *os.File
	// kcp runs the member clusters with -kcp (kcp.go).
	kcp *kcpFleet
}

func (b *bench) hub() bool {
	return b.workload == wlHub || b.workload == wlHubChurn || b.workload == wlHubFaults || b.workload == wlHubFleet || b.workload == wlHubShards
}

// run runs the workload and returns its result, partial on error.
func (b *bench) run(ctx context.Context) (res *Result, err error) {
	if err := os.MkdirAll(b.work, 0o750); err != nil {
		return nil, err
	}
	b.res = newResult(b.workload, b.scale)
	b.res.SourceMode = b.opts.sourceMode
	defer func() {
		b.res.Machine.LoadAvgEnd = loadAvg()
		b.res.finish(err)
	}()
	switch b.workload {
	case wlHubChurn:
		return b.res, b.runChurn(ctx)
	case wlHubFaults:
		return b.res, b.runFaults(ctx)
	case wlHubFleet:
		return b.res, b.runHubFleet(ctx)
	case wlHubShards:
		return b.res, b.runHubShards(ctx)
	}
	return b.res, b.runMirroring(ctx)
}

// startClusters starts a hub and members member-1 to member-<members>,
// their kubeconfigs in dir, and builds the bench's clients of each, named
// as the agent under test knows the cluster. The fleet it returns, if any,
// is the caller's to stop, on error too.
func (b *bench) startClusters(dir string, members int) (*fleettest.Fleet, []*cluster, error) {
	names := make([]string, members)
	for i := range names {
		names[i] = fmt.Sprintf("member-%d", i+1)
	}
	var f *fleettest.Fleet
	var err error
	if b.workload == wlHubFleet || b.workload == wlHubShards {
		f, err = fleettest.StartShared(dir, b.sharedOptions(), names...)
	} else {
		f, err = fleettest.Start(dir, names...)
	}
	if err != nil {
		return nil, nil, err
	}
	var clusters []*cluster
	for _, fc := range f.Clusters() {
		name := fc.Name
		if !b.hub() {
			name = memberClusterName
		}
		c, err := newCluster(name, fc)
		if err != nil {
			return f, nil, err
		}
		clusters = append(clusters, c)
	}
	return f, clusters, nil
}

// startFleet starts the API servers of the workload and builds the bench's
// clients. The member workloads use the fleet's hub alone, as the agent's
// only cluster.
func (b *bench) startFleet(members int) error {
	apiServers := members
	if b.opts.kcp {
		apiServers = 0 // the hub's alone; the members are kcp's
	}
	progress("%s: starting %d API server(s)", b.workload, apiServers+1)
	f, clusters, err := b.startClusters(filepath.Join(b.work, "kubeconfigs"), apiServers)
	b.fleet = f
	if err != nil {
		return err
	}
	b.clusters = append(b.clusters, clusters...)
	if b.opts.kcp {
		if err := b.startKCPMembers(members); err != nil {
			return err
		}
	}
	b.srcC = b.clusters[0]
	if b.opts.sourceMode != "" {
		// As the member chart does: the agent as it ships watches
		// MirrorPolicies in either mode.
		progress("%s: installing the MirrorPolicy CRD", b.workload)
		if err := installPolicyCRD(b.srcC); err != nil {
			return fmt.Errorf("installing the MirrorPolicy CRD: %w", err)
		}
	}
	if b.hub() {
		b.tgtC = b.clusters[1:]
		b.groups = map[string][]*cluster{"hub": {b.srcC}, "members": b.tgtC}
	} else {
		b.tgtC = b.clusters[:1]
		b.groups = map[string][]*cluster{"cluster": {b.srcC}}
	}
	if v, err := b.srcC.cs.Discovery().ServerVersion(); err == nil {
		b.res.Machine.KubeAPIServer = v.GitVersion
		if pinned := pinnedKubeVersion(); strings.HasPrefix(v.GitVersion, "v0.0.0") && pinned != "" {
			// Built from source without version stamps: say what was built.
			b.res.Machine.KubeAPIServer += " (built by hack/envtest.sh from Kubernetes " + pinned + ")"
		}
	}
	return nil
}

// stopFleet stops the agent, the informers and the API servers.
func (b *bench) stopFleet() error {
	var errs []error
	if b.agent != nil {
		errs = append(errs, b.agent.stop())
	}
	if b.tracker != nil {
		b.tracker.stop()
	}
	if b.kcp != nil {
		progress("%s: stopping kcp", b.workload)
		errs = append(errs, b.kcp.stop())
		b.kcp = nil
	}
	if b.fleet != nil {
		progress("%s: stopping the API servers", b.workload)
		errs = append(errs, b.fleet.Stop())
		b.fleet = nil
	}
	if b.apiServerLog != nil {
		errs = append(errs, b.apiServerLog.Close())
		b.apiServerLog = nil
	}
	return errors.Join(errs...)
}

// runMirroring runs member-small, member-large and hub: floor, seed,
// convergence, updates, new namespace, deletion, restart, noise probe.
func (b *bench) runMirroring(ctx context.Context) (err error) {
	members := 0
	if b.hub() {
		members = b.scale.Members
	}
	b.planTargets(members)
	mirrors := len(b.targets) * b.scale.Sources
	b.res.ExpectedMirrors = mirrors

	floor, err := runFloor(ctx, b, members)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	b.res.Floor = floor

	if err := b.startFleet(members); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.stopFleet()) }()

	seedStart := time.Now()
	if err := b.seed(ctx); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	if b.hub() {
		if err := b.register(ctx, b.tgtC...); err != nil {
			return err
		}
	}
	b.res.SeedSeconds = time.Since(seedStart).Seconds()
	if err := b.watchAndPrepare(ctx); err != nil {
		return err
	}

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"converge", b.converge},
		{"updates", b.updates},
		{"new namespace", b.newNamespace},
		{"deletion", b.deletion},
		{"restart", b.restart},
		{"idle", b.idle},
	}
	for _, s := range steps {
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	probe, err := b.noiseProbe(ctx)
	if err != nil {
		return err
	}
	b.res.NoiseProbe = probe
	u, err := b.agent.usage()
	if err != nil {
		return err
	}
	b.res.Resources.Restarted = &u
	return b.agent.stop()
}

// watchAndPrepare starts the bench's watches of the target clusters and
// prepares the agent (not started yet).
func (b *bench) watchAndPrepare(ctx context.Context) error {
	b.tracker = newTracker()
	if b.kcp != nil {
		if err := b.kcp.track(ctx, b.tracker); err != nil {
			return err
		}
		return b.newAgent()
	}
	for _, c := range b.tgtC {
		if err := b.tracker.watch(ctx, c.name, c.cs); err != nil {
			return err
		}
	}
	return b.newAgent()
}

// planTargets lists the target namespaces: bench-NNN in every target
// cluster (member-N in hub workloads, the one cluster otherwise).
func (b *bench) planTargets(members int) {
	clusterNames := []string{memberClusterName}
	if b.hub() {
		clusterNames = nil
		for i := range members {
			clusterNames = append(clusterNames, fmt.Sprintf("member-%d", i+1))
		}
	}
	b.targets = nil
	for _, c := range clusterNames {
		for i := range b.scale.Namespaces {
			b.targets = append(b.targets, target{cluster: c, namespace: fmt.Sprintf("%s%03d", targetPrefix, i)})
		}
	}
	b.sources = nil
	for i := range b.scale.Sources {
		kind := kindSecret
		if i%2 == 1 {
			kind = kindConfigMap
		}
		s := &source{Kind: kind, Namespace: sourceNS, Name: fmt.Sprintf("bench-source-%02d", i), data: map[string][]byte{}}
		for k := range sourceKeys {
			s.data[fmt.Sprintf("key-%d", k)] = b.value()
		}
		s.digest = digest(s.data)
		b.sources = append(b.sources, s)
	}
}

// value returns a fresh printable value of -value-size bytes, usable in
// Secrets and ConfigMaps alike.
func (b *bench) value() []byte {
	raw := make([]byte, b.scale.ValueSize*3/4)
	_, _ = rand.Read(raw) // never fails
	return []byte(base64.StdEncoding.EncodeToString(raw))
}

// clusterByName returns the bench's cluster named name.
func (b *bench) clusterByName(name string) *cluster {
	for _, c := range b.clusters {
		if c.name == name {
			return c
		}
	}
	return nil
}

// seed creates the namespaces, the noise, the sources and, for the hub,
// the registrations, before any agent runs.
func (b *bench) seed(ctx context.Context) error {
	progress("%s: seeding %d target namespaces, %d sources, %d noise objects", b.workload, len(b.targets), len(b.sources), b.scale.Noise)
	type nsRef struct {
		c    *cluster
		name string
	}
	var nss []nsRef
	for _, c := range b.clusters {
		nss = append(nss, nsRef{c, systemNS})
	}
	nss = append(nss, nsRef{b.srcC, sourceNS})
	for _, t := range b.targets {
		nss = append(nss, nsRef{b.clusterByName(t.cluster), t.namespace})
	}
	if err := parallel(ctx, len(nss), b.opts.workers, func(ctx context.Context, i int) error {
		return createNamespace(ctx, nss[i].c, nss[i].name)
	}); err != nil {
		return err
	}

	// Noise goes round-robin over the target namespaces (and, for the
	// member, the sources' namespace), half Secrets, half ConfigMaps.
	if err := parallel(ctx, b.scale.Noise, b.opts.workers, func(ctx context.Context, i int) error {
		c, ns := b.noisePlace(i)
		return createNoise(ctx, c, ns, fmt.Sprintf("noise-%05d", i), i%2 == 0, b.value())
	}); err != nil {
		return err
	}

	if err := parallel(ctx, len(b.sources), b.opts.workers, func(ctx context.Context, i int) error {
		return b.createSource(ctx, b.sources[i])
	}); err != nil {
		return err
	}
	if b.policies() {
		return b.createPolicies(ctx)
	}
	return nil
}

// register registers member clusters with the hub, in fleetmirror's plain
// form, with -seed-workers concurrent writers: a hundred registrations land
// within a second, as when a fleet is registered by a script.
func (b *bench) register(ctx context.Context, cs ...*cluster) error {
	var labels map[string]string
	if b.opts.receiveOnly {
		labels = map[string]string{annotations.LabelReceiveOnly: "true"}
	}
	return parallel(ctx, len(cs), b.opts.workers, func(ctx context.Context, i int) error {
		return fleettest.RegisterPlain(ctx, b.srcC.ctrl, systemNS, cs[i].fc, nil, labels)
	})
}

// noisePlace is where noise object i goes.
func (b *bench) noisePlace(i int) (*cluster, string) {
	if !b.hub() && i%(len(b.targets)+1) == len(b.targets) {
		return b.srcC, sourceNS
	}
	t := b.targets[i%len(b.targets)]
	return b.clusterByName(t.cluster), t.namespace
}

func createNamespace(ctx context.Context, c *cluster, name string) error {
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createNoise creates an unlabelled Secret (or ConfigMap) with one value.
func createNoise(ctx context.Context, c *cluster, ns, name string, secret bool, value []byte) error {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	var err error
	if secret {
		_, err = c.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"value": value}}, metav1.CreateOptions{})
	} else {
		_, err = c.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"value": string(value)}}, metav1.CreateOptions{})
	}
	return err
}

// targetsAsked is what the sources ask for, as the value of
// fleetmirror.io/target-namespaces.
func (b *bench) targetsAsked() string {
	if b.hub() {
		return "*/" + targetPrefix + "*"
	}
	return targetPrefix + "*"
}

// createSource creates s: annotated, or in policy mode with none of our
// labels and annotations, only the label its policy selects.
func (b *bench) createSource(ctx context.Context, s *source) error {
	meta := metav1.ObjectMeta{
		Namespace: s.Namespace, Name: s.Name,
		Labels: map[string]string{annotations.LabelEnabled: "true"},
		Annotations: map[string]string{
			annotations.AnnotationSync:             "true",
			annotations.AnnotationTargetNamespaces: b.targetsAsked(),
		},
	}
	if b.policies() {
		meta.Labels, meta.Annotations = map[string]string{benchSourceLabel: "true"}, nil
	}
	var err error
	if s.Kind == kindSecret {
		_, err = b.srcC.cs.CoreV1().Secrets(s.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: meta, Data: s.data}, metav1.CreateOptions{})
	} else {
		_, err = b.srcC.cs.CoreV1().ConfigMaps(s.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: toStrings(s.data)}, metav1.CreateOptions{})
	}
	return err
}

func toStrings(data map[string][]byte) map[string]string {
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = string(v)
	}
	return out
}

// newAgent prepares the agent of the workload (not started).
func (b *bench) newAgent() error {
	a, err := b.makeAgent("")
	if err != nil {
		return err
	}
	b.agent = a
	b.res.Agent = agentInfo{Binary: a.name, Args: a.args, Log: a.logPath, Pprof: a.pprofAddr}
	return nil
}

// makeAgent prepares an agent of the workload with the bench's flags, then
// extra; suffix tells the log files of several agents apart.
func (b *bench) makeAgent(suffix string, extra ...string) (*agent, error) {
	bin, name, clusterName := b.bins.Member, "fleetmirror-member", memberClusterName
	if b.hub() {
		bin, name, clusterName = b.bins.Hub, "fleetmirror-hub", fleettest.HubName
	}
	base := []string{
		"--kubeconfig", b.srcC.fc.KubeconfigPath,
		"--cluster-name", clusterName,
		"--namespace", systemNS,
		"--resource-types", "Secret.v1,ConfigMap.v1",
		"--resync-period", "0",
		// Above every target count of the workload, new namespaces included.
		"--max-targets", strconv.Itoa(len(b.targets) + 100),
	}
	if b.hub() && b.workload != wlHubFaults && b.workload != wlHubFleet && !b.opts.kcp {
		// hub-faults measures the default probe settings; hub-fleet counts
		// the requests of an idle hub, probes included, as shipped; with
		// -kcp, a probe a second of each of a thousand clusters would be
		// a load on kcp of its own.
		base = append(base, "--cluster-probe-interval", "1s")
	}
	logPath := filepath.Join(b.opts.out, "logs", b.label+"-"+name+suffix+".log")
	_ = os.Remove(logPath)
	// hub-churn and hub-fleet make the hub collect its garbage through the profiling
	// endpoint before reading its live heap (settledHubStats).
	pprof := b.opts.pprof || b.workload == wlHubChurn || b.workload == wlHubFleet
	a, err := newAgent(name, bin, logPath, pprof, base, append(strings.Fields(b.opts.agentArgs), extra...)...)
	if err == nil && pprof && !b.opts.pprof {
		a.env = heapProfilerOff(os.Getenv("GODEBUG"))
	}
	if err == nil {
		a.env = append(a.env, strings.Fields(b.opts.agentEnv)...)
	}
	return a, err
}

// want is the goal of every live source's mirrors in every target with
// the source's current content.
func (b *bench) want(srcs []*source, tgts []target) map[mirrorKey]string {
	want := map[mirrorKey]string{}
	for _, s := range srcs {
		for _, t := range tgts {
			k := mirrorKey{Cluster: t.cluster, Kind: s.Kind, Namespace: t.namespace, Name: s.Name}
			if s.deleted {
				want[k] = wantAbsent
			} else {
				want[k] = s.digest
			}
		}
	}
	return want
}

// live returns the sources not deleted.
func (b *bench) live() []*source {
	var out []*source
	for _, s := range b.sources {
		if !s.deleted {
			out = append(out, s)
		}
	}
	return out
}

// liveKinds lists the kinds of the live sources.
func (b *bench) liveKinds() []string {
	var kinds []string
	for _, s := range b.live() {
		if !slices.Contains(kinds, s.Kind) {
			kinds = append(kinds, s.Kind)
		}
	}
	return kinds
}

// markWorkers bounds the API servers scraped at once: one scrape is about
// a megabyte of text, and hub-fleet has a hundred clusters.
const markWorkers = 8

// mark reads the counters of every cluster, markWorkers at a time.
func (b *bench) mark(ctx context.Context) (map[string]apiMark, error) {
	marks := make([]apiMark, len(b.clusters))
	err := parallel(ctx, len(b.clusters), markWorkers, func(ctx context.Context, i int) error {
		c := b.clusters[i]
		bench, opened := c.counter.snapshot()
		s, err := scrapeAPIServer(ctx, c.raw)
		marks[i] = apiMark{server: s, bench: bench, benchOpened: opened}
		return err
	})
	out := map[string]apiMark{}
	for i, c := range b.clusters {
		out[c.name] = marks[i]
	}
	return out, err
}

// agentMark is the agent's sync operations by result at one moment.
func (b *bench) agentOps(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	fams, err := b.agent.scrape(ctx)
	if err != nil {
		return out
	}
	for _, m := range fams["fleetmirror_sync_operations_total"].GetMetric() {
		out[fleettest.Label(m, "result")] += fleettest.SampleValue(m)
	}
	return out
}

// phaseRecorder measures the API cost and the agent's operations of a phase.
type phaseRecorder struct {
	b     *bench
	name  string
	start time.Time
	marks map[string]apiMark
	ops   map[string]float64
}

func (b *bench) beginPhase(ctx context.Context, name string) (*phaseRecorder, error) {
	p := &phaseRecorder{b: b, name: name, start: time.Now()}
	var err error
	if p.marks, err = b.mark(ctx); err != nil {
		return nil, err
	}
	if b.agent.running() {
		p.ops = b.agentOps(ctx)
	} else if b.ownWatches == nil {
		// Before the agent first started, every watch but the bench's is
		// the API server's own.
		b.ownWatches = map[string]map[string]float64{}
		for name, m := range p.marks {
			b.ownWatches[name] = m.agentWatchesOpen()
		}
	}
	return p, nil
}

// end records the phase, its API cost summed per group of clusters.
func (p *phaseRecorder) end(ctx context.Context) (*phase, error) {
	marks, err := p.b.mark(ctx)
	if err != nil {
		return nil, err
	}
	ph := &phase{Name: p.name, Seconds: time.Since(p.start).Seconds(), Clusters: map[string]clusterCost{}}
	// Every informer of an agent started in the phase opens its first watch in it.
	newProcess := p.b.agent.startedAt.After(p.start)
	for group, cs := range p.b.groups {
		var cost clusterCost
		for _, c := range cs {
			cost.add(costBetween(p.marks[c.name], marks[c.name], newProcess, p.b.ownWatches[c.name]))
		}
		ph.Clusters[group] = cost
	}
	if p.b.agent.running() {
		ops := p.b.agentOps(ctx)
		ph.SyncOps = map[string]float64{}
		for k, v := range ops {
			if d := v - p.ops[k]; d != 0 {
				ph.SyncOps[k] = d
			}
		}
	}
	p.b.res.Phases = append(p.b.res.Phases, ph)
	return ph, nil
}

// waitClusters waits, for the hub, until that many members are up and the
// kinds of the live sources are watched in them and the hub: before that,
// an idle hub may only be waiting for a cluster. (Watches are lazy: a kind
// with no source and no mirror left is not watched.)
func (b *bench) waitClusters(ctx context.Context, members int) error {
	if !b.hub() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	for {
		fams, err := b.agent.scrape(ctx)
		if err == nil {
			up, watched := 0, 0
			for _, m := range fams["fleetmirror_hub_cluster_up"].GetMetric() {
				if fleettest.Label(m, "cluster") != fleettest.HubName && fleettest.SampleValue(m) == 1 {
					up++
				}
			}
			for _, m := range fams["fleetmirror_watched_kinds"].GetMetric() {
				if fleettest.SampleValue(m) == 1 {
					watched++
				}
			}
			if up == members && watched >= len(b.liveKinds())*(members+1) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the hub does not report every member up with both kinds watched: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// converge starts the agent and times it until every mirror exists with
// its source's content.
func (b *bench) converge(ctx context.Context) error {
	g := b.tracker.expect(b.want(b.sources, b.targets))
	p, err := b.beginPhase(ctx, "converge")
	if err != nil {
		return err
	}
	c, err := b.startAgent(ctx, g)
	if err != nil {
		return err
	}
	b.res.Convergence = c
	if b.res.Floor != nil && b.res.Floor.Seconds > 0 {
		b.res.Floor.Ratio = c.Seconds / b.res.Floor.Seconds
	}
	progress("%s: converged in %.3fs", b.workload, c.Seconds)
	if err := b.waitClusters(ctx, len(b.tgtC)); err != nil {
		return err
	}
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	_, err = p.end(ctx)
	return err
}

// startAgent starts the agent and waits until goal g is met; the time is
// taken from the process start.
func (b *bench) startAgent(ctx context.Context, g *goal) (*convergence, error) {
	progress("%s: starting %s; waiting for %d mirrors", b.workload, b.agent.name, len(g.want))
	if b.agent.pprofAddr != "" {
		progress("%s: pprof at http://%s/debug/pprof/", b.workload, b.agent.pprofAddr)
	}
	if err := b.agent.start(); err != nil {
		return nil, err
	}
	var ready time.Time
	readyDone := make(chan struct{})
	go func() {
		defer close(readyDone)
		ready, _ = b.agent.waitReady(ctx, b.opts.timeout)
	}()
	at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	<-readyDone
	if err != nil {
		return nil, err
	}
	c := &convergence{Seconds: at.Sub(b.agent.startedAt).Seconds(), Mirrors: len(g.want)}
	if u, err := b.agent.usage(); err == nil {
		c.AgentCPUSeconds = u.CPUSeconds
	}
	if !ready.IsZero() {
		c.ReadySeconds = ready.Sub(b.agent.startedAt).Seconds()
	}
	return c, nil
}

// updates changes one value of one source at a time, round-robin, and
// times each until all of that source's mirrors carry the new content.
func (b *bench) updates(ctx context.Context) error {
	p, err := b.beginPhase(ctx, "updates")
	if err != nil {
		return err
	}
	progress("%s: %d updates, %d mirrors each", b.workload, b.scale.Updates, len(b.targets))
	cpuBefore, err := b.cpuUse()
	if err != nil {
		return err
	}
	var lat []float64
	for i := range b.scale.Updates {
		s := b.sources[i%len(b.sources)]
		key := fmt.Sprintf("key-%d", (i/len(b.sources))%sourceKeys)
		s.data[key] = b.value()
		s.digest = digest(s.data)
		g := b.tracker.expect(b.want([]*source{s}, b.targets))
		start := time.Now()
		if err := b.patchSource(ctx, s, key); err != nil {
			return err
		}
		at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
		if err != nil {
			return fmt.Errorf("update %d of %s/%s: %w", i, s.Kind, s.Name, err)
		}
		lat = append(lat, at.Sub(start).Seconds())
		if b.opts.updateGap > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(b.opts.updateGap):
			}
		}
	}
	cpuAfter, err := b.cpuUse()
	if err != nil {
		return err
	}
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	ph, err := p.end(ctx)
	if err != nil {
		return err
	}
	b.res.Updates = summarize(lat)
	b.res.Updates.MirrorsPerUpdate = len(b.targets)
	var writes float64
	for _, cost := range ph.Clusters {
		writes += cost.Agent.writes("secrets", "configmaps")
	}
	if n := float64(len(lat)); n > 0 { // NaN would fail the JSON
		b.res.Updates.AgentWritesPerUpdate = writes / n
		b.res.Updates.ControlPlaneCPU = (cpuAfter.controlPlane - cpuBefore.controlPlane) / n
		b.res.Updates.AgentCPU = (cpuAfter.agent - cpuBefore.agent) / n
	}
	progress("%s: updates p50 %.3fs p95 %.3fs max %.3fs", b.workload, b.res.Updates.P50, b.res.Updates.P95, b.res.Updates.Max)
	return nil
}

// patchSource writes the new value of key with a merge patch: no read
// first, and no conflict with the agent's own writes to the source.
func (b *bench) patchSource(ctx context.Context, s *source, key string) error {
	var patch []byte
	var err error
	if s.Kind == kindSecret {
		patch, err = json.Marshal(map[string]any{"data": map[string][]byte{key: s.data[key]}})
		if err == nil {
			_, err = b.srcC.cs.CoreV1().Secrets(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
	} else {
		patch, err = json.Marshal(map[string]any{"data": map[string]string{key: string(s.data[key])}})
		if err == nil {
			_, err = b.srcC.cs.CoreV1().ConfigMaps(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
	}
	return err
}

// newNamespaceProfile is the window of the new namespace phase's CPU
// profile (-pprof).
const newNamespaceProfile = 5 * time.Second

// newNamespace creates a matching namespace in the first target cluster
// and times it until every source's mirror is in it.
func (b *bench) newNamespace(ctx context.Context) error {
	t := target{cluster: b.tgtC[0].name, namespace: targetPrefix + "new-1"}
	g := b.tracker.expect(b.want(b.live(), []target{t}))
	p, err := b.beginPhase(ctx, "new namespace")
	if err != nil {
		return err
	}
	profiled := b.agent.cpuProfile(ctx, filepath.Join(b.opts.out, "logs"), b.workload+"-new-namespace", newNamespaceProfile)
	start := time.Now()
	if err := createNamespace(ctx, b.tgtC[0], t.namespace); err != nil {
		return err
	}
	at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	if err != nil {
		return err
	}
	if err := profiled(); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	b.targets = append(b.targets, t)
	b.res.NewNamespace = &timed{Mirrors: len(g.want), Seconds: at.Sub(start).Seconds()}
	progress("%s: new namespace filled in %.3fs", b.workload, b.res.NewNamespace.Seconds)
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	_, err = p.end(ctx)
	return err
}

// deletion deletes the first source and times it until all its mirrors
// are gone.
func (b *bench) deletion(ctx context.Context) error {
	s := b.sources[0]
	s.deleted = true
	g := b.tracker.expect(b.want([]*source{s}, b.targets))
	p, err := b.beginPhase(ctx, "deletion")
	if err != nil {
		return err
	}
	start := time.Now()
	if s.Kind == kindSecret {
		err = b.srcC.cs.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
	} else {
		err = b.srcC.cs.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
	}
	if err != nil {
		return err
	}
	at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	if err != nil {
		return err
	}
	b.res.Deletion = &timed{Mirrors: len(g.want), Seconds: at.Sub(start).Seconds()}
	progress("%s: deleted source's mirrors gone in %.3fs", b.workload, b.res.Deletion.Seconds)
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	_, err = p.end(ctx)
	return err
}

// restart records the agent's resources, stops it and starts it again:
// with every mirror current, it must make no write to Secrets or
// ConfigMaps until it is ready and idle.
func (b *bench) restart(ctx context.Context) error {
	u, err := b.agent.usage()
	if err != nil {
		return err
	}
	b.goStats(ctx, &u)
	b.res.Resources.Agent = &u
	if err := b.agent.saveProfiles(ctx, filepath.Join(b.opts.out, "logs"), b.workload+"-before-restart"); err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	progress("%s: restarting %s", b.workload, b.agent.name)
	if err := b.agent.stop(); err != nil {
		return err
	}
	p, err := b.beginPhase(ctx, "restart (resync)")
	if err != nil {
		return err
	}
	kinds, err := b.watchKindsObject(ctx)
	if err != nil {
		return err
	}
	defer kinds.Stop()
	if err := b.agent.start(); err != nil {
		return err
	}
	ready, err := b.agent.waitReady(ctx, b.opts.timeout)
	if err != nil {
		return err
	}
	if err := b.waitClusters(ctx, len(b.tgtC)); err != nil {
		return err
	}
	idle, err := b.agent.waitIdle(ctx, float64(len(b.live())), b.opts.timeout)
	if err != nil {
		return err
	}
	ph, err := p.end(ctx)
	if err != nil {
		return err
	}
	r := &resync{ReadySeconds: ready.Sub(b.agent.startedAt).Seconds(), IdleSeconds: idle.Sub(b.agent.startedAt).Seconds()}
	for _, cost := range ph.Clusters {
		r.MirrorWrites += cost.Agent.writes("secrets", "configmaps")
		r.Writes += cost.Agent.writes("secrets", "configmaps", "events", "events.events.k8s.io")
	}
	// The leader that stopped deleted its kinds object and the new one
	// writes it again, by design (pkg/agent/kindsobject.go): a ConfigMap
	// write that is no mirror's, counted apart.
	r.KindsObjectWrites = float64(kinds.writes())
	r.MirrorWrites -= r.KindsObjectWrites
	// Objects handed out while the agent filled its caches, against what
	// carries the labels it selects on: reading unlabelled objects would
	// add the noise.
	for _, cost := range ph.Clusters {
		r.ObjectsServed += cost.Served["secrets"] + cost.Served["configmaps"]
	}
	r.LabelledObjects = len(b.live()) + b.tracker.count("")
	b.res.Resync = r
	want := b.want(b.sources, b.targets)
	extra, wrong := b.tracker.unexpected(want)
	b.res.EndState = &endState{Mirrors: b.tracker.count(""), Expected: len(b.live()) * len(b.targets), Extra: len(extra), Wrong: len(wrong)}
	progress("%s: restart: ready %.3fs, idle %.3fs, %v writes to Secrets/ConfigMaps", b.workload, r.ReadySeconds, r.IdleSeconds, r.MirrorWrites)
	return nil
}

// kindsObjectWatch counts the writes of the member's kinds object
// (clusters.MemberKindsName in the agent's namespace) from its start: the
// API server's request counts cannot tell them from mirror writes.
type kindsObjectWatch struct {
	w    watch.Interface
	done chan int
}

// watchKindsObject starts counting the writes of the kinds object.
func (b *bench) watchKindsObject(ctx context.Context) (*kindsObjectWatch, error) {
	cms := b.srcC.cs.CoreV1().ConfigMaps(systemNS)
	list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + clusters.MemberKindsName})
	if err != nil {
		return nil, err
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + clusters.MemberKindsName, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, err
	}
	k := &kindsObjectWatch{w: w, done: make(chan int, 1)}
	go func() {
		n := 0
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
				n++
			}
		}
		k.done <- n
	}()
	return k, nil
}

// writes stops the watch and returns the writes it saw.
func (k *kindsObjectWatch) writes() int {
	k.w.Stop()
	return <-k.done
}

// Stop ends the watch; writes may have done it already.
func (k *kindsObjectWatch) Stop() { k.w.Stop() }

// noiseProbe creates unlabelled objects in a target namespace while the
// agent runs and counts the watch events they cause: at the agent, by its
// fleetmirror_watch_events_total (must stay put: its watches select on our
// labels), and at the API server, which also sends them to its own watches
// of all Secrets and ConfigMaps.
func (b *bench) noiseProbe(ctx context.Context) (*noiseProbe, error) {
	c := b.tgtC[0]
	watchEvents := func() (float64, error) {
		fams, err := b.agent.scrape(ctx)
		if err != nil {
			return 0, err
		}
		return sum(fams, "fleetmirror_watch_events_total"), nil
	}
	before, err := watchEvents()
	if err != nil {
		return nil, err
	}
	p, err := b.beginPhase(ctx, "noise probe")
	if err != nil {
		return nil, err
	}
	if err := parallel(ctx, 2*noiseProbeObjects, b.opts.workers, func(ctx context.Context, i int) error {
		return createNoise(ctx, c, b.targets[0].namespace, fmt.Sprintf("probe-%03d", i), i%2 == 0, b.value())
	}); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // watch events are sent within milliseconds
	ph, err := p.end(ctx)
	if err != nil {
		return nil, err
	}
	after, err := watchEvents()
	if err != nil {
		return nil, err
	}
	cost := ph.Clusters[b.groupOf(c)]
	return &noiseProbe{
		Objects:           2 * noiseProbeObjects,
		ServerWatchEvents: cost.Served["secrets"] + cost.Served["configmaps"],
		AgentWatchEvents:  after - before,
	}, nil
}

// goStats adds the agent's Go runtime figures to u.
func (b *bench) goStats(ctx context.Context, u *usage) {
	agentGoStats(ctx, b.agent, u)
}

// agentGoStats adds a's Go runtime figures to u.
func agentGoStats(ctx context.Context, a *agent, u *usage) {
	fams, err := a.scrape(ctx)
	if err != nil {
		return
	}
	u.Goroutines = sum(fams, "go_goroutines")
	u.HeapInuseMiB = sum(fams, "go_memstats_heap_inuse_bytes") / (1 << 20)
	u.GoSysMiB = sum(fams, "go_memstats_sys_bytes") / (1 << 20)
}

// groupOf is the group of clusters c is reported in.
func (b *bench) groupOf(c *cluster) string {
	for g, cs := range b.groups {
		for _, x := range cs {
			if x == c {
				return g
			}
		}
	}
	return ""
}

// parallel runs fn for 0..n-1 on workers goroutines and returns the first
// error; the others are cancelled.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(workers, 1), max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// machineFacts describes the machine the figures come from.
func machineFacts() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadAvgStart: loadAvg()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemoryGiB = kb / 1024 / 1024
			}
		}
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// pinnedKubeVersion is KUBE_VERSION of hack/envtest.sh, which builds the
// API server from source, or "".
func pinnedKubeVersion() string {
	root, err := fleettest.RepoRoot()
	if err != nil {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(root, "hack", "envtest.sh")) //nolint:gosec // a fixed file of this repository
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "KUBE_VERSION="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// loadAvg is /proc/loadavg's first three figures: other work on the
// machine makes the figures noisy.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// idle counts the agent's requests in a window of -idle once it has
// nothing to do: with every kind in use, the health probes (GET
// /readyz, non-resource) and nothing else; with discovery
// (-agent-args=--resource-types=), the kinds nobody mirrors are followed
// by idle watches, which send nothing either.
func (b *bench) idle(ctx context.Context) error {
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	p, err := b.beginPhase(ctx, "idle")
	if err != nil {
		return err
	}
	progress("%s: counting the idle agent's requests for %s", b.workload, b.opts.idle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.opts.idle): // a measuring window, not a wait for a condition
	}
	ph, err := p.end(ctx)
	if err != nil {
		return err
	}
	b.res.IdleRequests = map[string]float64{}
	for _, cost := range ph.Clusters {
		for k, v := range cost.Agent {
			b.res.IdleRequests[k] += v
		}
	}
	return nil
}
