package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// Listing is what list prints: one line per source.
type Listing struct {
	Sources []Line `json:"sources"`
	// HubClusters are the hub's clusters, with --hub-context.
	HubClusters []HubCluster `json:"hubClusters,omitempty"`
}

// Line is one source with its targets counted by state.
type Line struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Targets counts the namespaces the source is mirrored into (every
	// state but Excluded).
	Targets int           `json:"targets"`
	States  map[State]int `json:"states"`
}

func (o *options) listCommand() *cobra.Command {
	var (
		output        string
		allNamespaces bool
	)
	cmd := &cobra.Command{
		Use:   "list [-A | -n NAMESPACE] [-o json]",
		Short: "List the sources (label fleetmirror.io/enabled=true) of the kinds the agent mirrors, with their targets by state",
		Example: `  kubectl fleetmirror list -A
  kubectl fleetmirror list -n platform -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			ns := ""
			if !allNamespaces {
				var err error
				if ns, err = o.namespace(); err != nil {
					return err
				}
			}
			c, err := o.client(cmd.Context())
			if err != nil {
				return err
			}
			l, err := c.List(cmd.Context(), ns)
			if err != nil {
				return err
			}
			if c.Hub != nil {
				l.HubClusters = c.Hub.Summary()
			}
			return o.print(output, l, func(w io.Writer) error { return printListing(w, l) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: empty for text, or json")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List sources in every namespace")
	return cmd
}

// List reports every source in namespace ("" for all) of the kinds the
// agent mirrors.
func (c *Client) List(ctx context.Context, namespace string) (*Listing, error) {
	nss, err := c.namespaces(ctx)
	if err != nil {
		return nil, err
	}
	l := &Listing{Sources: []Line{}}
	for _, gvk := range c.Agent.Kinds() {
		m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("kind %s of the agent: %w", gvk, err)
		}
		list, err := c.Dynamic.Resource(m.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: annotations.LabelEnabled + "=true"})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			src := &list.Items[i]
			r, err := c.report(ctx, m, src, nss)
			if err != nil {
				return nil, err
			}
			counts := Count(r.Targets)
			l.Sources = append(l.Sources, Line{Kind: gvk.Kind, Namespace: src.GetNamespace(), Name: src.GetName(),
				Targets: len(r.Targets) - counts[Excluded], States: counts})
		}
	}
	return l, nil
}

func printListing(w io.Writer, l *Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "NAMESPACE\tKIND\tNAME\tTARGETS")
	for _, s := range States {
		fmt.Fprintf(tw, "\t%s", s)
	}
	fmt.Fprintln(tw)
	for _, line := range l.Sources {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d", line.Namespace, line.Kind, line.Name, line.Targets)
		for _, s := range States {
			fmt.Fprintf(tw, "\t%d", line.States[s])
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printHubClusters(w, l.HubClusters)
}

// printHubClusters writes the hub's clusters, when there are any.
func printHubClusters(w io.Writer, hcs []HubCluster) error {
	if len(hcs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nHub clusters:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tIDENTITY\tSTATE")
	for _, hc := range hcs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", hc.Name, orNone(hc.Identity), hc.State)
	}
	return tw.Flush()
}
