package providers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fleetmirror/fleetmirror/pkg/fleet"
)

// engagements records what a provider tells the fleet.
type engagements struct {
	mu      sync.Mutex
	engaged map[string]context.Context
	hosts   map[string]string
	ended   map[string][]error // per name, the cause of every ended engagement
	listed  int
}

func newEngagements() *engagements {
	return &engagements{engaged: map[string]context.Context{}, hosts: map[string]string{}, ended: map[string][]error{}}
}

func (e *engagements) Engage(ctx context.Context, s fleet.Spec) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.engaged[s.Name]; ok && old.Err() == nil {
		return errors.New("engaged twice")
	}
	e.engaged[s.Name], e.hosts[s.Name] = ctx, s.Config.Host
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.ended[s.Name] = append(e.ended[s.Name], context.Cause(ctx))
	})
	return nil
}

func (e *engagements) Relabel(string, map[string]string) {}

func (e *engagements) Listed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.listed++
}

// live returns the engaged clusters and their servers.
func (e *engagements) live() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]string{}
	for name, ctx := range e.engaged {
		if ctx.Err() == nil {
			out[name] = e.hosts[name]
		}
	}
	return out
}

func (e *engagements) endings(name string) []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.ended[name]...)
}

func writeKubeconfig(t *testing.T, dir, file, server, user string) {
	t.Helper()
	data := []byte(strings.Replace(string(kubeconfig("", user)), "https://127.0.0.1:6443", server, 1))
	if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestKubeconfigDir follows the clusters of a directory as files come, change
// and go; files it cannot use register nothing.
func TestKubeconfigDir(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	token := "token: abc"
	writeKubeconfig(t, dir, "east.kubeconfig", "https://east.example:6443", token)
	writeKubeconfig(t, dir, "west.yaml", "https://west.example:6443", token)
	writeKubeconfig(t, dir, ".hidden.yaml", "https://hidden.example:6443", token)
	writeKubeconfig(t, dir, "hub.yaml", "https://hub.example:6443", token)
	writeKubeconfig(t, dir, "Bad_Name.yaml", "https://bad.example:6443", token)
	writeKubeconfig(t, dir, "plugin.yaml", "https://plugin.example:6443", "exec: {command: /bin/true, apiVersion: client.authentication.k8s.io/v1}")
	writeKubeconfig(t, dir, "tokenfile.yaml", "https://tokenfile.example:6443", "tokenFile: /var/run/secrets/token")
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	e := newEngagements()
	p := &KubeconfigDir{Dir: dir, Reserved: "hub", PollInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, e) }()
	t.Cleanup(func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	})

	g.Eventually(e.live, 5*time.Second, 10*time.Millisecond).Should(Equal(map[string]string{
		"east": "https://east.example:6443", "west": "https://west.example:6443"}))
	g.Eventually(func() int { e.mu.Lock(); defer e.mu.Unlock(); return e.listed }).ShouldNot(BeZero())

	// A changed kubeconfig replaces the cluster; the old engagement ends
	// with ErrReplaced, so the fleet knows it is not leaving.
	writeKubeconfig(t, dir, "east.kubeconfig", "https://east-2.example:6443", token)
	g.Eventually(e.live, 5*time.Second, 10*time.Millisecond).Should(HaveKeyWithValue("east", "https://east-2.example:6443"))
	g.Eventually(func() []error { return e.endings("east") }).Should(HaveLen(1))
	g.Expect(errors.Is(e.endings("east")[0], fleet.ErrReplaced)).To(BeTrue(), "cause %v", e.endings("east")[0])

	// A removed file is a cluster leaving: its engagement ends without
	// ErrReplaced.
	g.Expect(os.Remove(filepath.Join(dir, "west.yaml"))).To(Succeed())
	g.Eventually(e.live, 5*time.Second, 10*time.Millisecond).ShouldNot(HaveKey("west"))
	g.Eventually(func() []error { return e.endings("west") }).Should(HaveLen(1))
	g.Expect(errors.Is(e.endings("west")[0], fleet.ErrReplaced)).To(BeFalse())

	// A file that becomes unusable does not replace the cluster with
	// nothing: the cluster leaves, and nothing is engaged from the file.
	writeKubeconfig(t, dir, "east.kubeconfig", "https://east-3.example:6443", "exec: {command: /bin/true, apiVersion: client.authentication.k8s.io/v1}")
	g.Eventually(e.live, 5*time.Second, 10*time.Millisecond).Should(BeEmpty())
}

// TestKubeconfigDirMissing: a directory that does not exist stops the
// provider at once, with the path in the error.
func TestKubeconfigDirMissing(t *testing.T) {
	p := &KubeconfigDir{Dir: filepath.Join(t.TempDir(), "nope")}
	err := p.Run(context.Background(), newEngagements())
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Run = %v, want a not-exist error", err)
	}
}
