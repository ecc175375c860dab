// Package clusters is how the mirroring pipeline sees and talks to one API
// server: its clients, discovery and REST mapper, a metadata-only watch of
// its namespaces, and for every watched kind a label-selected watch of sources,
// of our mirrors and of pull mirrors. Each watch is one goroutine filling a
// cache that hands every change to one handler (watch.go). The member agent
// keeps one Cluster; the hub one per registered cluster. Watches start and stop at run time, each under its own
// context, so a kind or a cluster that is no longer needed leaves nothing
// running behind.
package clusters
