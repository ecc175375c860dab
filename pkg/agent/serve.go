package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/leader"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// server is one of the agent's HTTP endpoints, listening already.
type server struct {
	name string
	srv  *http.Server
	ln   net.Listener
}

// servers binds the agent's endpoints: /metrics, /healthz and /readyz,
// and pprof. An address of "0" (or empty, for pprof) disables one; a port
// that cannot be bound fails the start, before anything runs.
func (o *Options) servers(ready healthz.Checker) ([]server, error) {
	var out []server
	add := func(name, addr string, mux *http.ServeMux) error {
		if addr == "" || addr == "0" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, s := range out {
				_ = s.ln.Close()
			}
			return fmt.Errorf("serving %s on %s: %w", name, addr, err)
		}
		out = append(out, server{name: name, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 32 * time.Second}})
		return nil
	}

	m := http.NewServeMux()
	m.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	if err := add("metrics", o.MetricsBindAddress, m); err != nil {
		return nil, err
	}

	// controller-runtime's health handler: /healthz and /readyz answer 200
	// when every check passes, and /readyz/caches names one check.
	h := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{
		"/healthz": {"ping": healthz.Ping},
		"/readyz":  {"caches": ready},
	} {
		handler := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		h.Handle(path, handler)
		h.Handle(path+"/", handler)
	}
	if err := add("health probes", o.HealthProbeBindAddress, h); err != nil {
		return nil, err
	}

	p := http.NewServeMux()
	p.HandleFunc("/debug/pprof/", pprof.Index)
	p.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	p.HandleFunc("/debug/pprof/profile", pprof.Profile)
	p.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	p.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if err := add("pprof", o.PprofBindAddress, p); err != nil {
		return nil, err
	}
	return out, nil
}

// run runs the pipeline with the agent's endpoints until ctx ends or a
// part fails: the fleet's watches on every replica, the controller on the
// leader only (every replica when leader election is off). A leader that
// loses its Lease (its API server did not answer within the renew
// deadline, or another replica took the Lease) stops the controller and
// campaigns again in the same process, where controller-runtime's manager
// exits: the watches run on, so that when it leads again it starts from
// warm caches, seconds after its API server is back, instead of a
// restarted process listing everything again. On the way out the controller and
// the watches get GracefulShutdownTimeout to stop, the Lease is released,
// and the endpoints close last, so that probes are answered meanwhile.
//
// This is what controller-runtime's manager did for us; see
// controller.Pipeline.Run for why it is not used.
func (o *Options) run(ctx context.Context, cfg *rest.Config, p *controller.Pipeline, lead func(context.Context)) error {
	log := logf.FromContext(ctx)
	srvs, err := o.servers(func(*http.Request) error { return p.Ready() })
	if err != nil {
		return err
	}
	for _, s := range srvs {
		log.Info("Serving", "endpoint", s.name, "address", s.ln.Addr().String())
		go func() {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(err, "Endpoint failed", "endpoint", s.name)
			}
		}()
	}
	defer func() {
		for _, s := range srvs {
			_ = s.srv.Close()
		}
	}()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.RunFleet(runCtx); err != nil {
			cancel(fmt.Errorf("fleet: %w", err))
		}
	})
	wg.Go(func() {
		// lead runs beside the controller, on the leader only.
		leading := func(ctx context.Context) {
			var lw sync.WaitGroup
			if lead != nil {
				lw.Go(func() { lead(ctx) })
			}
			if err := p.Run(ctx); err != nil {
				cancel(err)
			}
			lw.Wait()
		}
		if !o.LeaderElect {
			leading(runCtx)
			return
		}
		lc := o.leaderConfig(cfg)
		for runCtx.Err() == nil {
			err := leader.Run(runCtx, lc, leading)
			switch {
			case errors.Is(err, leader.ErrLost):
				log.Info("Lost leadership; campaigning again", "error", err.Error())
			case err != nil:
				cancel(fmt.Errorf("leader election: %w", err))
			}
		}
	})

	<-runCtx.Done()
	err = context.Cause(runCtx)
	if ctx.Err() != nil {
		err = nil // asked to stop
	}
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	// As the manager's: zero does not wait, a negative timeout waits for
	// as long as it takes.
	switch t := o.GracefulShutdownTimeout; {
	case t < 0:
		<-stopped
	case t > 0:
		select {
		case <-stopped:
		case <-time.After(t):
			return errors.Join(err, fmt.Errorf("the pipeline did not stop within %s", t))
		}
	}
	return err
}

// leaderConfig is the Lease the replicas campaign for.
func (o *Options) leaderConfig(cfg *rest.Config) leader.Config {
	host, _ := os.Hostname()
	return leader.Config{
		Config:          cfg,
		Namespace:       o.LeaderElectionNamespace,
		Name:            o.LeaderElectionID,
		Identity:        host + "_" + string(uuid.NewUUID()),
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		OnChange: func(leading bool) {
			v := 0.0
			if leading {
				v = 1
			}
			metrics.Leader.WithLabelValues(o.LeaderElectionID).Set(v)
		},
	}
}
