// Command coredns is CoreDNS built with only the plugins the one-node test
// cluster of hack/cluster.sh needs: it answers the cluster domain from the
// Kubernetes API and nothing else. There is deliberately no forward plugin
// (nor any other plugin that sends queries elsewhere): Pods of the test
// cluster must never reach a resolver off this machine. hack/coredns.sh
// builds it; hack/cluster/Corefile.tmpl is its configuration.
package main

import (
	"log"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives lists the plugins above in CoreDNS's execution order (the
// order of its plugin.cfg, core/dnsserver/zdirectives.go); the order of
// the lines in a Corefile does not matter. A Corefile naming any other
// plugin fails to load with "unknown directive".
var directives = []string{
	"bind",
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"cache",
	"kubernetes",
	"loop",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		log.Fatal(err)
	}
	coremain.Run()
}
