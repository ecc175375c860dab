package fleettest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// FaultProxy is a TCP proxy in front of an API server that injects the
// faults a fleet meets: a partition (connections refused), a hang
// (connections accepted, never answered) and slowness (every chunk the
// server sends held back). It forwards bytes as they are, TLS included, so
// clients see the API server's own certificate.
type FaultProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool // forwarded, both ends
	held  map[net.Conn]bool // accepted while hung
	hung  bool
	delay time.Duration
	// accepted counts the connections accepted, whatever became of them.
	accepted atomic.Int64
}

// NewFaultProxy listens on a free loopback port and forwards to target
// (host:port).
func NewFaultProxy(target string) (*FaultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}, held: map[net.Conn]bool{}}
	p.serve(ln)
	return p, nil
}

// Accepted is the number of connections the proxy has accepted so far:
// while its API server is stopped, every attempt to reach it (each fails
// when the proxy cannot dial the server). While Cut, attempts are refused
// and not counted.
func (p *FaultProxy) Accepted() int { return int(p.accepted.Load()) }

// Addr is the proxy's address.
func (p *FaultProxy) Addr() string { return p.addr }

func (p *FaultProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			go p.pipe(c)
		}
	}()
}

func (p *FaultProxy) pipe(c net.Conn) {
	p.mu.Lock()
	if p.hung {
		// Accept, read and never answer: a hung control plane.
		p.held[c] = true
		p.mu.Unlock()
		_, _ = io.Copy(io.Discard, c)
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(&delayedWriter{w: c, p: p}, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// delayedWriter holds every chunk for the proxy's delay before writing it.
type delayedWriter struct {
	w io.Writer
	p *FaultProxy
}

func (d *delayedWriter) Write(b []byte) (int, error) {
	d.p.mu.Lock()
	delay := d.p.delay
	d.p.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay) // the fault itself: the server answers late
	}
	return d.w.Write(b)
}

// Cut closes the listener and every open connection, as a partition would:
// connections are refused until Heal.
func (p *FaultProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.closeLocked()
}

// Hang closes every open connection and from then on accepts connections
// and never answers on them, as an API server that hangs or a path that
// black-holes traffic would.
func (p *FaultProxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hung = true
	p.closeLocked()
}

// Delay holds back everything the server sends by d (0: no delay).
func (p *FaultProxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

func (p *FaultProxy) closeLocked() {
	for c := range p.conns {
		c.Close()
	}
}

// Heal ends every fault: it listens again on the same address after Cut,
// answers again after Hang (closing the connections it held), and stops
// delaying.
func (p *FaultProxy) Heal() error {
	p.mu.Lock()
	open := p.ln != nil
	p.delay = 0
	if p.hung {
		p.hung = false
		for c := range p.held {
			c.Close()
			delete(p.held, c)
		}
	}
	p.mu.Unlock()
	if open {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Close stops the proxy and closes every connection.
func (p *FaultProxy) Close() {
	p.Cut()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.held {
		c.Close()
	}
}

// Through rewrites a kubeconfig to reach its server through the proxy.
func (p *FaultProxy) Through(kubeconfig []byte) ([]byte, error) {
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + p.addr
	}
	return clientcmd.Write(*kc)
}
