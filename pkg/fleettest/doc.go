// Package fleettest starts a fleet of real Kubernetes API servers for
// integration tests, end-to-end tests and the local demo fleet: one hub and
// any number of members, each an envtest control plane (kube-apiserver and
// etcd) of its own in this process's care.
//
// It sits beside the mirroring pipeline, not in it: tests use it to give the
// apply, clusters and controller stages real clusters to write to, and to
// register members with the hub the way operators do, through kubeconfig
// Secrets in Cluster API form (RegisterCAPI) or fleetmirror's plain form
// (RegisterPlain). A cluster can be stopped and restarted on the same address
// to test unreachable members, and can mint new identities to test credential
// rotation.
//
// It is also the one test helper package of every test tree: the agents'
// envtest suites (StartSuite, StopInProcess), the end-to-end tests and the
// benchmark read and wait for objects through it (SourceMeta, Lookup,
// EventuallyExists, EventuallyGone, Change, Status, Events, with each suite's
// Wait), scrape and read metrics (Scrape, Gather, Families) and pick free
// ports (FreeAddr), so that a helper is written once.
//
// The envtest binaries are built from source by hack/envtest.sh; Assets finds
// them.
package fleettest
