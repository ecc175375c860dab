package fleet

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/events"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// Provider is a source of clusters: the agent's own cluster, kubeconfig
// Secrets in the hub's cluster, a directory of kubeconfig files. Run tells
// the fleet about them until ctx ends; it returns an error only when it
// cannot go on at all.
//
// The seam is modelled on sigs.k8s.io/multicluster-runtime's Provider (a
// cluster is engaged with a context and disengaged when that context
// ends); that module is not a dependency of ours.
type Provider interface {
	Run(ctx context.Context, e Engager) error
}

// Engager is the side of the fleet a Provider sees.
type Engager interface {
	// Engage adds the cluster c until ctx ends; ending ctx disengages it.
	// A provider that ends ctx with the cause ErrReplaced (see
	// context.WithCancelCause) says the cluster comes back at once under
	// the same name, with new credentials: it is not leaving the fleet.
	// Engaging a name whose previous engagement is still being torn down
	// waits for the teardown; engaging a name that is engaged is an error.
	Engage(ctx context.Context, c Spec) error
	// Relabel replaces the labels of the engaged cluster named name.
	Relabel(name string, labels map[string]string)
	// Listed says that every cluster the provider knew of at start was
	// engaged or refused. Until every provider said so, the fleet is not
	// known, and no target is resolved as missing.
	Listed()
}

// ErrReplaced is the cancellation cause with which a provider ends the
// engagement of a cluster that it engages again at once.
var ErrReplaced = errors.New("cluster replaced by a new registration")

// ErrHandedOver is the cancellation cause with which a sharding provider
// ends the engagement of a cluster that another replica of the hub serves
// from now on. The fleet marks the cluster unreachable first, which aborts
// the calls in flight and fails new ones at once (the fence: the other
// replica may start writing soon after), keeps the writer's finalizer on
// its sources (the other replica serves them) and deletes its series.
var ErrHandedOver = errors.New("cluster handed over to another hub replica")

// Spec is one cluster as a provider hands it to the fleet.
type Spec struct {
	// Name names the cluster in source references, targets, logs and
	// metrics.
	Name string
	// Config reaches the cluster. The fleet applies its rate limits to a
	// copy.
	Config *rest.Config
	// Labels are matched by fleetmirror.io/target-cluster-selector.
	Labels map[string]string
	// Local marks the agent's own cluster: the controller waits for its
	// caches before it starts, and readiness reports them.
	Local bool
	// ExcludedNamespaces are never targeted in this cluster, on top of
	// the operator's exclusions (the hub's registration namespace), for
	// the reason ExcludedBecause gives in plain words.
	ExcludedNamespaces glob.List
	ExcludedBecause    string
	// Recorder, when set, records the Events about objects of the cluster;
	// otherwise the fleet makes one that writes to the cluster.
	Recorder events.Recorder
	// Since is when the cluster was registered (its Secret's
	// creationTimestamp): of two registrations that reach one cluster,
	// the older keeps it (Options.Identities, Award).
	Since time.Time
	// Refused, when set, is called when the registration is refused
	// because the cluster it reaches is served under the name holder
	// (Options.Identities). Nothing is read or written through it until
	// holder goes away; then it serves the cluster.
	Refused func(holder string)

	// The fields below serve a sharded hub (pkg/shard); zero values are
	// the unsharded fleet.

	// ReadOnly: the writer reads the cluster's sources but writes nothing
	// into it, neither mirrors nor the finalizer or status of its
	// sources: another replica of the hub serves it. Events about its
	// sources are still recorded (each recorder creates Events of its own).
	ReadOnly bool
	// Elsewhere: the cluster is registered, but another replica of the hub
	// serves it. The fleet does not connect to it; it keeps its name and
	// labels, so that targets there are reported as served elsewhere and
	// mirrors of its sources are not taken for orphans.
	Elsewhere bool
	// Left, when set, is called once an engagement that ctx ended is torn
	// down: its watches stopped, its connection closed (refusing new
	// calls), and, when handed over, its calls in flight aborted.
	Left func()
}

// Providers runs several providers as one: the fleet is listed when every
// one of them is.
func Providers(ps ...Provider) Provider { return multi(ps) }

type multi []Provider

func (m multi) Run(ctx context.Context, e Engager) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listed := &countdown{Engager: e, left: len(m)}
	errs := make(chan error, len(m))
	for _, p := range m {
		go func() { errs <- p.Run(ctx, &once{Engager: listed}) }()
	}
	var first error
	for range m {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel() // one provider failing stops the fleet
		}
	}
	return first
}

// countdown passes Listed on once left providers have said it.
type countdown struct {
	Engager
	mu   sync.Mutex
	left int
}

func (c *countdown) Listed() {
	c.mu.Lock()
	c.left--
	done := c.left == 0
	c.mu.Unlock()
	if done {
		c.Engager.Listed()
	}
}

// once passes on only the first Listed of one provider.
type once struct {
	Engager
	listed sync.Once
}

func (o *once) Listed() { o.listed.Do(o.Engager.Listed) }
