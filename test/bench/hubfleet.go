package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// hub-fleet measures what one more cluster costs the hub: a hub and
// -members clusters, each a kube-apiserver of its own, all storing in one
// etcd under prefixes of their own (fleettest.StartShared). Registering
// many clusters through one API server is no fleet: the hub treats every
// registration as a cluster of its own and would delete, through one
// registration, the mirrors another wrote into the same server.
//
// It runs two hub processes one after the other:
//
//  1. a hub with nothing registered, then every cluster registered at
//     once: the time until every mirror is in every cluster, the fan-out of
//     source updates to every cluster, the watches the hub holds open in
//     each, and its requests and CPU while idle;
//  2. a fresh hub, clusters registered in steps (0, 1/4, 1/2, all), its
//     memory and goroutines read once it has settled at each step, so that
//     the cost of a cluster is a least-squares slope. The mirrors exist
//     already: the hub adopts them without writing.

// slimAPIServerArgs are the flags of the members' API servers in
// hub-fleet; with slimAPIServerEnv they cut an idle API server's own memory
// from 191 to 111 MiB (anonymous RSS) and its idle CPU by half
// (test/bench/README.md), so that a hundred fit on one machine. None
// changes what the hub sees: every API group is served, so discovery (which
// the hub caches per cluster) is a whole cluster's; the hub reads and
// writes Secrets, ConfigMaps, Namespaces and Events, which keep their watch
// caches, and probes /readyz, as the admin user.
var slimAPIServerArgs = map[string]string{
	// Every default admission plugin but NamespaceLifecycle, which refuses
	// objects in terminating namespaces as every cluster does. The others
	// act on kinds the hub never writes (Pods, Services, claims) or on
	// configuration no cluster here has (webhooks, policies, quotas); each
	// keeps informers of its own.
	"disable-admission-plugins": "LimitRanger,ServiceAccount,TaintNodesByCondition,PodSecurity,Priority," +
		"DefaultTolerationSeconds,DefaultStorageClass,StorageObjectInUseProtection,PodGroupProtection," +
		"PersistentVolumeClaimResize,RuntimeClass,CertificateApproval,CertificateSigning,ClusterTrustBundleAttest," +
		"CertificateSubjectRestriction,DefaultIngressClass,PodTopologyLabels,PodGroupWorkloadExists," +
		"NodeDeclaredFeatureValidator,JobValidation,PodResizeValidator,MutatingAdmissionPolicy," +
		"MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook,ResourceQuota",
	// No watch cache for the resources the hub never reads: half the
	// goroutines and most of the idle CPU.
	"watch-cache-sizes": strings.Join(uncachedResources, "#0,") + "#0",
	// Max-in-flight limits instead of flow control, whose configuration
	// objects and per-request classification cost memory and CPU; a
	// member sees a few requests a second.
	"enable-priority-and-fairness": "false",
	// A cluster of one API server has no peers: no identity leases renewed
	// every 10 s, no proxy to peers, no endpoints of the kubernetes Service.
	"feature-gates":            "APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false",
	"endpoint-reconciler-type": "none",
	// No periodic polls of etcd for metrics nobody reads here.
	"etcd-count-metric-poll-period": "0",
	"etcd-db-metric-poll-interval":  "0",
	"profiling":                     "false",
}

// uncachedResources are the stored built-in resources of Kubernetes 1.36
// (the version hack/envtest.sh builds) but Secrets, ConfigMaps, Namespaces
// and Events. A resource of a later version missing here keeps its cache.
var uncachedResources = []string{
	"endpoints", "limitranges", "nodes", "persistentvolumeclaims", "persistentvolumes", "pods", "podtemplates",
	"replicationcontrollers", "resourcequotas", "serviceaccounts", "services",
	"priorityclasses.scheduling.k8s.io",
	"controllerrevisions.apps", "daemonsets.apps", "deployments.apps", "replicasets.apps", "statefulsets.apps",
	"poddisruptionbudgets.policy", "horizontalpodautoscalers.autoscaling", "cronjobs.batch", "jobs.batch",
	"ingressclasses.networking.k8s.io", "ingresses.networking.k8s.io", "ipaddresses.networking.k8s.io",
	"networkpolicies.networking.k8s.io", "servicecidrs.networking.k8s.io",
	"customresourcedefinitions.apiextensions.k8s.io", "apiservices.apiregistration.k8s.io",
	"flowschemas.flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io",
	"mutatingadmissionpolicies.admissionregistration.k8s.io", "mutatingadmissionpolicybindings.admissionregistration.k8s.io",
	"mutatingwebhookconfigurations.admissionregistration.k8s.io", "validatingadmissionpolicies.admissionregistration.k8s.io",
	"validatingadmissionpolicybindings.admissionregistration.k8s.io", "validatingwebhookconfigurations.admissionregistration.k8s.io",
	"csidrivers.storage.k8s.io", "csinodes.storage.k8s.io", "csistoragecapacities.storage.k8s.io", "storageclasses.storage.k8s.io",
	"volumeattachments.storage.k8s.io", "volumeattributesclasses.storage.k8s.io", "runtimeclasses.node.k8s.io",
	"clusterrolebindings.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io",
	"rolebindings.rbac.authorization.k8s.io", "roles.rbac.authorization.k8s.io",
	"leases.coordination.k8s.io", "certificatesigningrequests.certificates.k8s.io", "endpointslices.discovery.k8s.io",
	"deviceclasses.resource.k8s.io", "resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io",
	"resourceslices.resource.k8s.io",
}

// slimAPIServerEnv makes the members' API servers collect garbage at a
// fifth of the default heap growth: 30 MiB less each, for about a second
// more CPU at start.
var slimAPIServerEnv = []string{"GOGC=20"}

// defaultProbeInterval is the hub's --cluster-probe-interval default.
const defaultProbeInterval = 10 * time.Second

// memorySampleInterval is how often the machine's memory is read.
const memorySampleInterval = 5 * time.Second

// hubFleet is the result of hub-fleet.
type hubFleet struct {
	Members        int  `json:"members"`
	SlimAPIServers bool `json:"slimAPIServers"`
	// APIServers are the API servers' memory before the hub started and
	// at the end of the first hub's run.
	APIServers []*serverFootprint `json:"apiServers"`
	// Register is from writing every registration Secret at once until
	// every mirror in every cluster has its source's content (1).
	Register *timed `json:"register,omitempty"`
	// AllUpSeconds is from the same moment until the hub reported every
	// cluster up with both kinds watched.
	AllUpSeconds float64 `json:"allUpSeconds"`
	// Watches are the watches the hub holds open in each cluster (4).
	Watches *openWatches `json:"watches,omitempty"`
	// Idle is what the idle hub sends and spends (5).
	Idle *idleCost `json:"idle,omitempty"`
	// Steps are the second hub's figures at each number of clusters, and
	// Slope their least-squares slopes per cluster (3).
	Steps []*hubStep `json:"steps"`
	Slope *hubSlope  `json:"slope,omitempty"`
	// Machine is the memory of the whole machine during the run.
	Machine *machineMemory `json:"machine,omitempty"`
}

// serverFootprint is the memory of the fleet's API servers and etcd.
// Anonymous RSS is what a process costs on its own: the file-backed pages
// of the kube-apiserver binary (about 80 MiB) are counted in every API
// server's RSS but are in memory once.
type serverFootprint struct {
	When string `json:"when"`
	// Member API servers: mean RSS and anonymous RSS, the largest
	// anonymous RSS, and the sum of the anonymous RSS of all.
	MemberRSSMiB      float64 `json:"memberRSSMiB"`
	MemberAnonMiB     float64 `json:"memberAnonMiB"`
	MemberAnonMaxMiB  float64 `json:"memberAnonMaxMiB"`
	MembersAnonSumMiB float64 `json:"membersAnonSumMiB"`
	// The hub cluster's API server, started with envtest's flags.
	HubRSSMiB  float64 `json:"hubRSSMiB"`
	HubAnonMiB float64 `json:"hubAnonMiB"`
	EtcdRSSMiB float64 `json:"etcdRSSMiB"`
}

// openWatches counts the watches the hub holds open in each cluster: the
// API servers' apiserver_longrunning_requests{verb="WATCH"} once the hub
// is idle, minus the same before the hub started (the API server's own
// informers and the bench's two watches of mirrors).
type openWatches struct {
	PerCluster float64 `json:"perCluster"` // mean over members
	Min        float64 `json:"min"`
	Max        float64 `json:"max"`
	// ByResource is the mean per member by resource.
	ByResource map[string]float64 `json:"byResource"`
	// Hub is the same difference in the hub's own cluster.
	Hub float64 `json:"hub"`
}

// idleCost is what the idle hub does in a window of -idle.
type idleCost struct {
	Seconds float64 `json:"seconds"`
	// RequestsPerCluster and RequestsMax are the hub's own count of its
	// requests to each member (client-go's rest_client_requests_total by
	// host), the mean and the largest; ByMethod is the mean by HTTP method.
	RequestsPerCluster float64            `json:"requestsPerCluster"`
	RequestsMax        float64            `json:"requestsMax"`
	ByMethod           map[string]float64 `json:"byMethod"`
	// HubRequests are those to its own cluster.
	HubRequests float64 `json:"hubRequests"`
	// ServerPerCluster is what the members' API servers counted (less the
	// bench's own requests), by verb and resource, per member. Of those,
	// ProbesPerCluster are "GET (non-resource)": /readyz, and discovery
	// should the hub ask; OtherPerCluster are requests on the resources the
	// hub reads or writes (hubResources); OwnPerCluster the rest, which
	// only the API server itself sends (its service IP repair loop LISTs
	// Services every 3 minutes).
	ServerPerCluster counts  `json:"serverPerCluster"`
	ProbesPerCluster float64 `json:"probesPerCluster"`
	OtherPerCluster  float64 `json:"otherPerCluster"`
	OwnPerCluster    float64 `json:"apiServersOwnPerCluster"`
	// ServerSeconds is the window of the API servers' count: Seconds and
	// the time to read a hundred API servers' counters on each side.
	ServerSeconds float64 `json:"serverSeconds"`
	// ProbeBudget is one probe per cluster per probe period in the window.
	ProbeBudget float64 `json:"probeBudget"`
	// CPUSeconds is the hub's process_cpu_seconds_total in the window;
	// CPUPercent the same as a share of one core.
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPercent float64 `json:"cpuPercent"`
}

// hubStep is the hub's state with Clusters registered.
type hubStep struct {
	Clusters int `json:"clusters"`
	// Seconds is from writing the step's registrations until the hub
	// reported every registered cluster up, both kinds watched, and idle.
	Seconds float64   `json:"seconds"`
	Stats   *hubStats `json:"stats"`
}

// hubSlope are least-squares slopes over the steps, per cluster.
type hubSlope struct {
	RSSMiB       float64 `json:"rssMiB"`
	RSSAnonMiB   float64 `json:"rssAnonMiB"`
	HeapLiveMiB  float64 `json:"heapLiveMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
	Goroutines   float64 `json:"goroutines"`
}

// machineMemory is the whole machine's memory in use (MemTotal -
// MemAvailable of /proc/meminfo, every process), read every
// memorySampleInterval.
type machineMemory struct {
	TotalMiB     float64 `json:"totalMiB"`
	UsedStartMiB float64 `json:"usedStartMiB"`
	UsedPeakMiB  float64 `json:"usedPeakMiB"`
	// Samples are [seconds since the start, MiB used].
	Samples [][2]float64 `json:"samples"`
}

// sharedOptions are the API servers of hub-fleet: one etcd, slim members
// unless -slim-apiservers=false, their logs in the logs directory.
func (b *bench) sharedOptions() fleettest.SharedOptions {
	o := fleettest.SharedOptions{
		Progress: func(started, total int) {
			if started%10 == 0 || started == total {
				progress("%s: %d of %d API servers started", b.workload, started, total)
			}
		},
	}
	if b.opts.slimServers {
		o.MemberArgs, o.MemberEnv = slimAPIServerArgs, slimAPIServerEnv
	}
	// Every API server writes to this one file (appends, a line per write).
	logPath := filepath.Join(b.opts.out, "logs", b.workload+"-apiservers.log")
	if f, err := os.Create(logPath); err == nil { //nolint:gosec // the bench's own log directory
		o.Output, b.apiServerLog = f, f
	}
	return o
}

// runHubFleet runs hub-fleet.
func (b *bench) runHubFleet(ctx context.Context) (err error) {
	n := b.scale.Members
	if n < 1 {
		return errors.New("hub-fleet needs at least one member")
	}
	b.planTargets(n)
	b.res.ExpectedMirrors = len(b.targets) * len(b.sources)
	hf := &hubFleet{Members: n, SlimAPIServers: b.opts.slimServers}
	b.res.Fleet = hf
	mem := startMemorySampler()
	defer func() { hf.Machine = mem.stop() }()

	if err := b.startFleet(n); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.stopFleet()) }()
	seedStart := time.Now()
	if err := b.seed(ctx); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	b.res.SeedSeconds = time.Since(seedStart).Seconds()
	if b.opts.memberKinds {
		if err := b.memberKindsObjects(ctx); err != nil {
			return err
		}
	}
	progress("%s: watching the mirrors of %d clusters", b.workload, n)
	if err := b.watchAndPrepare(ctx); err != nil {
		return err
	}
	fp, err := b.footprint("before the hub")
	if err != nil {
		return err
	}
	hf.APIServers = append(hf.APIServers, fp)
	watchesBefore, err := b.watchCounts(ctx)
	if err != nil {
		return err
	}

	// The first hub: everything registered at once.
	if err := b.startIdleHub(ctx, 0); err != nil {
		return err
	}
	if err := b.registerAll(ctx, hf); err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	if err := b.updates(ctx); err != nil {
		return fmt.Errorf("updates: %w", err)
	}
	watchesAfter, err := b.watchCounts(ctx)
	if err != nil {
		return err
	}
	hf.Watches = b.openWatches(watchesBefore, watchesAfter)
	if hf.Idle, err = b.idleCost(ctx); err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	if fp, err = b.footprint(fmt.Sprintf("%d clusters registered", n)); err != nil {
		return err
	}
	hf.APIServers = append(hf.APIServers, fp)
	u, err := b.agent.usage()
	if err != nil {
		return err
	}
	b.goStats(ctx, &u)
	b.res.Resources.Agent = &u
	progress("%s: stopping the hub; a fresh one registers the clusters in steps", b.workload)
	if err := b.agent.stop(); err != nil {
		return err
	}

	// The second hub: registrations in steps.
	if err := parallel(ctx, len(b.tgtC), b.opts.workers, func(ctx context.Context, i int) error {
		return fleettest.Unregister(ctx, b.srcC.ctrl, systemNS, b.tgtC[i].fc)
	}); err != nil {
		return err
	}
	if err := b.startIdleHub(ctx, 0); err != nil {
		return err
	}
	p, err := b.beginPhase(ctx, "steps (adoption)")
	if err != nil {
		return err
	}
	registered := 0
	for _, k := range fleetSteps(n) {
		start := time.Now()
		if err := b.register(ctx, b.tgtC[registered:k]...); err != nil {
			return err
		}
		registered = k
		if err := b.waitClusters(ctx, k); err != nil {
			return err
		}
		if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
			return err
		}
		step := &hubStep{Clusters: k, Seconds: time.Since(start).Seconds()}
		progress("%s: %d clusters up and idle after %.3fs; settling %s", b.workload, k, step.Seconds, b.opts.settle)
		if step.Stats, err = b.settledHubStats(ctx); err != nil {
			return err
		}
		hf.Steps = append(hf.Steps, step)
		if err := b.agent.saveProfiles(ctx, filepath.Join(b.opts.out, "logs"), fmt.Sprintf("%s-%d-clusters", b.workload, k)); err != nil {
			return fmt.Errorf("profiles: %w", err)
		}
		progress("%s: %d clusters: RSS %.1f MiB, live heap %.1f MiB, %.0f goroutines", b.workload, k, step.Stats.RSSMiB, step.Stats.HeapLiveMiB, step.Stats.Goroutines)
	}
	if _, err := p.end(ctx); err != nil {
		return err
	}
	hf.Slope = slopes(hf.Steps)
	want := b.want(b.sources, b.targets)
	extra, wrong := b.tracker.unexpected(want)
	b.res.EndState = &endState{Mirrors: b.tracker.count(""), Expected: len(b.live()) * len(b.targets), Extra: len(extra), Wrong: len(wrong)}
	return b.agent.stop()
}

// startIdleHub starts the hub and waits until it is ready, reports
// members clusters up and is idle.
func (b *bench) startIdleHub(ctx context.Context, members int) error {
	progress("%s: starting %s", b.workload, b.agent.name)
	if err := b.agent.start(); err != nil {
		return err
	}
	if _, err := b.agent.waitReady(ctx, b.opts.timeout); err != nil {
		return err
	}
	if err := b.waitClusters(ctx, members); err != nil {
		return err
	}
	_, err := b.agent.waitIdle(ctx, 0, b.opts.timeout)
	return err
}

// registerAll registers every member at once and times it until every
// mirror in every cluster is present and current, and until the hub
// reports every cluster up.
func (b *bench) registerAll(ctx context.Context, hf *hubFleet) error {
	g := b.tracker.expect(b.want(b.sources, b.targets))
	p, err := b.beginPhase(ctx, "register all")
	if err != nil {
		return err
	}
	progress("%s: registering %d clusters; waiting for %d mirrors", b.workload, len(b.tgtC), len(g.want))
	start := time.Now()
	var upErr error
	var upAt time.Time
	var wg sync.WaitGroup
	wg.Go(func() {
		upErr = b.waitClusters(ctx, len(b.tgtC))
		upAt = time.Now()
	})
	err = b.register(ctx, b.tgtC...)
	var at time.Time
	if err == nil {
		at, err = b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	}
	wg.Wait()
	if err = errors.Join(err, upErr); err != nil {
		return err
	}
	hf.Register = &timed{Mirrors: len(g.want), Seconds: at.Sub(start).Seconds()}
	hf.AllUpSeconds = upAt.Sub(start).Seconds()
	progress("%s: every mirror in every cluster after %.3fs; all clusters up after %.3fs", b.workload, hf.Register.Seconds, hf.AllUpSeconds)
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	_, err = p.end(ctx)
	return err
}

// watchCounts reads the open watches of every cluster by resource.
func (b *bench) watchCounts(ctx context.Context) (map[string]map[string]float64, error) {
	out := make([]map[string]float64, len(b.clusters))
	err := parallel(ctx, len(b.clusters), markWorkers, func(ctx context.Context, i int) error {
		fams, err := apiServerFamilies(ctx, b.clusters[i].raw, "apiserver_longrunning_requests")
		if err != nil {
			return fmt.Errorf("cluster %s: %w", b.clusters[i].name, err)
		}
		out[i] = map[string]float64{}
		for _, m := range fams.Series("apiserver_longrunning_requests", "verb", "WATCH") {
			out[i][resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), fleettest.Label(m, "subresource"))] += fleettest.SampleValue(m)
		}
		return nil
	})
	byName := map[string]map[string]float64{}
	for i, c := range b.clusters {
		byName[c.name] = out[i]
	}
	return byName, err
}

// openWatches is the difference of two watch counts, per member and in
// the hub's cluster.
func (b *bench) openWatches(before, after map[string]map[string]float64) *openWatches {
	total := func(m map[string]float64) float64 {
		var t float64
		for _, v := range m {
			t += v
		}
		return t
	}
	w := &openWatches{ByResource: map[string]float64{}, Hub: total(after[b.srcC.name]) - total(before[b.srcC.name])}
	for i, c := range b.tgtC {
		d := total(after[c.name]) - total(before[c.name])
		w.PerCluster += d / float64(len(b.tgtC))
		if i == 0 || d < w.Min {
			w.Min = d
		}
		w.Max = max(w.Max, d)
		for _, res := range slices.Collect(maps.Keys(after[c.name])) {
			if dr := after[c.name][res] - before[c.name][res]; dr != 0 {
				w.ByResource[res] += dr / float64(len(b.tgtC))
			}
		}
	}
	return w
}

// idleCost counts what the idle hub sends to each cluster in a window of
// -idle, by its own client metrics and by the members' API servers, and
// the CPU it uses meanwhile.
func (b *bench) idleCost(ctx context.Context) (*idleCost, error) {
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return nil, err
	}
	progress("%s: counting the idle hub's requests for %s", b.workload, b.opts.idle)
	// The hub's own count spans -idle; the API servers' count, which takes
	// seconds to read from a hundred of them, spans that and its reading.
	p, err := b.beginPhase(ctx, "idle")
	if err != nil {
		return nil, err
	}
	before, err := b.agent.scrape(ctx)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(b.opts.idle):
	}
	after, err := b.agent.scrape(ctx)
	if err != nil {
		return nil, err
	}
	window := time.Since(t0).Seconds()
	ph, err := p.end(ctx)
	if err != nil {
		return nil, err
	}
	ic := &idleCost{Seconds: window, ByMethod: map[string]float64{}, ServerPerCluster: counts{}}
	reqs := func(fams map[string]*dto.MetricFamily) map[string]map[string]float64 { // host -> method -> count
		out := map[string]map[string]float64{}
		for _, m := range fams["rest_client_requests_total"].GetMetric() {
			host, method := fleettest.Label(m, "host"), fleettest.Label(m, "method")
			if out[host] == nil {
				out[host] = map[string]float64{}
			}
			out[host][method] += fleettest.SampleValue(m)
		}
		return out
	}
	rb, ra := reqs(before), reqs(after)
	members := float64(len(b.tgtC))
	for i, c := range b.tgtC {
		host := hostOf(c)
		var total float64
		for method, v := range ra[host] {
			d := v - rb[host][method]
			total += d
			ic.ByMethod[method] += d / members
		}
		ic.RequestsPerCluster += total / members
		if i == 0 || total > ic.RequestsMax {
			ic.RequestsMax = total
		}
	}
	for method, v := range ra[hostOf(b.srcC)] {
		ic.HubRequests += v - rb[hostOf(b.srcC)][method]
	}
	for k, v := range ph.Clusters["members"].Agent {
		ic.ServerPerCluster[k] = v / members
	}
	for k, v := range ic.ServerPerCluster {
		_, res, _ := strings.Cut(k, " ")
		switch {
		case res == nonResource:
			ic.ProbesPerCluster += v
		case hubResources.Has(strings.SplitN(res, "/", 2)[0]):
			ic.OtherPerCluster += v
		default:
			ic.OwnPerCluster += v
		}
	}
	ic.ServerSeconds = ph.Seconds
	ic.ProbeBudget = float64(int(ph.Seconds/b.probeInterval().Seconds()) + 1)
	ic.CPUSeconds = sum(after, "process_cpu_seconds_total") - sum(before, "process_cpu_seconds_total")
	ic.CPUPercent = 100 * ic.CPUSeconds / window
	progress("%s: idle: %.1f requests per cluster in %.1fs (%.1f probes); hub CPU %.1f%%", b.workload, ic.RequestsPerCluster, window, ic.ProbesPerCluster, ic.CPUPercent)
	return ic, nil
}

// hubResources are the resources the hub reads or writes in a member:
// the kinds of --resource-types, Namespaces, and Events (core and
// events.k8s.io). Requests on any other resource come from the API server
// itself.
var hubResources = sets.New("secrets", "configmaps", "namespaces", "events", "events.events.k8s.io")

// hostOf is host:port of a cluster's API server, as client-go's metrics
// label it.
func hostOf(c *cluster) string {
	u, err := url.Parse(c.fc.Config.Host)
	if err != nil {
		return c.fc.Config.Host
	}
	return u.Host
}

// probeInterval is the hub's --cluster-probe-interval: its default, or
// what -agent-args set.
func (b *bench) probeInterval() time.Duration {
	args := b.agent.args
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--cluster-probe-interval=")
		if !ok && a == "--cluster-probe-interval" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if d, err := time.ParseDuration(v); ok && err == nil && d > 0 {
			return d
		}
	}
	return defaultProbeInterval
}

// footprint reads the memory of every API server and of the etcd.
func (b *bench) footprint(when string) (*serverFootprint, error) {
	fp := &serverFootprint{When: when}
	for _, c := range b.tgtC {
		u, err := apiServerUsage(c)
		if err != nil {
			return nil, err
		}
		fp.MemberRSSMiB += u.RSSMiB / float64(len(b.tgtC))
		fp.MembersAnonSumMiB += u.RSSAnonMiB
		fp.MemberAnonMaxMiB = max(fp.MemberAnonMaxMiB, u.RSSAnonMiB)
	}
	fp.MemberAnonMiB = fp.MembersAnonSumMiB / float64(len(b.tgtC))
	u, err := apiServerUsage(b.srcC)
	if err != nil {
		return nil, err
	}
	fp.HubRSSMiB, fp.HubAnonMiB = u.RSSMiB, u.RSSAnonMiB
	pid, err := b.fleet.EtcdPID()
	if err != nil {
		return nil, err
	}
	if u, err = procUsage(pid); err != nil {
		return nil, err
	}
	fp.EtcdRSSMiB = u.RSSMiB
	progress("%s: API servers %s: members %.1f MiB anonymous RSS each (%.0f MiB in all), hub's %.1f MiB, etcd RSS %.1f MiB",
		b.workload, when, fp.MemberAnonMiB, fp.MembersAnonSumMiB, fp.HubAnonMiB, fp.EtcdRSSMiB)
	return fp, nil
}

// apiServerUsage reads the memory of a cluster's kube-apiserver process.
func apiServerUsage(c *cluster) (usage, error) {
	pid, err := c.fc.APIServerPID()
	if err != nil {
		return usage{}, err
	}
	return procUsage(pid)
}

// fleetSteps are the numbers of registered clusters the hub is measured
// at: none, a quarter, half and all of n.
func fleetSteps(n int) []int {
	steps := []int{0}
	for _, k := range []int{n / 4, n / 2, n} {
		if k > steps[len(steps)-1] {
			steps = append(steps, k)
		}
	}
	return steps
}

// slopes fits a line through the steps' figures against their number of
// clusters; nil with fewer than two steps.
func slopes(steps []*hubStep) *hubSlope {
	if len(steps) < 2 {
		return nil
	}
	x := make([]float64, len(steps))
	for i, s := range steps {
		x[i] = float64(s.Clusters)
	}
	fit := func(y func(*hubStats) float64) float64 {
		ys := make([]float64, len(steps))
		for i, s := range steps {
			ys[i] = y(s.Stats)
		}
		return leastSquaresSlope(x, ys)
	}
	return &hubSlope{
		RSSMiB:       fit(func(s *hubStats) float64 { return s.RSSMiB }),
		RSSAnonMiB:   fit(func(s *hubStats) float64 { return s.RSSAnonMiB }),
		HeapLiveMiB:  fit(func(s *hubStats) float64 { return s.HeapLiveMiB }),
		HeapInuseMiB: fit(func(s *hubStats) float64 { return s.HeapInuseMiB }),
		Goroutines:   fit(func(s *hubStats) float64 { return s.Goroutines }),
	}
}

// leastSquaresSlope is the slope of the least-squares line through
// (x[i], y[i]); 0 when every x is the same.
func leastSquaresSlope(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += x[i] / float64(len(x))
		my += y[i] / float64(len(y))
	}
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// memorySampler reads the machine's memory in use until stopped.
type memorySampler struct {
	start time.Time
	stopC chan struct{}
	done  chan struct{}
	m     machineMemory
}

func startMemorySampler() *memorySampler {
	s := &memorySampler{start: time.Now(), stopC: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	s.m.UsedStartMiB = s.m.UsedPeakMiB
	go func() {
		defer close(s.done)
		t := time.NewTicker(memorySampleInterval)
		defer t.Stop()
		for {
			select {
			case <-s.stopC:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *memorySampler) sample() {
	total, avail, err := meminfo()
	if err != nil {
		return
	}
	used := total - avail
	s.m.TotalMiB = total
	s.m.UsedPeakMiB = max(s.m.UsedPeakMiB, used)
	s.m.Samples = append(s.m.Samples, [2]float64{float64(int(time.Since(s.start).Seconds())), used})
}

// stop ends the sampling and returns what was read.
func (s *memorySampler) stop() *machineMemory {
	close(s.stopC)
	<-s.done
	s.sample()
	return &s.m
}

// meminfo returns MemTotal and MemAvailable of /proc/meminfo in MiB.
func meminfo() (total, available float64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var kb float64
		if _, err := fmt.Sscan(f[1], &kb); err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = kb / 1024
		case "MemAvailable:":
			available = kb / 1024
		}
	}
	if total == 0 {
		return 0, 0, errors.New("/proc/meminfo: no MemTotal")
	}
	return total, available, nil
}

// printSetup prints the API servers' memory and the registration (1),
// before the generic rows of the updates (2).
func (hf *hubFleet) printSetup(row func(name, value, detail string)) {
	for _, fp := range hf.APIServers {
		row("API servers, "+fp.When, fmt.Sprintf("%.1f MiB", fp.MemberAnonMiB),
			fmt.Sprintf("anonymous RSS of one member's (mean; max %.1f, RSS %.1f with the shared binary pages; %.0f MiB for all %d); the hub's (envtest's flags) %.1f MiB anonymous, RSS %.1f; etcd RSS %.1f MiB",
				fp.MemberAnonMaxMiB, fp.MemberRSSMiB, fp.MembersAnonSumMiB, hf.Members, fp.HubAnonMiB, fp.HubRSSMiB, fp.EtcdRSSMiB))
	}
	if r := hf.Register; r != nil {
		row("1 registration -> every cluster ready", fmt.Sprintf("%.3fs", r.Seconds),
			fmt.Sprintf("%d clusters registered at once, %d mirrors created; every cluster up (hub's metric) after %.3fs", hf.Members, r.Mirrors, hf.AllUpSeconds))
	}
}

// print prints the steps (3), watches (4), the idle hub (5) and the
// machine's memory.
func (hf *hubFleet) print(row func(name, value, detail string)) {
	for _, s := range hf.Steps {
		row(fmt.Sprintf("3 hub at %d clusters", s.Clusters), fmt.Sprintf("%.1f MiB", s.Stats.RSSMiB),
			fmt.Sprintf("RSS (anonymous %.1f); Go heap live %.1f, in use %.1f MiB; %.0f goroutines; registered to up and idle in %.3fs",
				s.Stats.RSSAnonMiB, s.Stats.HeapLiveMiB, s.Stats.HeapInuseMiB, s.Stats.Goroutines, s.Seconds))
	}
	if s := hf.Slope; s != nil {
		row("  hub memory per cluster", fmt.Sprintf("%.3f MiB", s.RSSMiB),
			fmt.Sprintf("least-squares slope of RSS; anonymous RSS %.3f, Go heap live %.3f, in use %.3f MiB", s.RSSAnonMiB, s.HeapLiveMiB, s.HeapInuseMiB))
		row("  hub goroutines per cluster", fmt.Sprintf("%.1f", s.Goroutines), "least-squares slope")
	}
	if w := hf.Watches; w != nil {
		row("4 open watches per cluster", fmt.Sprintf("%.2f", w.PerCluster),
			fmt.Sprintf("min %.0f, max %.0f; by resource %s; %.0f in the hub's own cluster (apiserver_longrunning_requests, WATCH, idle hub minus before it started)",
				w.Min, w.Max, formatCounts(w.ByResource), w.Hub))
	}
	if ic := hf.Idle; ic != nil {
		row("5 idle requests per cluster", fmt.Sprintf("%.1f", ic.RequestsPerCluster),
			fmt.Sprintf("in %.1fs, the hub's count (max %.0f; by method %s); %.0f to its own cluster", ic.Seconds, ic.RequestsMax, formatCounts(ic.ByMethod), ic.HubRequests))
		row("  counted by the members", fmt.Sprintf("%.1f probes + %.1f other", ic.ProbesPerCluster, ic.OtherPerCluster),
			fmt.Sprintf("per cluster in %.1fs: GET (non-resource) + requests on the hub's resources; %.1f more by the API servers themselves; all by verb and resource: %s (WATCH counted when it ends)",
				ic.ServerSeconds, ic.OwnPerCluster, formatPerCluster(ic.ServerPerCluster)))
		row("  hub CPU while idle", fmt.Sprintf("%.1f%%", ic.CPUPercent), fmt.Sprintf("of one core; %.2fs in %.1fs", ic.CPUSeconds, ic.Seconds))
	}
	if m := hf.Machine; m != nil {
		row("machine memory in use", fmt.Sprintf("%.0f MiB peak", m.UsedPeakMiB),
			fmt.Sprintf("MemTotal - MemAvailable, every process; %.0f MiB at the start, %.0f MiB total", m.UsedStartMiB, m.TotalMiB))
	}
}

// formatPerCluster prints per-cluster counts with one decimal.
func formatPerCluster(c counts) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if c[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s=%.1f", k, c[k]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// check compares the figures with the goals of the fleet-scale issue, per
// registered cluster with two watched kinds.
func (hf *hubFleet) check(updates *latencies, check func(name, target, value string, ok bool)) {
	if s := hf.Slope; s != nil {
		check("hub memory per cluster (RSS slope)", "<= 0.5 MiB", fmt.Sprintf("%.3f MiB", s.RSSMiB), s.RSSMiB <= 0.5)
		check("hub goroutines per cluster (slope)", "<= 15", fmt.Sprintf("%.1f", s.Goroutines), s.Goroutines <= 15)
	}
	if updates != nil && updates.Count > 0 {
		check(fmt.Sprintf("fan-out p95 to %d clusters", hf.Members), "<= 2s", fmt.Sprintf("%.3fs", updates.P95), updates.P95 <= 2)
	}
	if ic := hf.Idle; ic != nil {
		// By the hub's own count: every request it sends to a cluster is
		// counted there, so at most one per probe period means probes
		// only. The members' count ("counted by the members") also sees
		// the API servers' own informers re-opening their watches of
		// Secrets, ConfigMaps and Namespaces, which a loaded machine makes
		// happen, so it is printed, not checked.
		budget := math.Ceil(ic.ProbeBudget / ic.ServerSeconds * ic.Seconds)
		check("idle requests per cluster but probes", fmt.Sprintf("0 (the hub's own count <= %.0f: one probe per period in %.0fs)", budget, ic.Seconds),
			fmt.Sprintf("%.1f requests per cluster, max %.0f", ic.RequestsPerCluster, ic.RequestsMax), ic.RequestsMax <= budget)
		check("idle probes per cluster", fmt.Sprintf("<= %.0f (one per probe period in %.0fs)", ic.ProbeBudget, ic.ServerSeconds), fmt.Sprintf("%.1f", ic.ProbesPerCluster), ic.ProbesPerCluster <= ic.ProbeBudget)
	}
}
