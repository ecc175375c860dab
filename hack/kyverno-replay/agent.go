package main

import (
	"context"
	"slices"

	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// agentNamespace is where the agent runs, as the member chart installs it.
const agentNamespace = "fleetmirror-system"

// agentFlagPrivilege is the flag that lets the agent copy Roles,
// RoleBindings and ServiceAccounts; a test runs with it only when migrate
// tells the user to set it.
const agentFlagPrivilege = "--allow-privilege-kinds"

// agent is a member agent running in this process, with the chart's
// defaults: every namespaced kind discovered, the default deny list and
// excluded namespaces.
type agent struct {
	cfg    *rest.Config
	extra  []string
	cancel context.CancelFunc
	done   chan error
}

// ensure runs the agent with exactly the extra flags, restarting it when
// it runs with others.
func (a *agent) ensure(extra []string) error {
	if a.cancel != nil && slices.Equal(a.extra, extra) {
		return nil
	}
	a.stop()
	o, err := member.ParseOptions(append([]string{
		"--cluster-name=replay",
		"--namespace=" + agentNamespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	}, extra...)...)
	if err != nil {
		return err
	}
	o.RESTConfig = rest.CopyConfig(a.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done, a.extra = cancel, make(chan error, 1), slices.Clone(extra)
	go func() { a.done <- member.Run(ctx, o) }()
	return nil
}

func (a *agent) stop() {
	if a.cancel != nil {
		fleettest.StopInProcess("agent", a.cancel, a.done)
		a.cancel = nil
	}
}
