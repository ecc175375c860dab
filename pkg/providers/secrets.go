package providers

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/events"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Event reasons on registration Secrets.
const (
	ReasonClusterRegistered = "ClusterRegistered"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	// ReasonDuplicateClusterName: the cluster name is taken by an older
	// Secret, or is the hub's own.
	ReasonDuplicateClusterName = "DuplicateClusterName"
	// ReasonDuplicateCluster: the Secret reaches a cluster that the hub
	// serves under another name (its own, or an older Secret's): it is
	// not served until that registration goes away.
	ReasonDuplicateCluster = "DuplicateCluster"
	// ReasonRegistrationRefused: the Secret was written by a mirroring
	// agent, not by whoever may register clusters, so it registers nothing.
	ReasonRegistrationRefused = "RegistrationRefused"
)

// KubeconfigSecrets registers one cluster per kubeconfig Secret in a
// namespace of the hub's cluster: Cluster API's <cluster>-kubeconfig
// Secrets (label cluster.x-k8s.io/cluster-name, type cluster.x-k8s.io/secret,
// key "value") and Secrets with our label fleetmirror.io/cluster-name. The
// Secret's labels are the cluster's labels. Secrets that are mirrors, that
// do not parse, that run plugins (unless allowed) or that claim a name
// taken are refused with a Warning Event on the Secret.
type KubeconfigSecrets struct {
	// Config reaches the cluster holding the Secrets.
	Config *rest.Config
	// Namespace holds the Secrets.
	Namespace string
	// Reserved names a cluster that is not registered by a Secret (the
	// hub's own).
	Reserved string
	// AllowPlugins accepts kubeconfigs with exec and auth-provider plugins.
	AllowPlugins bool
	// Recorder records the Events on the Secrets.
	Recorder events.Recorder
}

// Run watches the registration Secrets and engages their clusters until
// ctx ends.
func (p *KubeconfigSecrets) Run(ctx context.Context, e fleet.Engager) error {
	// A REST client of core/v1, not client-go's typed clients: see
	// clusters.TypedREST.
	core, err := clusters.TypedREST(p.Config, corev1.SchemeGroupVersion, corev1.AddToScheme)
	if err != nil {
		return err
	}
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	// Only labelled Secrets of one namespace are listed: never all Secrets.
	var informers []cache.SharedIndexInformer
	for _, key := range []string{annotations.LabelClusterName, capiClusterNameLabel} {
		req, _ := labels.NewRequirement(key, selection.Exists, nil)
		sel := labels.NewSelector().Add(*req).String()
		lw := cache.NewFilteredListWatchFromClient(core, "secrets", p.Namespace,
			func(lo *metav1.ListOptions) { lo.LabelSelector = sel })
		inf := cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			UpdateFunc: func(any, any) { poke() },
			DeleteFunc: func(any) { poke() },
		}); err != nil {
			return err
		}
		informers = append(informers, inf)
		go inf.RunWithContext(ctx)
	}
	for _, inf := range informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil
		}
	}
	s := &secretsSync{p: p, e: e, engaged: engagedSet{}, refused: map[string]string{}}
	for {
		s.sync(ctx, informers)
		e.Listed()
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
		}
	}
}

// secretsSync is the state of one KubeconfigSecrets run.
type secretsSync struct {
	p       *KubeconfigSecrets
	e       fleet.Engager
	engaged engagedSet
	// refused remembers the last refusal reported per Secret.
	refused map[string]string
	// parsed is what the last sync parsed, by Secret.
	parsed parsedSecrets
}

// parsedSecrets is what parseRegistration made of each registration
// Secret, by UID, kept while the Secret's resourceVersion stays. A sync
// looks at every Secret, and a kubeconfig with its certificates costs
// about 0.11 ms and 42 KB to parse: with 1,000 registrations, every
// replica of the hub spent 110 ms of CPU and 42 MB of garbage on any
// change of any one of them; 1.9 ms and 0.56 MB now
// (BenchmarkSyncOfAThousandRegistrations).
type parsedSecrets map[types.UID]*parsedSecret

type parsedSecret struct {
	resourceVersion string
	reg             *registration
	err             error
}

// parse returns what sec registers, and keeps it in ps: taken from prev,
// the previous sync's, if that parsed this resourceVersion, else parsed.
func (ps parsedSecrets) parse(sec *corev1.Secret, prev parsedSecrets, allowPlugins bool) (*registration, error) {
	p := prev[sec.UID]
	if p == nil || p.resourceVersion != sec.ResourceVersion {
		reg, err := parseRegistration(sec, allowPlugins)
		p = &parsedSecret{resourceVersion: sec.ResourceVersion, reg: reg, err: err}
	}
	ps[sec.UID] = p
	return p.reg, p.err
}

// sync makes the engaged clusters match the registration Secrets.
func (s *secretsSync) sync(ctx context.Context, informers []cache.SharedIndexInformer) {
	log := logf.FromContext(ctx)
	var secrets []*corev1.Secret
	seen := map[string]bool{}
	for _, inf := range informers {
		for _, o := range inf.GetStore().List() {
			sec := o.(*corev1.Secret)
			if _, ok := clusterName(sec); ok && !seen[sec.Namespace+"/"+sec.Name] {
				seen[sec.Namespace+"/"+sec.Name] = true
				secrets = append(secrets, sec)
			}
		}
	}
	// The oldest Secret keeps a name claimed twice, whatever order the
	// caches list them in.
	sort.Slice(secrets, func(i, j int) bool {
		a, b := secrets[i], secrets[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	want := map[string]*registration{}
	parsed := make(parsedSecrets, len(secrets))
	wantSecret := map[string]*corev1.Secret{}
	for _, sec := range secrets {
		if why := mirrored(sec); why != "" {
			s.refuse(sec, ReasonRegistrationRefused, "mirror", why)
			continue
		}
		reg, err := parsed.parse(sec, s.parsed, s.p.AllowPlugins)
		name, _ := clusterName(sec)
		switch {
		case errors.Is(err, errPlugin):
			s.refuse(sec, ReasonInvalidKubeconfig, "plugin", err.Error())
		case err != nil:
			s.refuse(sec, ReasonInvalidKubeconfig, "invalid", err.Error())
		case name == s.p.Reserved:
			s.refuse(sec, ReasonDuplicateClusterName, "duplicate", fmt.Sprintf("cluster name %q is the hub's own name", name))
		case want[name] != nil:
			s.refuse(sec, ReasonDuplicateClusterName, "duplicate", fmt.Sprintf("cluster %q is already registered by Secret %s", name, wantSecret[name].Name))
		default:
			want[name], wantSecret[name] = reg, sec
		}
	}
	s.parsed = parsed // a Secret no longer seen is forgotten
	hashes := make(map[string]string, len(want))
	for name, reg := range want {
		hashes[name] = reg.hash
	}
	s.engaged.retire(log, hashes)
	for name, reg := range want {
		if s.engaged[name] != nil {
			s.e.Relabel(name, reg.labels) // labels may change without a reconnect
			continue
		}
		sec := wantSecret[name]
		spec := fleet.Spec{Name: name, Config: reg.config, Labels: reg.labels, Since: sec.CreationTimestamp.Time,
			Refused: func(holder string) { s.refuseDuplicate(sec, name, holder) }}
		if err := s.engaged.engage(ctx, s.e, spec, reg.hash); err != nil {
			s.refuse(sec, ReasonInvalidKubeconfig, "invalid", err.Error())
			continue
		}
		log.Info("Registering cluster", "cluster", name, "secret", sec.Name)
		s.p.Recorder.Eventf(sec, events.Normal, ReasonClusterRegistered, "Cluster %s registered", name)
	}
}

// refuseDuplicate reports a registration Secret whose cluster the hub
// serves under the name holder. The fleet calls it once per engagement.
func (s *secretsSync) refuseDuplicate(sec *corev1.Secret, name, holder string) {
	metrics.RegistrationErrors.WithLabelValues(MetricDuplicateCluster).Inc()
	s.p.Recorder.Eventf(sec, events.Warning, ReasonDuplicateCluster,
		"The cluster this Secret registers as %s is registered already as %s (same kube-system Namespace UID): nothing is read or written through this Secret until %s is unregistered; delete one of the two registrations",
		name, holder, holder)
}

// MetricDuplicateCluster is the reason of fleetmirror_hub_registration_errors_total
// for a registration of a cluster served under another name.
const MetricDuplicateCluster = "duplicate-cluster"

// refuse reports a registration Secret that is not used, once per version
// of the Secret and message: a sync caused by another Secret repeats nothing.
func (s *secretsSync) refuse(sec *corev1.Secret, reason, metric, msg string) {
	seen := string(sec.UID) + "/" + sec.ResourceVersion + "/" + msg
	if s.refused[sec.Namespace+"/"+sec.Name] == seen {
		return
	}
	s.refused[sec.Namespace+"/"+sec.Name] = seen
	metrics.RegistrationErrors.WithLabelValues(metric).Inc()
	s.p.Recorder.Eventf(sec, events.Warning, reason, "%s", msg)
}
