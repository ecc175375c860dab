// Command fleetmirror-hub is the hub: it mirrors annotated objects into
// namespaces of other clusters of the fleet, registered by kubeconfig Secrets.
package main

import (
	"context"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
)

func main() {
	var o hub.Options
	agent.Main("fleetmirror-hub", "Mirrors annotated objects into namespaces of other clusters of the fleet.",
		&o, func(ctx context.Context) error { return hub.Run(ctx, o) })
}
