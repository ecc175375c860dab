// Command image builds container images without Docker, as OCI image
// archives that `ctr images import` loads into containerd.
//
// By default it builds the image the Dockerfile describes, so that the
// Dockerfile stays the one definition of the image:
//
//	go run ./hack/image -tag fleetmirror:dev -version v1.2.3 -revision abc123 -o fleetmirror.tar   # or: make image
//
// The final stage must be FROM scratch; the go build commands of the stages
// it copies from run here, in -src, with the Dockerfile's flags (see
// interpret for what else it reads). -dockerfile and -src are separate so
// that one Dockerfile can build the source of another commit.
//
// The files mode makes an image of local files, for the small images the
// test node needs (the pause image, a busybox image for helm test):
//
//	go run ./hack/image files -tag pause:test -o pause.tar -entrypoint /pause pause:/pause
//	go run ./hack/image files -tag busybox:test -o busybox.tar -link /bin/sh=busybox /bin/busybox:/bin/busybox
//
// Both write one linux image of this machine's architecture, every file
// owned by root and dated 1970, so the same inputs give the same digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds the image that args ask for and reports it on w.
func run(ctx context.Context, args []string, w io.Writer) error {
	if len(args) > 0 && args[0] == "files" {
		return runFiles(args[1:], w)
	}
	return runDockerfile(ctx, args, w)
}

func runDockerfile(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(w)
	dockerfile := fs.String("dockerfile", "Dockerfile", "the Dockerfile to build")
	src := fs.String("src", ".", "the source directory the go builds run in")
	version := fs.String("version", "", "the build argument VERSION (default: the Dockerfile's)")
	revision := fs.String("revision", "", "the build argument REVISION (default: the Dockerfile's)")
	tag := fs.String("tag", "", "the image's name, e.g. fleetmirror:dev (required)")
	out := fs.String("o", "", "the OCI image archive to write (required)")
	fs.Usage = func() {
		fmt.Fprintln(w, "Usage: go run ./hack/image -tag NAME -o FILE [flags]\n       go run ./hack/image files -h")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tag == "" || *out == "" || fs.NArg() > 0 {
		return errors.New("-tag and -o are required, and no arguments are taken; -h lists the flags")
	}

	df, err := os.ReadFile(*dockerfile)
	if err != nil {
		return err
	}
	buildArgs := map[string]string{}
	if *version != "" {
		buildArgs["VERSION"] = *version
	}
	if *revision != "" {
		buildArgs["REVISION"] = *revision
	}
	r, err := interpret(*dockerfile, df, buildArgs)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "image-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files, err := buildFiles(ctx, r, *src, dir)
	if err != nil {
		return err
	}
	return write(files, r.history, r.config, *tag, *out, w)
}

func runFiles(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("image files", flag.ContinueOnError)
	fs.SetOutput(w)
	tag := fs.String("tag", "", "the image's name, e.g. pause:test (required)")
	out := fs.String("o", "", "the OCI image archive to write (required)")
	entrypoint := fs.String("entrypoint", "", "the image's entrypoint, a path in the image")
	user := fs.String("user", "", "the user the image runs as, e.g. 65532:65532")
	var links []entry
	fs.Func("link", "a symlink DST=TARGET in the image (repeatable)", func(s string) error {
		dst, target, ok := strings.Cut(s, "=")
		if !ok || target == "" {
			return fmt.Errorf("want DST=TARGET, got %q", s)
		}
		links = append(links, entry{path: path.Clean(dst), target: target})
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(w, "Usage: go run ./hack/image files -tag NAME -o FILE [flags] SRC:DST ...\n"+
			"Adds each local file SRC at DST in the image, with its mode.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tag == "" || *out == "" || fs.NArg()+len(links) == 0 {
		return errors.New("files: -tag, -o and a file or link are required; -h lists the flags")
	}

	files := links
	for _, a := range fs.Args() {
		src, dst, ok := strings.Cut(a, ":")
		if !ok || src == "" || dst == "" {
			return fmt.Errorf("want SRC:DST, got %q", a)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		files = append(files, entry{path: path.Clean(dst), mode: fi.Mode().Perm(), source: src})
	}
	cfg := v1.Config{Env: []string{defaultPath}, User: *user}
	if *entrypoint != "" {
		cfg.Entrypoint = []string{*entrypoint}
	}
	return write(files, "hack/image files", cfg, *tag, *out, w)
}

// write makes the image of files with cfg and writes its archive.
func write(files []entry, createdBy string, cfg v1.Config, tag, out string, w io.Writer) error {
	l, err := layer(files)
	if err != nil {
		return err
	}
	img, err := image(l, createdBy, cfg)
	if err != nil {
		return err
	}
	digest, err := writeArchive(img, tag, out)
	if err != nil {
		return err
	}
	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	full, _, _ := imageName(tag)
	fmt.Fprintf(w, "Wrote %s: %s@%s, %.1f MiB\n", out, full, digest, float64(fi.Size())/(1<<20))
	return nil
}
