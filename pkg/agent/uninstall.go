package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/leader"
	"github.com/fleetmirror/fleetmirror/pkg/version"
)

// uninstall is the uninstall mode (--uninstall). A finalizer outlives the
// agent that holds it: once the agent is gone, deleting one of its sources,
// or their namespace, would hang. So the writer going away takes back what
// it put into the fleet: Pipeline.Uninstall, within UninstallTimeout, and
// under the agent's own leader election Lease, so that a replica still
// winding down writes nothing after the cleanup: it holds the Lease until
// it has stopped writing, then deletes it: the agent is gone, and a Lease
// left behind would be one more object of ours in the user's namespace (its
// RBAC deleted already or refusing the delete, it steps down or lets the
// Lease expire instead). The Leases of a sharded hub's replicas go too, once
// the cleanup is done (Writer.AwaitOthers). It serves no endpoints.
// It logs one summary line, and fails with one line naming every cluster
// it could not finish, what is left there and how to finish.
func (o *Options) uninstall(ctx context.Context, cfg *rest.Config, p *controller.Pipeline, w Writer) error {
	log := logf.FromContext(ctx)
	log.Info("Uninstalling", "writer", w.Name, "cluster", o.ClusterName, "keepMirrors", o.UninstallKeepMirrors,
		"timeout", o.UninstallTimeout.String(), "version", version.Version, "revision", version.Revision)
	ctx, cancel := context.WithTimeout(ctx, o.UninstallTimeout)
	defer cancel()
	var report []controller.ClusterCleanup
	var err error
	ran := false
	clean := func(ctx context.Context) {
		ran = true
		var forget func(context.Context) error
		if w.AwaitOthers != nil {
			if forget, err = w.AwaitOthers(ctx, cfg); err != nil {
				return
			}
		}
		report, err = p.Uninstall(ctx, controller.UninstallOptions{KeepMirrors: o.UninstallKeepMirrors})
		if w.uninstalled != nil {
			err = errors.Join(err, w.uninstalled(ctx))
		}
		if forget != nil {
			err = errors.Join(err, forget(ctx))
		}
	}
	if !o.LeaderElect {
		clean(ctx)
		return o.uninstalled(ctx, w, report, err)
	}
	leading, done := context.WithCancel(ctx)
	defer done()
	// leader.Run returns once clean has returned and the Lease is deleted.
	lc := o.leaderConfig(cfg)
	lc.DeleteOnRelease = true
	lerr := leader.Run(leading, lc, func(ctx context.Context) {
		clean(ctx)
		done()
	})
	switch {
	case lerr != nil: // lost while cleaning: a replica runs again
		return fmt.Errorf("uninstall: %w", errors.Join(lerr, err))
	case !ran && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("uninstall: after %s a replica of the agent still holds the leader election Lease %s/%s, so it still runs: stop it (delete its Deployment) and run the uninstall again",
			o.UninstallTimeout, o.LeaderElectionNamespace, o.LeaderElectionID)
	case !ran:
		return fmt.Errorf("uninstall: %w", ctx.Err())
	}
	return o.uninstalled(ctx, w, report, err)
}

// uninstalled logs the summary of an uninstall and says what is left.
func (o *Options) uninstalled(ctx context.Context, w Writer, report []controller.ClusterCleanup, err error) error {
	var deleted, removed int
	var all, done, left []string
	for _, c := range report {
		deleted += c.MirrorsDeleted
		removed += c.FinalizersRemoved
		all = append(all, c.String())
		if c.Done {
			done = append(done, c.String())
		} else {
			left = append(left, c.Remains(w.Identity, o.UninstallKeepMirrors))
		}
	}
	msg := "Uninstalled"
	if err != nil || len(left) > 0 {
		msg = "Uninstall incomplete"
	}
	logf.FromContext(ctx).Info(msg, "mirrorsDeleted", deleted, "finalizersRemoved", removed, "clusters", strings.Join(all, "; "))
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	if len(left) == 0 {
		return nil
	}
	cleaned := "nothing else was reached"
	if len(done) > 0 {
		cleaned = "everything else is cleaned (" + strings.Join(done, "; ") + ")"
	}
	return fmt.Errorf("uninstall incomplete after %s: %s; %s. To finish once the clusters answer: run the uninstall again "+
		"(this binary with the same flags; with the Helm chart, install the release again with --set replicaCount=0 and uninstall it), "+
		"or remove what is left by hand (docs/troubleshooting.md, \"Deleting a source hangs\")",
		o.UninstallTimeout, strings.Join(left, "; "), cleaned)
}
