// Package leader elects one active replica among the agent's replicas
// through a coordination.k8s.io/v1 Lease. It sits in front of the mirroring
// pipeline, not in it: the agent runs the pipeline's writers only inside
// Run's lead function, so that at most one replica writes mirrors at a
// time.
//
// # Why it is written by hand
//
// client-go's tools/leaderelection does the same, but through its
// resourcelock package and the typed clientset, which import
// k8s.io/client-go/kubernetes/scheme and with it every k8s.io/api group:
// about 7 MB of the member binary, which must stay under 30 MB. This package
// talks to the API server through the dynamic client and the Lease's Go
// type only, and follows client-go's LeaderElector and LeaseLock (v0.36)
// step by step: replicas behave as client-go's would, and during a rolling
// upgrade an agent built on client-go and one built on this package share
// the Lease correctly.
//
// # The contract
//
// Run campaigns for the Lease Config.Namespace/Config.Name under
// Config.Identity until its context ends:
//
//   - It acquires the Lease when the Lease does not exist (it creates it),
//     names no holder (a holder that stepped down), is already held by
//     Identity, or has not changed for the Lease's leaseDurationSeconds as
//     measured on this replica's clock since it last saw it change. The
//     times another replica wrote into the Lease are never compared with
//     ours; only their change counts, as client-go does. A replica that
//     starts while another holds the Lease therefore waits a full lease
//     duration even if the holder died long ago.
//   - Acquiring sets holderIdentity, leaseDurationSeconds (LeaseDuration in
//     whole seconds), acquireTime and renewTime, and increments
//     leaseTransitions when the holder changes. Every write carries the
//     resourceVersion that was read: a conflict means another replica
//     wrote first, and the Lease is read again.
//   - While it leads, Run renews the Lease every RetryPeriod and runs lead
//     with a context that ends when leadership ends. When a renewal has not
//     succeeded within RenewDeadline (the API server failed, or another
//     replica took the Lease), leadership is lost: lead's context is
//     cancelled, Run waits for lead to return and returns an error wrapping
//     ErrLost. The caller may exit then, as controller-runtime's manager
//     does, or call Run again to campaign anew, as the agent does.
//   - When Run's context ends while it leads, lead's context is cancelled
//     too, and Run keeps renewing until lead has returned (so that no other
//     replica starts while this one still winds down, as controller-runtime
//     stops its runnables before it releases the Lease). With
//     ReleaseOnCancel it then steps down as client-go does: it writes the
//     Lease with an empty holderIdentity, leaseDurationSeconds 1, acquireTime
//     and renewTime now and leaseTransitions unchanged, so that a waiting
//     replica takes over at its next try rather than after a lease duration.
//     It steps down only if the Lease it reads then still names it: a
//     replica that took the Lease over is never overwritten. Run returns nil.
//     With ReleaseOnCancel it also steps down after a loss, once lead has
//     returned, as client-go does: when the API server failed for a while,
//     the next leader need not wait for the Lease to expire.
//     With DeleteOnRelease as well, it deletes the Lease instead of
//     stepping down, on the same condition and only if the Lease is still
//     the version it read (a precondition on its UID and resourceVersion):
//     the agent's uninstall mode, the last holder, leaves no Lease behind.
//   - A lead that returns while Run still leads does not end leadership:
//     Run keeps the Lease until its context ends or leadership is lost, as
//     client-go does.
//   - OnChange, when set, is called with true once leadership is acquired,
//     before lead starts, and with false when it ends: at once when it is
//     lost, after lead returned and renewing stopped when ctx ended. It is
//     not called before the first acquisition. The agent sets its
//     leader_election_master_status gauge from it.
//
// Tries are spaced like client-go's: a replica that waits for the Lease
// tries every RetryPeriod with up to 120% jitter (wait.JitterUntil's factor
// 1.2), so that waiting replicas spread their requests; the leader renews
// every RetryPeriod and retries a failed renewal every RetryPeriod until
// RenewDeadline. Each request gives up after max(1s, RenewDeadline/2), so
// that one hung request cannot cost the leadership.
//
// Only the verbs get, create and update of the one Lease are used, and
// delete with DeleteOnRelease (the charts' Role grants no more): no list,
// no watch.
//
// Like client-go's, this is not fencing: a leader that is paused longer
// than LeaseDuration (a stopped process, a stalled node) may still write
// after another replica took over, until its next renewal fails.
package leader
