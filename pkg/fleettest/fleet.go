package fleettest

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// HubName is the name of the hub in every fleet.
const HubName = "hub"

// adminUser is the name envtest gives the identity behind Cluster.Config.
const adminUser = "admin"

// Start and stop deadlines of one control plane process. envtest's default of
// 20 s is too short when several API servers start at once on two cores with
// the race detector busy. The KUBEBUILDER_CONTROLPLANE_*_TIMEOUT variables
// still win.
const (
	startTimeout = 2 * time.Minute
	stopTimeout  = 30 * time.Second
)

// Cluster is one envtest control plane: a kube-apiserver and its etcd.
type Cluster struct {
	// Name identifies the cluster in the fleet; members register under it.
	Name string
	// Env is the envtest environment running the control plane.
	Env *envtest.Environment
	// Config reaches the API server as an admin (group system:masters).
	Config *rest.Config
	// Client is an admin client with client-go's scheme.
	Client client.Client
	// KubeconfigPath is where Start wrote the admin kubeconfig; empty when
	// Start was given no directory.
	KubeconfigPath string

	// certDir holds the API server's serving and client CA certificates. It
	// is ours, not envtest's temporary one, so that it survives Stop and
	// Restart serves the same certificates: old kubeconfigs keep working.
	certDir string

	// kubeVersion is the release the API server must report (EnvKubeVersions),
	// empty when any will do.
	kubeVersion string

	mu      sync.Mutex // serialises Stop, Restart and AddUser
	stopped bool
}

func newCluster(name string, assets versionAssets, flags map[string]string) (*Cluster, error) {
	certDir, err := os.MkdirTemp("", "fleettest-"+name+"-")
	if err != nil {
		return nil, err
	}
	apiServerPath, err := orphanGuard(certDir, filepath.Join(assets.dir, "kube-apiserver"))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	etcdPath, err := orphanGuard(certDir, filepath.Join(assets.dir, "etcd"))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	env := &envtest.Environment{
		Scheme:                clientgoscheme.Scheme,
		BinaryAssetsDirectory: assets.dir,
		ControlPlane: envtest.ControlPlane{
			APIServer: &envtest.APIServer{Path: apiServerPath},
			Etcd:      &envtest.Etcd{Path: etcdPath},
		},
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = startTimeout
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		env.ControlPlaneStopTimeout = stopTimeout
	}
	api := env.ControlPlane.GetAPIServer()
	api.CertDir = certDir
	// Sandboxes without a default route leave kube-apiserver unable to pick
	// an address to advertise; it serves on loopback anyway.
	api.Configure().Set("advertise-address", "127.0.0.1")
	if minorAtLeast(assets.version, 37) {
		// kube-apiserver 1.37 refuses a loopback advertise address with its
		// default endpoint reconciler, which keeps the endpoints of the
		// kubernetes Service: a cluster of one API server on loopback has
		// none to keep.
		api.Configure().Set("endpoint-reconciler-type", "none")
	}
	for _, k := range slices.Sorted(maps.Keys(flags)) {
		api.Configure().Set(k, flags[k])
	}
	return &Cluster{Name: name, Env: env, certDir: certDir, kubeVersion: assets.version}, nil
}

// minorAtLeast reports whether version (1.37, 1.37.2; "" is the default
// release, left as it is) is of release 1.minor or later.
func minorAtLeast(v string, minor uint) bool {
	parsed, err := version.ParseGeneric(v)
	return err == nil && parsed.AtLeast(version.MajorMinor(1, minor))
}

// orphanGuard returns a command that runs bin and is killed, with its
// process group, when this process dies, however it dies. A test binary
// stopped by -timeout or a signal never reaches Fleet.Stop, and envtest starts
// its processes in process groups of their own, out of reach of a terminal's
// Ctrl-C: without this, every such run would leave API servers and etcds
// behind.
//
// The command is a shell script that starts a watchdog and then execs bin,
// so the process envtest starts, signals and waits for is bin itself. The
// watchdog, a child of bin, checks every second that bin's parent is still
// this process (its pid is written into the script) and kills bin's process
// group when it is not; it exits when bin does. It does not rely on the
// parent-death signal (PR_SET_PDEATHSIG): that is not delivered when the
// parent dies before the child has set it, is cleared by an exec of a setuid
// or file-capability binary, is not delivered in some sandboxes, and fires
// when the thread that forked exits, which in Go can be any thread of a
// process that lives on. Without /proc (outside Linux) bin is returned.
func orphanGuard(dir, bin string) (string, error) {
	if runtime.GOOS != "linux" {
		return bin, nil
	}
	script := fmt.Sprintf(guardScript, os.Getpid(), shellQuote(bin))
	path := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return "", err
	}
	return path, nil
}

// guardScript is orphanGuard's script: %[1]d is the pid of the process that
// starts it, %[2]s the quoted binary. The script hands the watchdog both pids
// as arguments ($$ is the script's process, which becomes the binary): the
// watchdog must not take its parent from getppid, which is already a reaper
// when the binary exits before the watchdog starts, and must never signal a
// pid other than the binary's group. It reads PPid from /proc/<pid>/status
// with shell builtins only, so a poll forks nothing but sleep. Its standard
// streams are /dev/null: envtest waits for EOF on the binary's output pipes,
// which the watchdog must not hold open.
const guardScript = `#!/bin/sh
# fleettest's orphan guard: runs %[2]s as this process and kills its process
# group once the process that started it (pid %[1]d) is gone.
sh -c '
parent=$1 guarded=$2
ppid() {
	p=
	while read -r key value; do
		if [ "$key" = PPid: ]; then p=$value; return; fi
	done <"/proc/$1/status"
}
[ "$guarded" -gt 1 ] && [ "$guarded" != "$parent" ] || exit 0
while :; do
	ppid $$
	[ "$p" = "$guarded" ] || exit 0 # the guarded process has exited
	ppid "$guarded"
	if [ "$p" != "$parent" ]; then
		kill -s KILL -- "-$guarded" || kill -s KILL -- "$guarded"
		exit 0
	fi
	sleep 1
done
' fleettest-orphan-watchdog %[1]d "$$" </dev/null >/dev/null 2>&1 &
exec %[2]s "$@"
`

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// start brings the control plane up and builds the admin client.
func (c *Cluster) start() error {
	cfg, err := c.Env.Start()
	if err != nil {
		_ = c.Env.Stop() // envtest may fail after its processes started
		return fmt.Errorf("starting cluster %s: %w", c.Name, err)
	}
	c.Config = cfg
	c.Client, err = client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	if err := checkVersion(cfg, c.kubeVersion); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return nil
}

// Kubeconfig returns the admin kubeconfig: certificates embedded, no exec
// plugin, context named after the cluster.
func (c *Cluster) Kubeconfig() ([]byte, error) {
	return kubeconfig(c.Name, adminUser, c.Config)
}

// AddUser provisions a new identity (a client certificate of its own) with
// the given groups and returns its REST config and kubeconfig. The identity
// has no rights beyond what RBAC grants its name or groups, unless a group is
// system:masters. Tests use it to rotate the credentials of a registered
// member.
func (c *Cluster) AddUser(name string, groups []string) (*rest.Config, []byte, error) {
	c.mu.Lock() // the client CA's serial counter is not safe for concurrent use
	defer c.mu.Unlock()
	u, err := c.Env.AddUser(envtest.User{Name: name, Groups: groups}, rest.CopyConfig(baseConfig(c.Config)))
	if err != nil {
		return nil, nil, fmt.Errorf("adding user %s to cluster %s: %w", name, c.Name, err)
	}
	cfg := u.Config()
	kc, err := kubeconfig(c.Name, name, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, kc, nil
}

// baseConfig keeps the client tuning of cfg (rate limits) and drops its
// identity and endpoint, which AddUser fills in.
func baseConfig(cfg *rest.Config) *rest.Config {
	return &rest.Config{QPS: cfg.QPS, Burst: cfg.Burst}
}

// Stop makes the cluster unreachable by stopping its API server. etcd keeps
// running, so Restart brings back every object. Stopping a stopped cluster
// does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if err := c.Env.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("stopping the API server of cluster %s: %w", c.Name, err)
	}
	c.stopped = true
	return nil
}

// Restart starts the API server of a stopped cluster again on the same
// address with the same certificates, so existing kubeconfigs, clients and
// users work again. It returns once the API server is healthy. Restarting a
// running cluster does nothing.
func (c *Cluster) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		return nil
	}
	if err := c.Env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("restarting the API server of cluster %s: %w", c.Name, err)
	}
	c.stopped = false
	return nil
}

// shutdown stops the whole control plane for good and removes its files.
func (c *Cluster) shutdown() error {
	err := c.Env.Stop()
	if c.KubeconfigPath != "" {
		if rmErr := os.Remove(c.KubeconfigPath); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	}
	return errors.Join(err, os.RemoveAll(c.certDir))
}

// kubeconfig serialises cfg as a self-contained kubeconfig: everything the
// client needs is inline, so the file works from any directory and in a
// Secret.
func kubeconfig(cluster, user string, cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	kc.CurrentContext = cluster
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("serialising kubeconfig of %s for %s: %w", cluster, user, err)
	}
	return data, nil
}

// MergedKubeconfig returns one admin kubeconfig with a context per entry of
// contexts (context name -> cluster), current, as a person with several
// clusters has it. Tests of commands that take --context flags use it.
func MergedKubeconfig(contexts map[string]*Cluster, current string) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	for name, c := range contexts {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
			ClientCertificateData: c.Config.CertData,
			ClientKeyData:         c.Config.KeyData,
			Token:                 c.Config.BearerToken,
		}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.CurrentContext = current
	return kc
}

// Fleet is a hub and its members, each a Cluster of its own.
type Fleet struct {
	// Hub is the cluster named HubName.
	Hub *Cluster
	// Members are the other clusters, in the order given to Start.
	Members []*Cluster

	// etcd is the one etcd of every cluster of a fleet started by
	// StartShared; nil when each has its own.
	etcd *sharedEtcd
}

// Start starts the hub and one cluster per member name, all at once, and
// returns when every API server serves. With a non-empty dir it also writes
// each admin kubeconfig to <dir>/<name>.kubeconfig (mode 0600). Names must be
// unique DNS labels other than HubName. On error, whatever started is stopped.
func Start(dir string, memberNames ...string) (*Fleet, error) {
	return start(dir, nil, memberNames...)
}

// start is Start with kube-apiserver flags set on every API server.
func start(dir string, flags map[string]string, memberNames ...string) (*Fleet, error) {
	names, assets, err := prepare(memberNames)
	if err != nil {
		return nil, err
	}
	// Each API server takes seconds to start; start them side by side.
	build := func(name string) (*Cluster, error) { return newCluster(name, assets[name], flags) }
	return startClusters(&Fleet{}, dir, names, build, (*Cluster).start, 0, nil)
}

// startClusters fills f with a cluster per name, built by build (the
// first is the hub), starts them with start, at most parallel at a time
// (all at once when zero), calling progress, when set, after each start;
// then writes their kubeconfigs to dir, when not empty. On error, whatever
// started is stopped.
func startClusters(f *Fleet, dir string, names []string, build func(name string) (*Cluster, error),
	start func(*Cluster) error, parallel int, progress func(started, total int),
) (*Fleet, error) {
	for _, name := range names {
		c, err := build(name)
		if err != nil {
			return nil, errors.Join(err, f.Stop())
		}
		if f.Hub == nil {
			f.Hub = c
		} else {
			f.Members = append(f.Members, c)
		}
	}
	clusters := f.Clusters()
	if parallel <= 0 {
		parallel = len(clusters)
	}
	errs := make([]error, len(clusters))
	var next, started atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, len(clusters)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(clusters) {
					return
				}
				if errs[i] = start(clusters[i]); errs[i] != nil {
					next.Store(int64(len(clusters))) // start no more
					return
				}
				if n := started.Add(1); progress != nil {
					progress(int(n), len(clusters))
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, f.Stop())
	}
	if dir != "" {
		if err := f.writeKubeconfigs(dir); err != nil {
			return nil, errors.Join(err, f.Stop())
		}
	}
	return f, nil
}

func (f *Fleet) writeKubeconfigs(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range f.Clusters() {
		data, err := c.Kubeconfig()
		if err != nil {
			return err
		}
		path := filepath.Join(dir, c.Name+".kubeconfig")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		c.KubeconfigPath = path
	}
	return nil
}

// Clusters returns the hub followed by the members.
func (f *Fleet) Clusters() []*Cluster {
	all := make([]*Cluster, 0, 1+len(f.Members))
	if f.Hub != nil {
		all = append(all, f.Hub)
	}
	return append(all, f.Members...)
}

// Cluster returns the cluster with the given name, or nil.
func (f *Fleet) Cluster(name string) *Cluster {
	for _, c := range f.Clusters() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Stop stops every cluster, running or stopped, and removes their files,
// the kubeconfigs Start wrote included; then the shared etcd of a fleet
// started by StartShared.
func (f *Fleet) Stop() error {
	clusters := f.Clusters()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() { errs[i] = c.shutdown() })
	}
	wg.Wait()
	if f.etcd != nil { // after the API servers that store in it
		errs = append(errs, f.etcd.stop())
		f.etcd = nil
	}
	return errors.Join(errs...)
}
