package cli

import (
	"context"
	"fmt"
	"path"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/providers"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// hubBinary is the hub's binary and chart name.
const hubBinary = "fleetmirror-hub"

// remoteTimeout bounds the reads of one registered cluster: one that does
// not answer within it is reported Unreachable.
const remoteTimeout = 5 * time.Second

// Hub is the hub as the plugin sees it with --hub-context: its options, read
// from its Deployment, and the clusters it would engage, found with its own
// provider.
type Hub struct {
	Options hub.Options
	// From names the Deployment the options were read from; empty when
	// none was found and Options are the hub's defaults.
	From     string
	Clusters []RemoteCluster
}

// RemoteCluster is one cluster of the hub's fleet.
type RemoteCluster struct {
	Name   string
	Labels map[string]string
	// Excluded namespaces are never targeted there (the hub's registration
	// namespace in its own cluster), for the reason ExcludedBecause gives.
	Excluded        glob.List
	ExcludedBecause string
	Dynamic         dynamic.Interface
	Mapper          meta.RESTMapper
	Namespaces      []targets.Namespace
	// Err says why the cluster could not be read: it is Unreachable.
	Err error
	// Identity is the cluster's identity (the UID of its kube-system
	// Namespace), "" when it could not be read.
	Identity string
	// DuplicateOf names the registration that keeps the cluster when this
	// one reaches a cluster registered already: the hub refuses it and
	// leaves it out of every target.
	DuplicateOf string
	// since and local order the registrations as the hub does (fleet.Award).
	since time.Time
	local bool
}

// HubCluster is one cluster of the hub's fleet as list and status report
// it with --hub-context.
type HubCluster struct {
	Name string `json:"name"`
	// Identity is the UID of the cluster's kube-system Namespace: two
	// registrations with one identity reach one cluster.
	Identity string `json:"identity,omitempty"`
	// State is "serving", "duplicate of NAME" (refused by the hub until
	// NAME goes away) or "unreachable: ERROR".
	State string `json:"state"`
}

// Summary lists the hub's clusters with their identity and state.
func (h *Hub) Summary() []HubCluster {
	out := make([]HubCluster, 0, len(h.Clusters))
	for _, rc := range h.Clusters {
		state := "serving"
		switch {
		case rc.DuplicateOf != "":
			state = "duplicate of " + rc.DuplicateOf
		case rc.Err != nil:
			state = "unreachable: " + rc.Err.Error()
		}
		out = append(out, HubCluster{Name: rc.Name, Identity: rc.Identity, State: state})
	}
	return out
}

// awardClusters marks the registrations the hub refuses for reaching a
// cluster another one keeps, decided as the hub decides at its start
// (fleet.Award). The hub keeps a cluster with the registration serving
// it, even a younger one, until it goes away: a hub that ran before the
// older registration existed may differ.
func awardClusters(rcs []RemoteCluster) {
	claims := make([]fleet.Claim, len(rcs))
	for i, rc := range rcs {
		claims[i] = fleet.Claim{Name: rc.Name, Local: rc.local, Since: rc.since, Identity: rc.Identity, Tried: true}
	}
	_, refused := fleet.Award(claims)
	for i := range rcs {
		rcs[i].DuplicateOf = refused[rcs[i].Name]
	}
}

// LoadHub reads the hub's options from its Deployment in namespace of the
// hub's cluster (cfg), and its fleet: the hub's own cluster and every
// cluster its registration Secrets register, refused ones left out exactly
// as the hub leaves them out. It writes nothing.
func LoadHub(ctx context.Context, cfg *rest.Config, namespace string) (*Hub, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the hub's Deployment in %s: %w", namespace, err)
	}
	h, err := hubFrom(list.Items, namespace)
	if err != nil {
		return nil, err
	}
	o := h.Options
	specs := []fleet.Spec{{Name: o.ClusterName, Config: cfg, ExcludedNamespaces: glob.List{glob.MustParse(o.ClusterSecretsNamespace)},
		ExcludedBecause: "it holds the hub's cluster registration Secrets"}}
	registered, err := registrations(ctx, &providers.KubeconfigSecrets{Config: cfg, Namespace: o.ClusterSecretsNamespace,
		Reserved: o.ClusterName, AllowPlugins: o.AllowKubeconfigPlugins, Recorder: discardEvents{}})
	if err != nil {
		return nil, err
	}
	specs[0].Local = true
	for _, s := range append(specs, registered...) {
		h.Clusters = append(h.Clusters, connect(ctx, s))
	}
	awardClusters(h.Clusters)
	return h, nil
}

// hubFrom returns the options of the first hub among deployments, parsed
// with the hub's own parser, or its defaults.
func hubFrom(deployments []appsv1.Deployment, namespace string) (*Hub, error) {
	for i := range deployments {
		d := &deployments[i]
		c := container(d, hubBinary)
		if c == nil {
			continue
		}
		o, err := hub.ParseOptions(containerArgs(d, c)...)
		if err != nil {
			return nil, fmt.Errorf("parsing the arguments of Deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		return &Hub{Options: o, From: d.Namespace + "/" + d.Name}, nil
	}
	o, err := hub.ParseOptions("--namespace=" + namespace)
	return &Hub{Options: o}, err
}

// registrations runs the hub's registration provider until it has listed
// the clusters it registers, and returns them.
func registrations(ctx context.Context, p fleet.Provider) ([]fleet.Spec, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := &collector{listed: cancel}
	if err := p.Run(ctx, c); err != nil {
		return nil, err
	}
	if !c.done {
		return nil, fmt.Errorf("reading the hub's registration Secrets: %w", ctx.Err())
	}
	return c.specs, nil
}

// collector is a fleet.Engager that only writes down what it is given.
type collector struct {
	specs  []fleet.Spec
	done   bool
	listed context.CancelFunc
}

func (c *collector) Engage(_ context.Context, s fleet.Spec) error {
	c.specs = append(c.specs, s)
	return nil
}

func (c *collector) Relabel(string, map[string]string) {}

func (c *collector) Listed() {
	c.done = true
	c.listed()
}

// discardEvents is the provider's recorder here: the plugin never writes,
// not even the Events on refused registrations (the hub writes those).
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, string, string, string, ...any) {}

// connect reads what target resolution needs of one cluster.
func connect(ctx context.Context, s fleet.Spec) RemoteCluster {
	rc := RemoteCluster{Name: s.Name, Labels: s.Labels, Excluded: s.ExcludedNamespaces, ExcludedBecause: s.ExcludedBecause,
		since: s.Since, local: s.Local}
	cfg := rest.CopyConfig(s.Config)
	cfg.Timeout = remoteTimeout
	kube, err := kubernetes.NewForConfig(cfg)
	if err == nil {
		rc.Dynamic, err = dynamic.NewForConfig(cfg)
	}
	var disco *discovery.DiscoveryClient
	if err == nil {
		disco, err = discovery.NewDiscoveryClientForConfig(cfg)
	}
	if err != nil {
		rc.Err = err
		return rc
	}
	rc.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		rc.Err = err
		return rc
	}
	for _, ns := range list.Items {
		rc.Namespaces = append(rc.Namespaces, targets.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: ns.DeletionTimestamp != nil})
		if ns.Name == clusters.IdentityNamespace {
			rc.Identity = string(ns.UID)
		}
	}
	return rc
}

// containerArgs are the arguments the agent in container c of d runs with.
// POD_NAMESPACE is the Deployment's namespace in the charts; the
// container's own --namespace, when given, comes later and wins.
func containerArgs(d *appsv1.Deployment, c *corev1.Container) []string {
	args := []string{"--namespace=" + d.Namespace}
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	return append(args, c.Args...)
}

// container returns the container of d that runs binary: the one whose
// command is it, or the first one of a Deployment labelled as its chart.
func container(d *appsv1.Deployment, binary string) *corev1.Container {
	cs := d.Spec.Template.Spec.Containers
	for i := range cs {
		if len(cs[i].Command) > 0 && path.Base(cs[i].Command[0]) == binary {
			return &cs[i]
		}
	}
	if d.Labels["app.kubernetes.io/name"] == binary && len(cs) > 0 {
		return &cs[0]
	}
	return nil
}
