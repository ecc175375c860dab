// Package e2e tests the built binaries end to end: fleetmirror-member runs
// against every cluster of a local fleet (pkg/fleettest) and fleetmirror-hub
// against the hub, each as an operating system process configured by flags
// and kubeconfig files, the way operators run them. The tests act only
// through the clusters' API servers and the processes' /metrics, and check
// what a user would see there: mirrors, the status annotation, metrics.
//
// The tests need real API servers and skip under -short.
package e2e
