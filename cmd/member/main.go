// Command fleetmirror-member is the member agent: it mirrors annotated
// objects into other namespaces of the cluster it runs in.
package main

import (
	"context"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

func main() {
	var o member.Options
	agent.Main("fleetmirror-member", "Mirrors annotated objects into other namespaces of this cluster.",
		&o, func(ctx context.Context) error { return member.Run(ctx, o) })
}
