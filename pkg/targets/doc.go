// Package targets is the second stage of the mirroring pipeline: it turns a
// parsed request and a snapshot of the fleet into the (cluster, namespace)
// pairs that receive a mirror, and says why every other candidate was
// dropped. It is pure: no client, no cluster connections.
//
// Both writers call Plan. The caller builds the snapshot from its cluster
// state just before the call:
//
//   - The member agent passes a Fleet of one Cluster, its own: Name, and the
//     cached namespaces (Terminating when the namespace has a deletion
//     timestamp). Scope is the zero value (Local). State, Labels and
//     KindSynced are not read: the member reconciles from its own caches.
//   - The hub passes every registered cluster, sorted by name, the source's
//     own cluster included (Plan skips it): Labels are the cluster's
//     registration labels; State is Ready when the cluster answers its
//     probe, Pending while it connects for the first time, Unreachable
//     otherwise, with UnreachableSince when known; KindSynced says whether
//     the caches of the source's kind in that cluster have synced;
//     Namespaces are that cluster's cached namespaces; Excluded holds the
//     cluster-secrets namespace in the hub's own cluster (ExcludedBecause
//     says so in plain words). Fleet.Loading is true while the hub is still
//     reading its registrations. Scope is Remote with the hub's
//     --allowed-source-clusters and --allowed-source-namespaces.
//
// In the Remote scope, Namespaces are only read for clusters whose State is
// Ready and whose kind has synced; a caller may leave them empty for others.
package targets
