package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is every timestamp in the image and the archive, so that the same
// inputs give the same digests.
var epoch = time.Unix(0, 0).UTC()

// Annotations of the archive's index.json entry: containerd's import names
// the image by the first, other OCI tools by the second.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// entry is one file or symlink of the image. Directories above it are
// added by layer.
type entry struct {
	path   string      // absolute, in the image
	mode   fs.FileMode // permission bits of a file
	source string      // the local file with its content
	target string      // where a symlink points; set for symlinks only
}

// layer is a gzipped OCI layer with the entries and the directories
// above them, all owned by root and dated epoch. ggcr makes layers from
// tar streams but has no writer of a file tree with chosen modes and
// owners, so the tar stream is written here.
func layer(entries []entry) (v1.Layer, error) {
	seen := map[string]bool{}
	var dirs []string
	for _, e := range entries {
		if !path.IsAbs(e.path) || path.Clean(e.path) != e.path || e.path == "/" {
			return nil, fmt.Errorf("%q is not a clean absolute file path", e.path)
		}
		if seen[e.path] {
			return nil, fmt.Errorf("%s is added twice", e.path)
		}
		seen[e.path] = true
		for d := path.Dir(e.path); d != "/"; d = path.Dir(d) {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	for _, d := range dirs {
		if seen[d] {
			return nil, fmt.Errorf("%s is a file and a directory", d)
		}
	}
	slices.Sort(dirs)
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.path, b.path) })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range dirs {
		if err := tw.WriteHeader(header(tar.TypeDir, d[1:]+"/", 0o755)); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		if err := writeEntry(tw, e); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func header(typ byte, name string, mode fs.FileMode) *tar.Header {
	return &tar.Header{Typeflag: typ, Name: name, Mode: int64(mode.Perm()), ModTime: epoch, Format: tar.FormatPAX}
}

func writeEntry(tw *tar.Writer, e entry) error {
	if e.target != "" {
		h := header(tar.TypeSymlink, e.path[1:], 0o777)
		h.Linkname = e.target
		return tw.WriteHeader(h)
	}
	f, err := os.Open(e.source)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", e.source)
	}
	h := header(tar.TypeReg, e.path[1:], e.mode)
	h.Size = fi.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// image is an OCI image for linux and this machine's architecture with
// one layer and the given config.
func image(l v1.Layer, createdBy string, cfg v1.Config) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(img, mutate.Addendum{
		Layer:   l,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: createdBy},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// imageName returns the name containerd knows an image by, e.g.
// docker.io/library/fleetmirror:dev for fleetmirror:dev, and its tag.
func imageName(ref string) (string, string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", "", err
	}
	registry := tag.RegistryStr()
	if registry == name.DefaultRegistry {
		// ggcr says index.docker.io, containerd and the kubelet docker.io.
		registry = "docker.io"
	}
	return registry + "/" + tag.RepositoryStr() + ":" + tag.TagStr(), tag.TagStr(), nil
}

// writeArchive writes img as an OCI image archive, the tar of an OCI image
// layout that `ctr images import` reads, to file out, named ref. It
// returns the manifest's digest.
func writeArchive(img v1.Image, ref, out string) (v1.Hash, error) {
	full, tag, err := imageName(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	err = p.AppendImage(img,
		layout.WithAnnotations(map[string]string{annotationImageName: full, annotationRefName: tag}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return v1.Hash{}, err
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return v1.Hash{}, err
	}
	return digest, os.Rename(tmp, out)
}

// tarDir writes the files below dir into the tar file out, in lexical
// order and dated epoch. ggcr writes an OCI layout only as a directory
// (its tarball package writes docker save's format), so the archive of the
// layout is written here.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return tw.WriteHeader(header(tar.TypeDir, rel+"/", 0o755))
		}
		return writeEntry(tw, entry{path: "/" + rel, mode: 0o644, source: p})
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
