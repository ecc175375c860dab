package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// binarySizeGoal is the member's size goal of the leaner-member issue, in
// bytes (decimal megabytes, as ls -l and the registry show them).
const binarySizeGoal = 30e6

// binarySizes is the line of the report that gives the size of both agents
// built as the image builds them (buildBinaries, shippedBuildFlags): the
// file-backed part of the agents' RSS is pages of these files. It builds
// them once into a directory of its own, which the Go build cache makes a
// link step; an error is reported on the line instead of the sizes.
var binarySizes = sync.OnceValue(func() string {
	sizes, err := measureBinaries()
	if err != nil {
		return fmt.Sprintf("binaries: not measured: %v\n", err)
	}
	return sizes
})

func measureBinaries() (string, error) {
	root, err := fleettest.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "fleetmirror-binsize-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bins, err := buildBinaries(ctx, root, dir)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, b := range []struct{ name, path string }{{"fleetmirror-member", bins.Member}, {"fleetmirror-hub", bins.Hub}} {
		fi, err := os.Stat(b.path)
		if err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s %.1f MB", b.name, float64(fi.Size())/1e6))
		if b.path == bins.Member {
			parts[len(parts)-1] += fmt.Sprintf(" (goal <= %.0f MB)", binarySizeGoal/1e6)
		}
	}
	return "binaries: " + strings.Join(parts, ", ") + "; stripped, as the image builds them (" + strings.Join(shippedBuildFlags, " ") + ")\n", nil
}
