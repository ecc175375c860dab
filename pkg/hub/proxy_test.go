package hub_test

import (
	"io"
	"net"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// partition is a TCP proxy in front of a member's API server. Cutting it
// closes every connection and refuses new ones, as a network partition
// would; healing listens again on the same address.
type partition struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	// hung connections are accepted and never answered.
	hung bool
	held map[net.Conn]bool
}

func newPartition(target string) (*partition, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &partition{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}, held: map[net.Conn]bool{}}
	p.serve(ln)
	return p, nil
}

func (p *partition) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *partition) pipe(c net.Conn) {
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
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut closes the listener and every open connection.
func (p *partition) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// hang closes every open connection and from then on accepts connections
// and never answers on them, as an API server that hangs or a path that
// black-holes traffic would.
func (p *partition) hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hung = true
	for c := range p.conns {
		c.Close()
	}
}

// heal listens again on the same address, or answers again after hang.
func (p *partition) heal() error {
	p.mu.Lock()
	open := p.ln != nil
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

// through rewrites a kubeconfig to reach its server through the proxy.
func (p *partition) through(kubeconfig []byte) ([]byte, error) {
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + p.addr
	}
	return clientcmd.Write(*kc)
}
