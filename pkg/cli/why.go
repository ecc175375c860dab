package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Answer is what why says: the one cause that matters, and its fix.
type Answer struct {
	Cause string `json:"cause"`
	// Fix is what to do; empty when nothing needs doing.
	Fix string `json:"fix,omitempty"`
}

func (o *options) whyCommand() *cobra.Command {
	var in string
	cmd := &cobra.Command{
		Use:   "why KIND/NAME [-n NAMESPACE] [--in NAMESPACE | --in CLUSTER/NAMESPACE]",
		Short: "Say why an object is not mirrored (into namespace --in), and how to fix it",
		Example: `  kubectl fleetmirror why secret/db-credentials -n platform
  kubectl fleetmirror why secret/db-credentials -n platform --in team-a
  kubectl fleetmirror why mirrorpolicy/share-db -n databases --in team-a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, m, ns, name, err := o.object(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if isPolicy(m) {
				lines, err := c.whyPolicy(cmd.Context(), ns, name, in)
				if err != nil {
					return err
				}
				fmt.Fprintln(o.streams.Out, strings.Join(lines, "\n"))
				return nil
			}
			a, err := c.Why(cmd.Context(), m, ns, name, in)
			if err != nil {
				return err
			}
			fmt.Fprintln(o.streams.Out, a.Cause)
			if a.Fix != "" {
				fmt.Fprintln(o.streams.Out, "Fix: "+a.Fix)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "Target namespace to explain, or CLUSTER/NAMESPACE (with --hub-context)")
	return cmd
}

// Why gives the first reason, in the agent's order of checks, that the
// source namespace/name is not mirrored (into namespace in, when given).
func (c *Client) Why(ctx context.Context, mapping *meta.RESTMapping, namespace, name, in string) (Answer, error) {
	r, err := c.Inspect(ctx, mapping, namespace, name)
	if err != nil {
		return Answer{}, err
	}
	return explain(r, c.Agent, in), nil
}

// explain answers why from a report. For a source named by a MirrorPolicy
// the answer says so, and its fixes edit the policy.
func explain(r *Report, agent Agent, in string) Answer {
	if r.Pull != nil {
		return explainPull(r)
	}
	a := explainSource(r, agent, in)
	if p := r.Source.Policy; p != "" {
		a.Cause = fmt.Sprintf("Named by MirrorPolicy %s, which asks for it what annotations would. %s", p, a.Cause)
	}
	if others := r.Source.OtherPolicies; len(others) > 0 {
		a.Cause += fmt.Sprintf(" MirrorPolicy %s names it too and does not mirror it: the first claim keeps a source (docs/policies.md).", strings.Join(others, ", "))
	}
	return a
}

// sourceArg is how the commands name the source s.
func sourceArg(s Source) string {
	return fmt.Sprintf("%s/%s -n %s", strings.ToLower(s.Kind), s.Name, s.Namespace)
}

// requestAt is where a source's request is edited, for the fixes: its own
// annotations, or the spec of the MirrorPolicy that names it.
type requestAt struct {
	obj    string // the source, as sourceArg names it
	policy string // the policy's "mirrorpolicy/NAME -n NS", if one names it
}

func requestOf(s Source) requestAt {
	at := requestAt{obj: sourceArg(s)}
	if s.Policy != "" {
		at.policy = fmt.Sprintf("mirrorpolicy/%s -n %s", s.Policy, s.Namespace)
	}
	return at
}

// field names where the annotation key (or the policy's spec field) is
// set.
func (at requestAt) field(key, specField string) string {
	if at.policy != "" {
		return fmt.Sprintf("spec.%s of %s", specField, at.policy)
	}
	return fmt.Sprintf("%s on %s", key, at.obj)
}

// setTargets is the command that sets the target namespaces.
func (at requestAt) setTargets() string {
	if at.policy != "" {
		return fmt.Sprintf("kubectl edit %s (spec.targetNamespaces)", at.policy)
	}
	return fmt.Sprintf("kubectl annotate --overwrite %s %s=NAMESPACE,...", at.obj, annotations.AnnotationTargetNamespaces)
}

// key names the annotation key (or the policy's spec field) itself, where
// the sentence already says which object it is on.
func (at requestAt) key(key, specField string) string {
	if at.policy != "" {
		return fmt.Sprintf("spec.%s of %s", specField, at.policy)
	}
	return key
}

// addTarget says how to name in among the targets.
func (at requestAt) addTarget(in string) string {
	return fmt.Sprintf("add %s to %s", in, at.field(annotations.AnnotationTargetNamespaces, "targetNamespaces"))
}

// explainSource answers why for a source from its report.
func explainSource(r *Report, agent Agent, in string) Answer {
	s := r.Source
	obj, at := sourceArg(s), requestOf(s)
	switch {
	case s.NotWatched != "":
		return Answer{
			Cause: fmt.Sprintf("Not mirrored: the agent does not watch %s: %s.", s.Kind, s.NotWatched),
			Fix:   "ask the operator to add the kind to the member agent's --resource-types (chart value config.resourceTypes) or take it off --deny-kinds",
		}
	case s.Refused != "":
		return Answer{
			Cause: fmt.Sprintf("Not mirrored: the agent refuses it as a source: %s.", s.Refused),
			Fix:   "mirror the original source instead; a mirror never becomes a source",
		}
	case len(s.UnknownKeys) > 0:
		k := s.UnknownKeys[0]
		fix := fmt.Sprintf("remove %s; fleetmirror does not know it", k)
		if want := ClosestKey(k); want != "" {
			fix = fmt.Sprintf("rename %s to %s", k, want)
		}
		return Answer{Cause: fmt.Sprintf("Not mirrored as meant: %s is not a fleetmirror key%s.", k, suggestion(k)), Fix: fix}
	case !s.Enabled:
		return Answer{
			Cause: fmt.Sprintf("Not mirrored: the object has no %s=true label, so the agent never reads it.", annotations.LabelEnabled),
			Fix:   fmt.Sprintf("kubectl label %s %s=true", obj, annotations.LabelEnabled),
		}
	case !s.Sync:
		return Answer{
			Cause: fmt.Sprintf("Not mirrored: %s is not \"true\"; mirroring is off.", annotations.AnnotationSync),
			Fix:   fmt.Sprintf("kubectl annotate --overwrite %s %s=true", obj, annotations.AnnotationSync),
		}
	case s.TransformError != "":
		return Answer{
			Cause: fmt.Sprintf("Not mirrored: the rules of %s are invalid, and nothing is written until they are fixed: %s", annotations.AnnotationTransform, s.TransformError),
			Fix:   "fix the rules (docs/annotations.md, Transforms)",
		}
	case len(s.Entries) == 0 && s.NamespaceSelector == "" && len(s.RemoteEntries) > 0 && in == "":
		return Answer{Cause: "Only remote entries: " + s.RemoteNote + "."}
	case len(s.Entries) == 0 && s.NamespaceSelector == "" && len(s.RemoteEntries) == 0:
		cause := fmt.Sprintf("Not mirrored: %s names no namespace.", annotations.AnnotationTargetNamespaces)
		if len(s.Problems) > 0 {
			cause += " " + strings.Join(s.Problems, "; ")
		}
		return Answer{Cause: cause, Fix: at.setTargets()}
	case in != "":
		return explainIn(r, agent, at, in)
	}
	return summary(r)
}

// explainIn says what happens to the source in namespace in: NS of the
// source's own cluster, or CLUSTER/NS (rows of --hub-context). A decision
// about a whole cluster (unreachable, not selected) answers for each of its
// namespaces.
func explainIn(r *Report, agent Agent, at requestAt, in string) Answer {
	selector := r.Source.NamespaceSelector
	cluster, ns, remote := strings.Cut(in, "/")
	if !remote {
		cluster, ns = agent.Options.ClusterName, in
	}
	var whole *Target
	for i, t := range r.Targets {
		if t.Cluster == cluster && t.Namespace == "" {
			whole = &r.Targets[i]
		}
	}
	if whole != nil {
		r = &Report{Targets: []Target{{Cluster: cluster, Namespace: ns, State: whole.State, Reason: whole.Reason}}}
	}
	for _, t := range r.Targets {
		if t.Cluster != cluster || t.Namespace != ns {
			continue
		}
		if t.State != Excluded {
			if t.State == InSync {
				return Answer{Cause: fmt.Sprintf("It is mirrored there: %s holds the source's content (InSync).", in)}
			}
			return Answer{Cause: fmt.Sprintf("%s is a target; its state is %s: %s.", in, t.State, t.Reason), Fix: stateFix(t.State, in)}
		}
		reason, msg, _ := strings.Cut(t.Reason, ": ")
		fix := decisionFix(targets.Reason(reason), agent, at, in)
		if targets.Reason(reason) == targets.NotMatched && strings.Contains(msg, annotations.AnnotationTargetNamespaceSelector) {
			fix = selectFix(at, in, ns, selector)
		}
		return Answer{Cause: fmt.Sprintf("Not mirrored into %s: %s.", in, msg), Fix: fix}
	}
	return Answer{
		Cause: fmt.Sprintf("Not mirrored into %s: the namespace does not exist.", in),
		Fix:   fmt.Sprintf("kubectl create namespace %s (and name it in %s)", in, at.key(annotations.AnnotationTargetNamespaces, "targetNamespaces")),
	}
}

func decisionFix(reason targets.Reason, agent Agent, at requestAt, in string) string {
	switch reason {
	case targets.ExcludedNamespace:
		return fmt.Sprintf("the operator's policy decides this: the member agent's --excluded-namespaces / --included-namespaces (%s)", agent.Describe())
	case targets.OptedOut:
		return fmt.Sprintf("kubectl label namespace %s %s- (if its owners agree)", in, annotations.LabelAllowMirrors)
	case targets.NotLabeled:
		return fmt.Sprintf("kubectl label namespace %s %s=true", in, annotations.LabelAllowMirrors)
	case targets.NotMatched:
		return at.addTarget(in)
	case targets.MissingNamespace:
		return "kubectl create namespace " + in
	case targets.OverLimit:
		return fmt.Sprintf("raise %s (up to the agent's --max-targets, %d), or target fewer namespaces", at.field(annotations.AnnotationMaxTargets, "maxTargets"), agent.Options.MaxTargets)
	case targets.SourceNamespace:
		return "none: the source itself is there"
	case targets.Terminating:
		return "none: the namespace is being deleted"
	}
	return ""
}

// selectFix says how to reach in (namespace ns) for a source whose
// namespace selector does not select it: name it, or label it so that the
// selector does, with the labels to set when the selector only asks for
// values.
func selectFix(at requestAt, in, ns, selector string) string {
	named := at.addTarget(in)
	selField := at.key(annotations.AnnotationTargetNamespaceSelector, "targetNamespaceSelector")
	sel, err := labels.Parse(selector)
	if err != nil || selector == "" {
		return fmt.Sprintf("fix %s, which selects nothing while it is invalid, or %s", selField, named)
	}
	reqs, _ := sel.Requirements()
	set := map[string]string{}
	for _, r := range reqs {
		values := r.ValuesUnsorted()
		_, twice := set[r.Key()]
		if twice || len(values) == 0 || r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals && r.Operator() != selection.In {
			// Absent labels, other values, existence: no one command says it.
			return fmt.Sprintf("%s, or label namespace %s so that %s %q selects it", named, ns, selField, selector)
		}
		set[r.Key()] = values[0]
	}
	var args []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		args = append(args, k+"="+set[k])
	}
	return fmt.Sprintf("kubectl label namespace %s %s (if its owners agree), or %s", ns, strings.Join(args, " "), named)
}

func stateFix(s State, in string) string {
	switch s {
	case Conflict:
		return fmt.Sprintf("delete or rename the object in %s that holds the name, if it is not needed", in)
	case Missing, Drifted:
		return "the agent corrects it when it next reconciles the source; if it does not, check that the agent runs and its Events on the source"
	case Unreachable:
		return "the hub cannot reach that cluster: check its registration Secret (credentials expire) and the network path from the hub (docs/runbooks.md, FleetmirrorClusterUnreachable)"
	}
	return ""
}

// summary answers why without --in: every target, counted by state.
func summary(r *Report) Answer {
	counts := Count(r.Targets)
	targeted := len(r.Targets) - counts[Excluded]
	cause := fmt.Sprintf("Mirrored into %d namespaces: %s.", targeted, countLine(counts))
	if counts[InSync] == targeted && targeted > 0 {
		return Answer{Cause: cause}
	}
	if targeted == 0 {
		what := strings.Join(r.Source.Entries, ", ")
		if sel := r.Source.NamespaceSelector; sel != "" {
			what = strings.TrimPrefix(what+" or the selector "+strconv.Quote(sel), " or ")
		}
		cause = fmt.Sprintf("Not mirrored: no namespace matches %s; status lists why each was dropped.", what)
	}
	return Answer{Cause: cause, Fix: "ask about one namespace with --in NAMESPACE"}
}

// Count counts targets by state.
func Count(ts []Target) map[State]int {
	out := map[State]int{}
	for _, t := range ts {
		out[t.State]++
	}
	return out
}

func countLine(counts map[State]int) string {
	var parts []string
	for _, s := range States {
		if s != Excluded && counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
