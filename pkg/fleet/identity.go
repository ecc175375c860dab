package fleet

import (
	"context"
	"slices"
	"strings"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// Claim is one registration's bid to serve the cluster it reaches. A hub
// knows a cluster by its identity (clusters.Cluster.Identity), not by the
// name it was registered under: two registrations that reach one cluster
// would otherwise each delete the mirrors written through the other.
type Claim struct {
	// Name is the registration's cluster name.
	Name string
	// Local marks the hub's own cluster, which always keeps its identity.
	Local bool
	// Since is when the registration was made (its Secret's
	// creationTimestamp); the older keeps the cluster.
	Since time.Time
	// Identity is the cluster's identity, "" until it was read.
	Identity string
	// Tried: the first read of the identity answered or failed.
	Tried bool
	// Serving: the registration serves its cluster already; it keeps it
	// until it goes away.
	Serving bool
}

// Award decides which registrations serve their cluster. A cluster served
// already stays with its registration. Otherwise the first claim in the
// order of Precedes takes it, and the later ones are refused, each mapped
// to the name of the registration that has the cluster. A claim waits
// (neither served nor refused) while its identity is unknown, or while a
// claim before it has not tried to read its own yet, so that the outcome
// does not depend on which identity was read first; the hub's own cluster
// must have its identity before any other claim is decided.
func Award(claims []Claim) (serve []string, refused map[string]string) {
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b Claim) int {
		if Precedes(a, b) {
			return -1
		}
		if Precedes(b, a) {
			return 1
		}
		return 0
	})
	holder := map[string]string{}
	for _, c := range sorted {
		if c.Serving && c.Identity != "" {
			if _, taken := holder[c.Identity]; !taken {
				holder[c.Identity] = c.Name
			}
		}
	}
	refused = map[string]string{}
	undecided := false // a claim before this one does not know its identity yet
	for _, c := range sorted {
		switch h, taken := holder[c.Identity]; {
		case c.Identity == "":
			if !c.Tried || c.Local {
				undecided = true
			}
		case c.Serving && h == c.Name:
		case taken:
			refused[c.Name] = h
		case !undecided:
			holder[c.Identity] = c.Name
			serve = append(serve, c.Name)
		}
	}
	return serve, refused
}

// Precedes reports whether registration a keeps a cluster that b reaches
// too: the hub's own cluster first, then the older registration, then the
// name.
func Precedes(a, b Claim) bool {
	if a.Local != b.Local {
		return a.Local
	}
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	return strings.Compare(a.Name, b.Name) < 0
}

// listed reports whether the connection is one of the fleet's clusters
// (Clusters, Members): every one but a refused registration. One whose
// claim is not decided yet is connecting, or unreachable while its
// identity cannot be read; nothing is read or written through it until
// it serves (Cluster returns only those). Under f.mu.
func (c *connection) listed() bool { return c.refusedBy == "" }

// identify reads the identity of c's cluster, once it answers, and has
// the claims decided. It reports whether c serves its cluster now, or
// else when to try again (zero: award pokes c when it may serve).
func (f *Fleet) identify(ctx context.Context, c *connection) (serve bool, retry time.Duration) {
	f.mu.RLock()
	id := c.identity
	f.mu.RUnlock()
	if id == "" {
		log := logf.FromContext(ctx).WithValues("cluster", c.spec.Name)
		rctx, cancel := context.WithTimeout(ctx, f.opts.ProbeTimeout)
		read, err := c.cluster.Identity(rctx)
		cancel()
		if ctx.Err() != nil {
			return false, 0
		}
		f.mu.Lock()
		c.tried, c.identity = true, read
		f.mu.Unlock()
		if err != nil {
			log.Info("Cluster not ready", "error", err.Error())
			f.probeFailed(c)
			f.setUp(c, false)
			f.award()
			return false, min(f.opts.ProbeInterval, clusters.DownProbeInterval)
		}
		log.Info("Cluster identified", "identity", read)
		f.award()
	}
	return f.serves(c), 0
}

// serves reports whether c serves its cluster.
func (f *Fleet) serves(c *connection) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return c.serving
}

// award decides the claims on clusters (Award), once the fleet is known:
// a registration awarded its cluster is started; one refused is told so
// (Spec.Refused). It must not be called under f.mu.
func (f *Fleet) award() {
	if !f.opts.Identities || !f.Known() {
		return
	}
	type refusal struct {
		c      *connection
		holder string
	}
	var started []*connection
	var refusals []refusal
	f.mu.Lock()
	claims := make([]Claim, 0, len(f.conns)+len(f.releasing))
	ids := map[string]bool{}
	for _, c := range f.conns {
		claims = append(claims, Claim{Name: c.spec.Name, Local: c.spec.Local, Since: c.spec.Since, Identity: c.identity, Tried: c.tried, Serving: c.serving})
		ids[c.identity] = true
	}
	for id, name := range f.releasing {
		claims = append(claims, Claim{Name: name, Identity: id, Tried: true, Serving: true})
		ids[id] = true
	}
	serve, refused := Award(claims)
	for _, name := range serve {
		if c := f.conns[name]; c != nil {
			c.serving, c.refusedBy = true, ""
			started = append(started, c)
		}
	}
	for name, holder := range refused {
		if c := f.conns[name]; c != nil && !c.serving && c.refusedBy != holder {
			c.refusedBy = holder
			refusals = append(refusals, refusal{c, holder})
		}
	}
	for name, id := range f.departed {
		if !ids[id] {
			delete(f.departed, name) // no registration of it is left: not renamed
		}
	}
	f.mu.Unlock()
	f.setSize()
	log := logf.FromContext(f.ctx)
	for _, c := range started {
		if !c.spec.Local {
			log.Info("Serving cluster", "cluster", c.spec.Name)
		}
		c.pokeProbe()
	}
	for _, r := range refusals {
		log.Info("Cluster refused: it is registered already", "cluster", r.c.spec.Name, "servedAs", r.holder)
		f.forgetSeries(r.c.spec.Name) // a refused registration is no cluster of the fleet
		if r.c.spec.Refused != nil {
			r.c.spec.Refused(r.holder)
		}
	}
}

// Successor reports, for a cluster name no longer registered, whether it
// was renamed: it left while another registration of the same cluster
// was engaged. It returns the name that serves the cluster now, or ""
// while that registration does not serve yet.
func (f *Fleet) Successor(name string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.departed[name]
	if !ok {
		return "", false
	}
	for _, c := range f.conns {
		if c.identity == id && c.serving {
			return c.spec.Name, true
		}
	}
	return "", true
}

// SameCluster reports whether the registrations named a and b are known
// to reach one cluster: engaged, or renamed (Successor), with the same
// identity.
func (f *Fleet) SameCluster(a, b string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	idA, idB := f.identityOf(a), f.identityOf(b)
	return idA != "" && idA == idB
}

func (f *Fleet) identityOf(name string) string {
	if c, ok := f.conns[name]; ok {
		return c.identity
	}
	return f.departed[name]
}

// Registrations lists the engaged registrations with their identity (""
// while unknown), whether they serve their cluster, and the registration
// a refused one was refused for.
func (f *Fleet) Registrations() []Registration {
	f.mu.RLock()
	out := make([]Registration, 0, len(f.conns))
	for _, c := range f.conns {
		out = append(out, Registration{Name: c.spec.Name, Identity: c.identity, Serving: c.serving, DuplicateOf: c.refusedBy})
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b Registration) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Registration is one engaged registration as Registrations lists it.
type Registration struct {
	Name, Identity string
	Serving        bool
	DuplicateOf    string
}

func (f *Fleet) forgetSeries(name string) {
	if f.opts.Metrics.Up != nil {
		f.opts.Metrics.Up.DeleteLabelValues(name)
	}
	if f.opts.Metrics.ProbeFailures != nil {
		f.opts.Metrics.ProbeFailures.DeleteLabelValues(name)
	}
}
