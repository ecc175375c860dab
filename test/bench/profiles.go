package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// saveProfiles writes the agent's heap profile (after a collection) and
// its goroutines (grouped by stack) into dir as <tag>.heap.pb.gz and
// <tag>.goroutines.txt, for `go tool pprof` and a reader: the figures
// say how much, these say where.
func (a *agent) saveProfiles(ctx context.Context, dir, tag string) error {
	if a.pprofAddr == "" {
		return nil
	}
	for file, path := range map[string]string{
		tag + ".heap.pb.gz":     "/debug/pprof/heap?gc=1",
		tag + ".goroutines.txt": "/debug/pprof/goroutine?debug=1",
		tag + ".allocs.pb.gz":   "/debug/pprof/allocs",
	} {
		f, err := os.Create(filepath.Join(dir, file)) //nolint:gosec // the bench's own log directory
		if err != nil {
			return err
		}
		code, err := fleettest.HTTPGet(ctx, "http://"+a.pprofAddr+path, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%s: HTTP %d", path, code)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
