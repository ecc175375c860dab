package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// generateDir holds Kyverno's conformance tests of generate rules, in the
// Kyverno repository.
const generateDir = "test/conformance/chainsaw/generate"

// tree reads files of the Kyverno repository by their slash-separated path
// from its root: a checkout, or a bare clone (no work tree) read at HEAD.
type tree interface {
	// read returns the file at p.
	read(p string) ([]byte, error)
	// files lists every file under dir, recursively, sorted.
	files(dir string) ([]string, error)
}

// openTree picks a checkout's files when root has them, and git otherwise.
func openTree(root string) (tree, error) {
	if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(generateDir))); err == nil && st.IsDir() {
		return dirTree(root), nil
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "HEAD").Output()
	if err != nil {
		return nil, fmt.Errorf("%s is neither a Kyverno checkout (no %s) nor a git repository: %v", root, generateDir, err)
	}
	return &gitTree{dir: root, rev: strings.TrimSpace(string(out)), cache: map[string][]byte{}}, nil
}

type dirTree string

func (d dirTree) read(p string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), filepath.FromSlash(p)))
}

func (d dirTree) files(dir string) ([]string, error) {
	var out []string
	root := string(d)
	err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(dir)), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	sort.Strings(out)
	return out, err
}

// gitTree reads one commit of a git repository; reads are cached, since
// step templates are shared by every test.
type gitTree struct {
	dir, rev string
	mu       sync.Mutex
	cache    map[string][]byte
}

func (g *gitTree) read(p string) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b, ok := g.cache[p]; ok {
		return b, nil
	}
	b, err := exec.Command("git", "-C", g.dir, "show", g.rev+":"+p).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: not in %s at %.12s", p, g.dir, g.rev)
	}
	g.cache[p] = b
	return b, nil
}

func (g *gitTree) files(dir string) ([]string, error) {
	out, err := exec.Command("git", "-C", g.dir, "ls-tree", "-r", "--name-only", g.rev, "--", dir).Output()
	if err != nil {
		return nil, fmt.Errorf("listing %s: %v", dir, err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			files = append(files, path.Clean(l))
		}
	}
	sort.Strings(files)
	return files, nil
}
