package fleettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A fleet of a hundred clusters on one machine: Start gives every cluster
// an etcd of its own, which is a process and a data directory per
// cluster; StartShared gives them one etcd, each API server storing its
// objects under an --etcd-prefix of its own, so that the clusters share
// nothing but the storage process. Each cluster is still a kube-apiserver
// of its own, with its own address, certificates, watch caches and
// metrics: a client of one cluster cannot see another's objects.

// SharedOptions shape a fleet started by StartShared.
type SharedOptions struct {
	// MemberArgs are extra kube-apiserver flags of the members (not of the
	// hub), by name without dashes. They override envtest's defaults.
	// "{cluster}" in a value is replaced by the member's name (a file per
	// member: --audit-log-path=/tmp/audit-{cluster}.log).
	MemberArgs map[string]string
	// HubArgs are the hub's, likewise ("{cluster}" is HubName).
	HubArgs map[string]string
	// MemberEnv are extra environment variables (NAME=value) of the
	// members' API server processes, e.g. Go's GOGC or GOMEMLIMIT.
	MemberEnv []string
	// Parallel is how many API servers start at once; 4 when zero. Each
	// start is seconds of CPU: on a small machine, starting a hundred at
	// once would make each miss its start deadline.
	Parallel int
	// Output, when set, receives the standard output and error of every
	// API server (their logs); by default they are dropped.
	Output io.Writer
	// Progress, when set, is called after each API server started, with
	// the number started so far and the total.
	Progress func(started, total int)
}

// defaultSharedParallel is SharedOptions.Parallel's default.
const defaultSharedParallel = 4

// etcdPrefixRoot starts the --etcd-prefix of every API server of a shared
// etcd; the cluster's name follows.
const etcdPrefixRoot = "/fleettest/"

// defaultNamespaceWait bounds the wait for an API server's default
// namespace: its bootstrap continues after /healthz answers.
const defaultNamespaceWait = time.Minute

// sharedEtcd is the etcd of a fleet started by StartShared.
type sharedEtcd struct {
	etcd *envtest.Etcd
	dir  string // the orphan guard's script
}

func (s *sharedEtcd) stop() error {
	return errors.Join(s.etcd.Stop(), os.RemoveAll(s.dir))
}

// StartShared starts one etcd, then the hub and one cluster per member
// name, each a kube-apiserver storing in that etcd under a prefix of its
// own, o.Parallel at a time; it returns when every API server serves and
// has its default namespace. With a non-empty dir it also writes each admin
// kubeconfig to <dir>/<name>.kubeconfig (mode 0600). Names must be unique
// DNS labels other than HubName. Fleet.Stop stops the API servers, then the
// etcd. On error, whatever started is stopped.
func StartShared(dir string, o SharedOptions, memberNames ...string) (*Fleet, error) {
	names, assets, err := prepare(memberNames)
	if err != nil {
		return nil, err
	}
	etcd, err := startSharedEtcd(assets[HubName].dir) // one etcd release serves every version
	if err != nil {
		return nil, err
	}
	build := func(name string) (*Cluster, error) {
		if name == HubName {
			return newSharedCluster(name, assets[name], etcd, o.HubArgs, nil, o.Output)
		}
		return newSharedCluster(name, assets[name], etcd, o.MemberArgs, o.MemberEnv, o.Output)
	}
	parallel := o.Parallel
	if parallel <= 0 {
		parallel = defaultSharedParallel
	}
	return startClusters(&Fleet{etcd: etcd}, dir, names, build, (*Cluster).startShared, parallel, o.Progress)
}

// prepare returns the names of a fleet's clusters, the hub's first, and
// for each the directory of the envtest binaries it runs and the version it
// must report (EnvKubeVersions; empty when unset); it refuses names that
// are not unique DNS labels other than HubName.
func prepare(memberNames []string) (names []string, assets map[string]versionAssets, err error) {
	names = append([]string{HubName}, memberNames...)
	if err := checkNames(names); err != nil {
		return nil, nil, err
	}
	dirs, versions, err := clusterAssets(names)
	if err != nil {
		return nil, nil, err
	}
	assets = make(map[string]versionAssets, len(names))
	for i, name := range names {
		assets[name] = versionAssets{dir: dirs[i], version: versions[i]}
	}
	return names, assets, nil
}

// checkNames refuses names that are not unique DNS labels.
func checkNames(names []string) error {
	seen := map[string]bool{}
	for _, name := range names {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("cluster name %q: %v", name, errs)
		}
		if seen[name] {
			return fmt.Errorf("cluster name %q given twice (the hub is always %q)", name, HubName)
		}
		seen[name] = true
	}
	return nil
}

// startSharedEtcd starts an etcd in a data directory envtest creates and
// removes.
func startSharedEtcd(assets string) (*sharedEtcd, error) {
	dir, err := os.MkdirTemp("", "fleettest-etcd-")
	if err != nil {
		return nil, err
	}
	path, err := orphanGuard(dir, filepath.Join(assets, "etcd"))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	e := &envtest.Etcd{Path: path, StartTimeout: startTimeout, StopTimeout: stopTimeout}
	// A hundred API servers bootstrap at once: thousands of writes that
	// need no durability, since the data directory goes with the fleet.
	e.Configure().Set("unsafe-no-fsync", "true")
	if err := e.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("starting the shared etcd: %w", err), e.Stop(), os.RemoveAll(dir))
	}
	return &sharedEtcd{etcd: e, dir: dir}, nil
}

// newSharedCluster prepares a cluster whose API server stores in etcd
// under a prefix named after it; env, when not empty, is added to the API
// server's environment by a wrapper script.
func newSharedCluster(name string, assets versionAssets, etcd *sharedEtcd, args map[string]string, env []string, out io.Writer) (*Cluster, error) {
	certDir, err := os.MkdirTemp("", "fleettest-"+name+"-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(assets.dir, "kube-apiserver")
	if len(env) > 0 {
		if bin, err = envWrapper(filepath.Join(certDir, "env"), bin, env); err != nil {
			return nil, errors.Join(err, os.RemoveAll(certDir))
		}
	}
	apiServerPath, err := orphanGuard(certDir, bin)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	api := &envtest.APIServer{
		Path:         apiServerPath,
		CertDir:      certDir,
		EtcdURL:      etcd.etcd.URL,
		StartTimeout: startTimeout,
		StopTimeout:  stopTimeout,
		Out:          out,
		Err:          out,
	}
	api.Configure().Set("advertise-address", "127.0.0.1")
	if minorAtLeast(assets.version, 37) {
		api.Configure().Set("endpoint-reconciler-type", "none") // as in newCluster
	}
	api.Configure().Set("etcd-prefix", etcdPrefixRoot+name)
	for _, k := range slices.Sorted(maps.Keys(args)) {
		api.Configure().Set(k, strings.ReplaceAll(args[k], "{cluster}", name))
	}
	// The environment holds the API server alone: Stop and Restart of the
	// Cluster reach it as they do in a fleet of its own, and stopping the
	// environment stops no etcd (it has none). It is never started: it
	// would start an etcd.
	apiOnly := &envtest.Environment{Scheme: clientgoscheme.Scheme, ControlPlane: envtest.ControlPlane{APIServer: api}}
	return &Cluster{Name: name, Env: apiOnly, certDir: certDir, kubeVersion: assets.version}, nil
}

// envWrapper writes dir/<base of bin>, a script that runs bin with env
// added to its environment, replacing itself so that the process stays
// the one envtest started.
func envWrapper(dir, bin string, env []string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", fmt.Errorf("environment variable %q: want NAME=value", kv)
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	fmt.Fprintf(&b, "exec %s \"$@\"\n", shellQuote(bin))
	path := filepath.Join(dir, filepath.Base(bin))
	return path, os.WriteFile(path, []byte(b.String()), 0o700)
}

// startShared starts the API server of a cluster of a shared etcd, then
// provisions the admin user and waits for the default namespace, as
// envtest's Environment.Start does.
func (c *Cluster) startShared() error {
	plane := &c.Env.ControlPlane
	if err := plane.APIServer.Start(); err != nil {
		return errors.Join(fmt.Errorf("starting cluster %s: %w", c.Name, err), plane.APIServer.Stop())
	}
	// The rate limits of envtest's admin config, which Start's clusters have.
	admin, err := plane.AddUser(envtest.User{Name: adminUser, Groups: []string{"system:masters"}}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return fmt.Errorf("cluster %s: provisioning the admin user: %w", c.Name, err)
	}
	c.Config = admin.Config()
	c.Env.Config = c.Config
	if c.Client, err = client.New(c.Config, client.Options{Scheme: clientgoscheme.Scheme}); err != nil {
		return fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultNamespaceWait)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return c.Client.Get(ctx, types.NamespacedName{Name: metav1.NamespaceDefault}, &corev1.Namespace{}) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: the default namespace did not appear within %s: %w", c.Name, defaultNamespaceWait, err)
	}
	if err := checkVersion(c.Config, c.kubeVersion); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return nil
}

// APIServerPID returns the process id of the cluster's kube-apiserver,
// found by its --secure-port among the processes of this machine (envtest
// does not say it). Benchmarks read the process's memory through it.
func (c *Cluster) APIServerPID() (int, error) {
	api := c.Env.ControlPlane.APIServer
	if api == nil || api.Port == "" { // the secure port, envtest's only one
		return 0, fmt.Errorf("cluster %s: no API server started", c.Name)
	}
	return findProcess("kube-apiserver", "--secure-port="+api.Port)
}

// EtcdPID returns the process id of the etcd of a fleet started by
// StartShared.
func (f *Fleet) EtcdPID() (int, error) {
	if f.etcd == nil {
		return 0, errors.New("the fleet has no shared etcd")
	}
	return findProcess("etcd", "--listen-client-urls="+f.etcd.etcd.URL.String())
}

// findProcess returns the pid of the process whose program is named name
// and whose arguments include arg.
func findProcess(name, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if filepath.Base(args[0]) == name && slices.Contains(args[1:], arg) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process with %s", name, arg)
}
