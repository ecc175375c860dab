package cli

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmirror/fleetmirror/pkg/member"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// memberBinary is the member agent's binary, as the chart runs it
// (/usr/local/bin/fleetmirror-member) and the chart's name, as its
// app.kubernetes.io/name label says.
const memberBinary = "fleetmirror-member"

// Agent is the member agent's configuration, as the plugin found it.
type Agent struct {
	// Options are the agent's parsed options.
	Options member.Options
	// From names the Deployment they were read from: namespace/name; empty
	// when none was found and Options are the agent's defaults.
	From string
}

// Describe says where the options come from, in words.
func (a Agent) Describe() string {
	if a.From == "" {
		return "no member agent Deployment found; using the agent's default options"
	}
	return "options of the member agent Deployment " + a.From
}

// Policy is the agent's target policy, as it passes it to targets.Plan.
func (a Agent) Policy() targets.Policy {
	o := a.Options
	return targets.Policy{Included: o.IncludedNamespaces, Excluded: o.ExcludedNamespaces, MaxTargets: o.MaxTargets}
}

// Watches says whether the agent mirrors gvk, and if not, why.
func (a Agent) Watches(gvk schema.GroupVersionKind) (bool, string) {
	ko := a.Options.KindOptions()
	if len(ko.Explicit) > 0 {
		if slices.Contains(ko.Explicit, gvk) {
			return true, ""
		}
		return false, fmt.Sprintf("the agent mirrors only the kinds of its --resource-types (%s)", gvkList(ko.Explicit))
	}
	if slices.Contains(ko.Deny, gvk.GroupKind()) {
		return false, fmt.Sprintf("%s is on the agent's deny list (built-in, or --deny-kinds)", gvk.GroupKind())
	}
	return true, ""
}

// Kinds are the kinds list looks for sources of: the agent's
// --resource-types, or Secrets and ConfigMaps when it discovers its kinds.
func (a Agent) Kinds() []schema.GroupVersionKind {
	if len(a.Options.ResourceTypes) > 0 {
		return a.Options.ResourceTypes
	}
	return []schema.GroupVersionKind{{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ConfigMap"}}
}

func gvkList(gvks []schema.GroupVersionKind) string {
	out := ""
	for i, g := range gvks {
		if i > 0 {
			out += ","
		}
		out += g.Kind + "." + g.Version
		if g.Group != "" {
			out += "." + g.Group
		}
	}
	return out
}

// LoadAgent reads the member agent's options from its Deployment in
// namespace, or returns the agent's defaults when there is none.
func LoadAgent(ctx context.Context, kube kubernetes.Interface, namespace string) (Agent, error) {
	list, err := kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Agent{}, fmt.Errorf("reading the member agent's Deployment in %s: %w", namespace, err)
	}
	return AgentFrom(list.Items)
}

// AgentFrom returns the options of the first member agent among
// deployments, parsed with the agent's own parser, or its defaults when
// none is.
func AgentFrom(deployments []appsv1.Deployment) (Agent, error) {
	for i := range deployments {
		d := &deployments[i]
		c := container(d, memberBinary)
		if c == nil {
			continue
		}
		o, err := member.ParseOptions(containerArgs(d, c)...)
		if err != nil {
			return Agent{}, fmt.Errorf("parsing the arguments of Deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		return Agent{Options: o, From: d.Namespace + "/" + d.Name}, nil
	}
	o, err := member.ParseOptions()
	return Agent{Options: o}, err
}
