package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/policy"
)

// PolicyReport is what status says of a MirrorPolicy: the status its
// agents wrote, and the report of every object it names that exists.
type PolicyReport struct {
	Namespace string                      `json:"namespace"`
	Name      string                      `json:"name"`
	Spec      v1alpha1.MirrorPolicySpec   `json:"spec"`
	Status    v1alpha1.MirrorPolicyStatus `json:"status"`
	// Invalid says why the spec names nothing.
	Invalid string    `json:"invalid,omitempty"`
	Sources []*Report `json:"sources"`
}

// isPolicy reports whether m is the mapping of MirrorPolicies.
func isPolicy(m *meta.RESTMapping) bool {
	return m.GroupVersionKind.GroupKind() == v1alpha1.GroupVersion.WithKind("MirrorPolicy").GroupKind()
}

// InspectPolicy reads the MirrorPolicy namespace/name and reports on it and
// on each of its sources, as status reports on a source.
func (c *Client) InspectPolicy(ctx context.Context, namespace, name string) (*PolicyReport, error) {
	u, err := c.Dynamic.Resource(policiesGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p := &v1alpha1.MirrorPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return nil, err
	}
	r := &PolicyReport{Namespace: namespace, Name: name, Spec: p.Spec, Status: p.Status, Sources: []*Report{}}
	gvk, sel, err := policy.Source(&p.Spec)
	if err != nil {
		r.Invalid = err.Error()
		return r, nil
	}
	mapping, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		r.Invalid = fmt.Sprintf("the cluster does not serve %s: %v", gvk, err)
		return r, nil
	}
	var names []string
	if sel != nil {
		list, err := c.Dynamic.Resource(mapping.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, err
		}
		for _, item := range list.Items {
			names = append(names, item.GetName())
		}
	} else {
		names = p.Spec.Source.Names
	}
	for _, n := range names {
		src, err := c.Inspect(ctx, mapping, namespace, n)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r.Sources = append(r.Sources, src)
	}
	return r, nil
}

// printPolicyReport writes r for people: the policy's conditions and
// counts, then each source as status prints one.
func printPolicyReport(w io.Writer, r *PolicyReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "MirrorPolicy: %s/%s\n", r.Namespace, r.Name)
	what := strings.Join(r.Spec.Source.Names, ", ")
	if s := r.Spec.Source.Selector; s != nil {
		what = "selector " + metav1.FormatLabelSelector(s)
	}
	fmt.Fprintf(&b, "Names:        %s %s\n", r.Spec.Source.Kind, what)
	if r.Invalid != "" {
		fmt.Fprintf(&b, "Invalid:      %s\n", r.Invalid)
	}
	st := r.Status
	fmt.Fprintf(&b, "Counts:       %d sources, %d mirrors in place, %d conflicts; in other clusters %d mirrors, %d conflicts\n",
		st.Sources, st.TargetsSynced, st.Conflicts, st.RemoteTargetsSynced, st.RemoteConflicts)
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionDegraded, v1alpha1.ConditionRemoteReady, v1alpha1.ConditionRemoteDegraded} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
			fmt.Fprintf(&b, "%-14s%s (%s) %s\n", typ+":", c.Status, c.Reason, c.Message)
		}
	}
	if len(r.Sources) == 0 {
		fmt.Fprintf(&b, "Sources:      none exists\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, s := range r.Sources {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := printReport(w, s); err != nil {
			return err
		}
	}
	return nil
}

// whyPolicy answers why for each source of the policy namespace/name.
func (c *Client) whyPolicy(ctx context.Context, namespace, name, in string) ([]string, error) {
	r, err := c.InspectPolicy(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if r.Invalid != "" {
		return []string{"The policy names nothing: " + r.Invalid + "."}, nil
	}
	if len(r.Sources) == 0 {
		return []string{fmt.Sprintf("Nothing to mirror: no %s the policy names exists in %s.", r.Spec.Source.Kind, namespace)}, nil
	}
	var out []string
	for _, s := range r.Sources {
		a := explain(s, c.Agent, in)
		line := fmt.Sprintf("%s: %s", sourceArg(s.Source), a.Cause)
		if a.Fix != "" {
			line += "\n  Fix: " + a.Fix
		}
		out = append(out, line)
	}
	return out, nil
}
