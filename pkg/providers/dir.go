package providers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// KubeconfigDir registers one cluster per kubeconfig file in a directory:
// the file's name without its extension names the cluster (prod-eu.yaml,
// prod-eu.kubeconfig and prod-eu register prod-eu). Names starting with a
// dot are skipped, so a Secret mounted as a volume (whose keys are files,
// beside ..data links) works as the directory. The kubeconfigs are held to
// the rules of KubeconfigSecrets; files refused are logged and counted.
// Clusters from files have no labels.
//
// The directory is read again every PollInterval rather than watched with
// inotify: a mounted Secret changes by an atomic swap of symlinks, which
// file watches report unreliably, and reading a few small files every few
// seconds costs nothing.
type KubeconfigDir struct {
	// Dir holds the kubeconfig files.
	Dir string
	// Reserved names a cluster that is not registered by a file (the
	// hub's own).
	Reserved string
	// AllowPlugins accepts kubeconfigs with exec and auth-provider plugins.
	AllowPlugins bool
	// PollInterval is how often the directory is read; zero means 2s.
	PollInterval time.Duration
}

// Run reads the directory and engages its clusters until ctx ends.
func (p *KubeconfigDir) Run(ctx context.Context, e fleet.Engager) error {
	if _, err := os.ReadDir(p.Dir); err != nil {
		return fmt.Errorf("kubeconfig directory: %w", err)
	}
	interval := p.PollInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	d := &dirSync{p: p, e: e, engaged: engagedSet{}, refused: map[string]string{}}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		d.sync(ctx)
		e.Listed()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type dirSync struct {
	p       *KubeconfigDir
	e       fleet.Engager
	engaged engagedSet
	refused map[string]string // file -> last refusal logged
}

// dirFile is one kubeconfig file that registers a cluster.
type dirFile struct {
	path   string
	hash   string
	config *rest.Config
}

func (d *dirSync) sync(ctx context.Context) {
	log := logf.FromContext(ctx).WithValues("dir", d.p.Dir)
	entries, err := os.ReadDir(d.p.Dir)
	if err != nil {
		// Keep what is engaged: a directory that cannot be read now says
		// nothing about the clusters.
		log.Info("Cannot read the kubeconfig directory", "error", err.Error())
		return
	}
	want := map[string]dirFile{}
	for _, ent := range entries {
		if strings.HasPrefix(ent.Name(), ".") {
			continue
		}
		path := filepath.Join(d.p.Dir, ent.Name())
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue // directories, broken links
		}
		name := strings.TrimSuffix(ent.Name(), filepath.Ext(ent.Name()))
		data, err := os.ReadFile(path) //nolint:gosec // the operator names the directory; its files are meant to be read
		switch {
		case err != nil:
			d.refuse(ctx, path, "invalid", err.Error())
			continue
		case len(validation.IsDNS1123Subdomain(name)) > 0:
			d.refuse(ctx, path, "invalid", fmt.Sprintf("cluster name %q (the file name without extension) is invalid: %s", name, strings.Join(validation.IsDNS1123Subdomain(name), "; ")))
			continue
		case name == d.p.Reserved:
			d.refuse(ctx, path, "duplicate", fmt.Sprintf("cluster name %q is the hub's own name", name))
			continue
		case want[name].path != "":
			d.refuse(ctx, path, "duplicate", fmt.Sprintf("cluster %q is already registered by file %s", name, want[name].path))
			continue
		}
		cfg, err := parseKubeconfig(data, d.p.AllowPlugins)
		if err != nil {
			reason := "invalid"
			if errors.Is(err, errPlugin) {
				reason = "plugin"
			}
			d.refuse(ctx, path, reason, err.Error())
			continue
		}
		sum := sha256.Sum256(data)
		want[name] = dirFile{path: path, hash: hex.EncodeToString(sum[:]), config: cfg}
	}
	hashes := make(map[string]string, len(want))
	for name, f := range want {
		hashes[name] = f.hash
	}
	d.engaged.retire(log, hashes)
	for name, f := range want {
		if d.engaged[name] != nil {
			continue
		}
		spec := fleet.Spec{Name: name, Config: f.config, Refused: func(holder string) {
			metrics.RegistrationErrors.WithLabelValues(MetricDuplicateCluster).Inc()
			log.Info("Kubeconfig file refused: its cluster is registered already", "file", f.path, "cluster", name, "registeredAs", holder)
		}}
		if err := d.engaged.engage(ctx, d.e, spec, f.hash); err != nil {
			d.refuse(ctx, f.path, "invalid", err.Error())
			continue
		}
		delete(d.refused, f.path)
		log.Info("Registering cluster", "cluster", name, "file", f.path)
	}
}

// refuse logs a file that registers nothing, once per message.
func (d *dirSync) refuse(ctx context.Context, path, metric, msg string) {
	if d.refused[path] == msg {
		return
	}
	d.refused[path] = msg
	metrics.RegistrationErrors.WithLabelValues(metric).Inc()
	logf.FromContext(ctx).Info("Kubeconfig file refused", "file", path, "reason", msg)
}
