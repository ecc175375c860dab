package cli

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
)

// ParseObjectArg splits a KIND/NAME argument. KIND is a resource name
// (secret, secrets, cm), or a Kind.version[.group] as the agent's
// --resource-types takes it; NAME must be a valid object name.
func ParseObjectArg(arg string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(arg, "/")
	switch {
	case !ok:
		return "", "", fmt.Errorf("%q: want KIND/NAME, e.g. secret/db-credentials", arg)
	case kind == "" || name == "":
		return "", "", fmt.Errorf("%q: KIND and NAME may not be empty; want KIND/NAME", arg)
	case strings.Contains(name, "/"):
		return "", "", fmt.Errorf("%q: more than one '/'; want KIND/NAME", arg)
	case strings.ContainsAny(kind, " \t\n,"):
		return "", "", fmt.Errorf("%q: KIND %q has spaces or commas", arg, kind)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", fmt.Errorf("%q: NAME is not a valid object name: %s", arg, strings.Join(errs, "; "))
	}
	return kind, name, nil
}

// ResolveKind finds the kind KIND names in the cluster's discovery data:
// a resource name, plural, singular or short name (secret, secrets, cm,
// deployments.apps), or a Kind.version[.group] (Secret.v1,
// Ingress.v1.networking.k8s.io), parsed as the agent parses
// --resource-types.
func ResolveKind(mapper meta.RESTMapper, kind string) (*meta.RESTMapping, error) {
	if gvr, gr := schema.ParseResourceArg(strings.ToLower(kind)); gvr != nil || gr.Resource != "" {
		candidates := []schema.GroupVersionResource{gr.WithVersion("")}
		if gvr != nil {
			candidates = append([]schema.GroupVersionResource{*gvr}, candidates...)
		}
		for _, c := range candidates {
			if gvk, err := mapper.KindFor(c); err == nil {
				return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			}
		}
	}
	if strings.Contains(kind, ".") {
		if gvks, err := agent.ParseResourceTypes(kind); err == nil && len(gvks) == 1 {
			if m, err := mapper.RESTMapping(gvks[0].GroupKind(), gvks[0].Version); err == nil {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("the cluster has no kind %q (try a resource name such as secret or configmap, or Kind.version[.group] such as Secret.v1)", kind)
}
