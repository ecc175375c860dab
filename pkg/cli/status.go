package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

func (o *options) statusCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status KIND/NAME [-n NAMESPACE] [-o json]",
		Short: "Show a source's settings, the state of every target considered, and its recent Events (of a pull mirror: its source and state; of a MirrorPolicy: its status and each of its sources)",
		Example: `  kubectl fleetmirror status secret/db-credentials -n platform
  kubectl fleetmirror status cm/app-config -n platform -o json
  kubectl fleetmirror status mirrorpolicy/share-db -n databases`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, m, ns, name, err := o.object(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if isPolicy(m) {
				r, err := c.InspectPolicy(cmd.Context(), ns, name)
				if err != nil {
					return err
				}
				return o.print(output, r, func(w io.Writer) error { return printPolicyReport(w, r) })
			}
			r, err := c.Inspect(cmd.Context(), m, ns, name)
			if err != nil {
				return err
			}
			return o.print(output, r, func(w io.Writer) error { return printReport(w, r) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: empty for text, or json")
	return cmd
}

// printReport writes r for people. Namespaces that match no entry are
// counted, not listed; -o json lists them.
func printReport(w io.Writer, r *Report) error {
	if r.Pull != nil {
		return printPull(w, r)
	}
	s := r.Source
	var b strings.Builder
	fmt.Fprintf(&b, "Source:      %s %s/%s (%s)\n", s.Kind, s.Namespace, s.Name, s.APIVersion)
	if s.Policy != "" {
		fmt.Fprintf(&b, "Policy:      MirrorPolicy %s (the object carries no fleetmirror keys; the policy's spec is its request)\n", s.Policy)
	}
	if len(s.OtherPolicies) > 0 {
		fmt.Fprintf(&b, "Also named:  MirrorPolicy %s, which do not mirror it (the first claim keeps it)\n", strings.Join(s.OtherPolicies, ", "))
	}
	fmt.Fprintf(&b, "Enabled:     %t\n", s.Enabled)
	fmt.Fprintf(&b, "Sync:        %t\n", s.Sync)
	fmt.Fprintf(&b, "Entries:     %s\n", orNone(strings.Join(s.Entries, ", ")))
	if len(s.RemoteEntries) > 0 {
		fmt.Fprintf(&b, "Remote:      %s\n", strings.Join(s.RemoteEntries, ", "))
		fmt.Fprintf(&b, "             %s\n", s.RemoteNote)
	}
	if s.NamespaceSelector != "" {
		fmt.Fprintf(&b, "NS selector: %s\n", s.NamespaceSelector)
	}
	if s.ClusterSelector != "" {
		fmt.Fprintf(&b, "Selector:    %s\n", s.ClusterSelector)
	}
	if s.MaxTargets > 0 {
		fmt.Fprintf(&b, "Max targets: %d\n", s.MaxTargets)
	}
	fmt.Fprintf(&b, "Transform:   %s\n", s.Transform)
	if s.TransformError != "" {
		fmt.Fprintf(&b, "             %s\n", s.TransformError)
	}
	for _, line := range []struct{ label, text string }{
		{"Refused", s.Refused}, {"Not watched", s.NotWatched}, {"Status", s.Status},
	} {
		if line.text != "" {
			fmt.Fprintf(&b, "%-12s %s\n", line.label+":", line.text)
		}
	}
	for _, p := range s.Problems {
		fmt.Fprintf(&b, "Problem:     %s\n", p)
	}
	for _, k := range s.UnknownKeys {
		fmt.Fprintf(&b, "Unknown key: %s%s\n", k, suggestion(k))
	}
	fmt.Fprintf(&b, "Agent:       %s\n\n", s.Agent)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tNAMESPACE\tSTATE\tREASON")
	unmatched := 0
	for _, t := range r.Targets {
		if t.State == Excluded && strings.HasPrefix(t.Reason, string(targets.NotMatched)+":") {
			unmatched++
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Cluster, t.Namespace, t.State, t.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if unmatched > 0 {
		what := "match no entry"
		if s.NamespaceSelector != "" {
			what = "match no entry and are not selected"
		}
		fmt.Fprintf(w, "(%d other namespaces %s; -o json lists them)\n", unmatched, what)
	}
	if err := printHubClusters(w, r.HubClusters); err != nil {
		return err
	}
	return printEvents(w, s.Events)
}

// printEvents writes the recent Events of a report's object.
func printEvents(w io.Writer, events []Event) error {
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "\nEvents: none")
		return err
	}
	fmt.Fprintln(w, "\nEvents:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tCOUNT\tMESSAGE")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.LastSeen.UTC().Format(time.RFC3339), e.Type, e.Reason, e.Count, e.Message)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func suggestion(key string) string {
	if k := ClosestKey(key); k != "" {
		return fmt.Sprintf(" (did you mean %s?)", k)
	}
	return ""
}
