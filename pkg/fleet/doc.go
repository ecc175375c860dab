// Package fleet keeps the clusters the pipeline works on: providers
// (the agent's own cluster, kubeconfig Secrets, a directory of kubeconfigs)
// engage and disengage clusters, and the fleet holds one connection per
// engaged cluster: clients, caches and kind watches, health probes that
// mark it down and up, an Event recorder, and the teardown when it leaves.
//
// It is the only place a cluster's lifecycle is written. The controller
// reads the fleet (which clusters, their state and labels) and is told of
// its changes through a Subscriber; the fleet knows nothing of sources or
// targets.
package fleet
