// Package cli is the kubectl plugin kubectl-fleetmirror. status, why and
// list explain what the agents do with a source or a pull mirror; they sit
// beside the pipeline, not in it: they read the cluster, then run the
// agents' own stages (annotations.Parse, targets.Plan, desired.Build,
// apply.InSync, the pull checks) with the agent's own options, read from its
// Deployment, so that what they report is what the agent decides, and they
// never write. register-cluster and unregister-cluster write the hub's
// registration (and identity in the member); migrate translates other
// mirroring tools' annotations into ours and, only with --apply or
// --remove-old, writes them (server-side apply of our keys only); cleanup
// does what the agents' uninstall does, for a cluster whose agent went
// without it, and only with --apply (mirrors proven ours by the agents' own
// ownership test, desired.Owned; the agents' finalizers and statuses).
package cli
