package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestDockerfileImage builds the repository's Dockerfile and checks the
// archive as containerd would import it and as the image would run.
func TestDockerfileImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both agents")
	}
	const version, revision = "v0.0.0-imagetest", "0123456789abcdef"
	build := func(out string) {
		t.Helper()
		args := []string{"-dockerfile", "../../Dockerfile", "-src", "../..",
			"-tag", "fleetmirror:imagetest", "-version", version, "-revision", revision, "-o", out}
		if err := run(context.Background(), args, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "fleetmirror.tar")
	build(archive)

	desc, img := readArchive(t, archive)
	wantAnnotations := map[string]string{
		"io.containerd.image.name":          "docker.io/library/fleetmirror:imagetest",
		"org.opencontainers.image.ref.name": "imagetest",
	}
	if d := cmp.Diff(wantAnnotations, desc.Annotations); d != "" {
		t.Errorf("annotations of the index.json entry (-want +got):\n%s", d)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	wantConfig := v1.Config{
		User:       "65532:65532",
		Entrypoint: []string{"/usr/local/bin/fleetmirror-member"},
		Env:        []string{defaultPath},
		Labels: map[string]string{
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
			"org.opencontainers.image.source":   "https://github.com/fleetmirror/fleetmirror",
		},
	}
	if d := cmp.Diff(wantConfig, cf.Config); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}

	files := imageFiles(t, img)
	var names []string
	for _, f := range files {
		if f.hdr.Uid != 0 || f.hdr.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want root", f.hdr.Name, f.hdr.Uid, f.hdr.Gid)
		}
		names = append(names, f.hdr.Name)
		if f.hdr.Typeflag == tar.TypeDir {
			continue
		}
		if f.hdr.Typeflag != tar.TypeReg || f.hdr.Mode != 0o755 {
			t.Errorf("%s: type %c mode %o, want a file of mode 755", f.hdr.Name, f.hdr.Typeflag, f.hdr.Mode)
		}
		bin := filepath.Join(dir, filepath.Base(f.hdr.Name))
		if err := os.WriteFile(bin, f.data, 0o755); err != nil {
			t.Fatal(err)
		}
		assertStatic(t, bin)
	}
	wantNames := []string{"usr", "usr/local", "usr/local/bin", "usr/local/bin/fleetmirror-hub", "usr/local/bin/fleetmirror-member"}
	if d := cmp.Diff(wantNames, names); d != "" {
		t.Errorf("files and directories of the image (-want +got):\n%s", d)
	}
	out, err := exec.Command(filepath.Join(dir, "fleetmirror-member"), "--version").CombinedOutput()
	if want := "fleetmirror-member " + version + " (revision " + revision; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("fleetmirror-member --version: %v, %q; want it to say %q", err, out, want)
	}

	// The same inputs give the same image.
	again := filepath.Join(dir, "again.tar")
	build(again)
	if desc2, _ := readArchive(t, again); desc2.Digest != desc.Digest {
		t.Errorf("a second build has manifest %s, the first %s", desc2.Digest, desc.Digest)
	}
}

// assertStatic fails unless the ELF file asks for no program interpreter,
// i.e. runs in an image without a libc.
func assertStatic(t *testing.T, file string) {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (it has PT_INTERP)", file)
		}
	}
}

func TestFilesImage(t *testing.T) {
	dir := t.TempDir()
	busybox := filepath.Join(dir, "busybox")
	if err := os.WriteFile(busybox, []byte("#!/fake\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	motd := filepath.Join(dir, "motd")
	if err := os.WriteFile(motd, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "out", "busybox.tar")
	args := []string{"files", "-tag", "registry.example:5000/test/busybox:v1", "-o", archive,
		"-entrypoint", "/bin/sh", "-user", "1000",
		"-link", "/bin/sh=busybox", "-link", "/bin/wget=/bin/busybox",
		busybox + ":/bin/busybox", motd + ":/etc/motd"}
	if err := run(context.Background(), args, io.Discard); err != nil {
		t.Fatal(err)
	}

	desc, img := readArchive(t, archive)
	if got, want := desc.Annotations["io.containerd.image.name"], "registry.example:5000/test/busybox:v1"; got != want {
		t.Errorf("image name %q, want %q", got, want)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(v1.Config{User: "1000", Entrypoint: []string{"/bin/sh"}, Env: []string{defaultPath}}, cf.Config); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}

	type file struct {
		typ  byte
		mode int64
		link string
		data string
	}
	got := map[string]file{}
	for _, f := range imageFiles(t, img) {
		if f.hdr.Uid != 0 || f.hdr.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want root", f.hdr.Name, f.hdr.Uid, f.hdr.Gid)
		}
		got[f.hdr.Name] = file{typ: f.hdr.Typeflag, mode: f.hdr.Mode, link: f.hdr.Linkname, data: string(f.data)}
	}
	want := map[string]file{
		"bin":         {typ: tar.TypeDir, mode: 0o755},
		"bin/busybox": {typ: tar.TypeReg, mode: 0o750, data: "#!/fake\n"},
		"bin/sh":      {typ: tar.TypeSymlink, mode: 0o777, link: "busybox"},
		"bin/wget":    {typ: tar.TypeSymlink, mode: 0o777, link: "/bin/busybox"},
		"etc":         {typ: tar.TypeDir, mode: 0o755},
		"etc/motd":    {typ: tar.TypeReg, mode: 0o644, data: "hello\n"},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(file{})); d != "" {
		t.Errorf("files of the image (-want +got):\n%s", d)
	}
}

func TestFilesImageErrors(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "x")
	if err := os.WriteFile(src, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.tar")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"a link without a target", []string{"-link", "/bin/sh"}, `want DST=TARGET, got "/bin/sh"`},
		{"SRC without DST", []string{src}, "want SRC:DST"},
		{"a relative destination", []string{src + ":x"}, `"x" is not a clean absolute file path`},
		{"a path twice", []string{"-link", "/x=y", src + ":/x"}, "/x is added twice"},
		{"a file below a file", []string{src + ":/x", src + ":/x/y"}, "/x is a file and a directory"},
		{"a missing file", []string{filepath.Join(dir, "missing") + ":/x"}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"files", "-tag", "x:y", "-o", out}, tt.args...)
			err := run(context.Background(), args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// readArchive unpacks an OCI image archive and returns the only entry of
// its index.json and the image it names.
func readArchive(t *testing.T, archive string) (v1.Descriptor, v1.Image) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return im.Manifests[0], img
}

type imageFile struct {
	hdr  *tar.Header
	data []byte
}

// imageFiles returns the files of img's file system in layer order.
func imageFiles(t *testing.T, img v1.Image) []imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	var files []imageFile
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		var data bytes.Buffer
		if _, err := io.Copy(&data, tr); err != nil {
			t.Fatal(err)
		}
		files = append(files, imageFile{hdr: h, data: data.Bytes()})
	}
}
