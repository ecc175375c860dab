// Package hub wires the mirroring pipeline across a fleet: the hub reads the
// kubeconfig Secrets that register member clusters, keeps one set of
// watches per registered cluster (and per kind in it), and mirrors sources
// of any cluster into namespaces of the other clusters named by CLUSTER/NS
// entries. Member agents handle the unqualified entries; the hub never
// writes into a source's own cluster.
package hub
