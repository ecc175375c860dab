// Package controller drives the mirroring pipeline: for one source object it
// parses the annotations (pkg/annotations), resolves the targets
// (pkg/targets), builds each mirror (pkg/desired), applies them
// (pkg/apply), removes the mirrors no longer wanted, and reports status,
// Events and metrics. One work queue item is one source; every target is
// handled on its own, so one failing namespace never blocks the others.
package controller
