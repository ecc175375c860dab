package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetmirror/fleetmirror/pkg/version"
)

// DefaultAgentNamespace is where the member chart is installed by default.
const DefaultAgentNamespace = "fleetmirror-system"

// options are the flags every command shares.
type options struct {
	config         *genericclioptions.ConfigFlags
	agentNamespace string
	// hubContext and hubNamespace locate the hub (--hub-context).
	hubContext, hubNamespace string
	streams                  genericiooptions.IOStreams
}

// NewCommand returns the kubectl-fleetmirror command with its subcommands
// status, why, list, register-cluster, unregister-cluster, migrate and
// cleanup, writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:           "kubectl-fleetmirror",
		Short:         "Explain what the fleetmirror member agent does with annotated objects",
		Long:          "kubectl fleetmirror reports on sources of the fleetmirror member agent, computed with the agent's own\npipeline and options (read from its Deployment in --agent-namespace). status, why and list never write;\nregister-cluster and unregister-cluster register member clusters with the hub; migrate translates the\nannotations of kubernetes-reflector, kubernetes-replicator and kubemirror; cleanup removes what the agents\nleft in a cluster whose agent is gone.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String("kubectl-fleetmirror"),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.agentNamespace, "agent-namespace", DefaultAgentNamespace, "Namespace of the member agent's Deployment, whose arguments give the policy")
	root.PersistentFlags().StringVar(&o.hubContext, "hub-context", "", "Context (in the same kubeconfig) of the hub's cluster: CLUSTER/NS entries are then resolved as the hub does, one row per target, from the hub's Deployment options and registration Secrets")
	root.PersistentFlags().StringVar(&o.hubNamespace, "hub-agent-namespace", DefaultAgentNamespace, "Namespace of the hub's Deployment in the hub's cluster, with --hub-context")
	root.AddCommand(o.statusCommand(), o.whyCommand(), o.listCommand(), o.registerCommand(), o.unregisterCommand(), o.migrateCommand(), o.cleanupCommand())
	return root
}

// client connects to the cluster of the flags and reads the agent's options.
func (o *options) client(ctx context.Context) (*Client, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	a, err := LoadAgent(ctx, kube, o.agentNamespace)
	if err != nil {
		return nil, err
	}
	c := &Client{Dynamic: dyn, Kube: kube, Mapper: mapper, Agent: a, Now: time.Now}
	if o.hubContext != "" {
		raw, err := o.config.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, err
		}
		hubCfg, err := clientcmd.NewNonInteractiveClientConfig(raw, o.hubContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("--hub-context %s: %w", o.hubContext, err)
		}
		if c.Hub, err = LoadHub(ctx, hubCfg, o.hubNamespace); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// namespace is the namespace of -n, or of the kubeconfig's context.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// object resolves a KIND/NAME argument.
func (o *options) object(ctx context.Context, arg string) (*Client, *meta.RESTMapping, string, string, error) {
	kind, name, err := ParseObjectArg(arg)
	if err != nil {
		return nil, nil, "", "", err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, nil, "", "", err
	}
	c, err := o.client(ctx)
	if err != nil {
		return nil, nil, "", "", err
	}
	m, err := ResolveKind(c.Mapper, kind)
	if err != nil {
		return nil, nil, "", "", err
	}
	return c, m, ns, name, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// print writes v as JSON for -o json, otherwise with text.
func (o *options) print(output string, v any, text func(io.Writer) error) error {
	if output == "json" {
		return writeJSON(o.streams.Out, v)
	}
	return text(o.streams.Out)
}

func checkOutput(output string) error {
	if output != "" && output != "json" {
		return fmt.Errorf("--output %q: only json is supported", output)
	}
	return nil
}
