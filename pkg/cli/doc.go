// Package cli is the kubectl plugin kubectl-fleetmirror: it explains what
// the member agent does with a source (status, why, list). It sits beside
// the pipeline, not in it: it reads the cluster, then runs the agent's own
// stages (annotations.Parse, targets.Plan, desired.Build, apply.InSync)
// with the agent's own options, read from its Deployment, so that what it
// reports is what the agent decides. It never writes.
package cli
