// Package shard divides the registered clusters of a hub among its
// replicas (--shards=auto). It sits between the hub's providers and the
// fleet: a Provider that engages in the fleet only the clusters this
// replica holds, and the others as served elsewhere (fleet.Spec.Elsewhere),
// so that the rest of the pipeline runs unchanged on a smaller fleet.
//
// Replicas know each other through Leases in the hub's namespace, one per
// replica, labelled so that they are listed and watched; the API server is
// the only coordination engine. Clusters are assigned by consistent hashing
// with bounded loads (Assign). A replica claims a cluster in its Lease, and
// serves it only once it has seen its own claim and no live replica
// claims it too; it serves only while its Lease is fresh, and a cluster it
// gives up is marked unreachable (aborting the calls in flight) and torn
// down before its claim is withdrawn. docs/federation.md tells the whole
// protocol and its limits.
package shard
