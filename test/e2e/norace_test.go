//go:build !race

package e2e

// raceEnabled: the tests run without the race detector, and so do the agents.
const raceEnabled = false
