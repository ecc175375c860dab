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
// The envtest binaries are built from source by hack/envtest.sh; Assets finds
// them.
package fleettest
