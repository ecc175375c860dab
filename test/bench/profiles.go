package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

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
		if err := a.saveProfile(ctx, filepath.Join(dir, file), path); err != nil {
			return err
		}
	}
	return nil
}

// saveProfile writes what the agent's profiling endpoint path answers
// into the file at name.
func (a *agent) saveProfile(ctx context.Context, name, path string) error {
	f, err := os.Create(name) //nolint:gosec // the bench's own log directory
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
	return err
}

// cpuProfile starts a CPU profile of the agent over the next d and returns
// a function that waits for it and writes it into dir as <tag>.cpu.pb.gz.
// It is for a phase that lasts less than d: the idle rest of the window
// adds few samples. Without -pprof it does nothing.
func (a *agent) cpuProfile(ctx context.Context, dir, tag string, d time.Duration) (wait func() error) {
	if a.pprofAddr == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		done <- a.saveProfile(ctx, filepath.Join(dir, tag+".cpu.pb.gz"), fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())))
	}()
	return func() error { return <-done }
}
