package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// buildFiles runs the recipe's go builds in the source directory src, with
// their outputs below dir, and returns the image's files.
func buildFiles(ctx context.Context, r *recipe, src, dir string) ([]entry, error) {
	local := map[string]string{} // stage:output → local file
	for _, b := range r.builds {
		out := filepath.Join(dir, b.stage, filepath.FromSlash(b.out))
		if err := goBuildLocally(ctx, b, src, out); err != nil {
			return nil, err
		}
		local[b.stage+":"+b.out] = out
	}
	var files []entry
	for _, c := range r.copies {
		// go build in the builder container writes 0755 (umask 022),
		// whatever this machine's umask.
		files = append(files, entry{path: c.dest, mode: 0o755, source: local[c.stage+":"+c.src]})
	}
	return files, nil
}

// goBuildLocally runs one of the Dockerfile's go builds in src with -o
// out, for linux and this machine's architecture. It adds -buildvcs=false:
// the builder stage has no .git, so its binaries carry no VCS stamp, and
// neither do these (nor one that changes with a dirty work tree).
func goBuildLocally(ctx context.Context, b goBuild, src, out string) error {
	args := []string{"build", "-buildvcs=false"}
	for i := 0; i < len(b.args); i++ {
		a := b.args[i]
		switch {
		case a == "-o" || a == "--o":
			args = append(args, a, out)
			i++
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--o="):
			args = append(args, "-o="+out)
		default:
			args = append(args, a)
		}
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH)
	cmd.Env = append(cmd.Env, b.env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: go %s (in %s): %w", b.at, strings.Join(args, " "), src, err)
	}
	return nil
}
