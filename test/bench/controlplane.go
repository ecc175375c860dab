package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// controlPlaneCPU is the CPU time, in seconds, that the API servers of
// clusters and their etcds have used so far. Where a goal is a ratio to the
// floor, this tells what the agent costs the control plane beside the
// floor's plain client, which on a small machine is what its latency
// waits for. Several registered clusters may share one API server: each
// process is counted once.
func controlPlaneCPU(clusters []*cluster) (float64, error) {
	var procs map[int][]string // read once, for the clusters not yet resolved
	pids := map[int]struct{}{}
	for _, c := range clusters {
		if c.controlPlanePids == nil {
			var err error
			if procs == nil {
				if procs, err = commandLines(); err != nil {
					return 0, err
				}
			}
			if c.controlPlanePids, err = c.controlPlane(procs); err != nil {
				return 0, err
			}
		}
		for _, p := range c.controlPlanePids {
			pids[p] = struct{}{}
		}
	}
	var total float64
	for pid := range pids {
		u, err := procUsage(pid)
		if err != nil {
			return 0, err
		}
		total += u.CPUSeconds
	}
	return total, nil
}

// controlPlane finds, among the command lines of procs, the pids of the
// cluster's kube-apiserver (by its --secure-port) and of the etcd it names
// in --etcd-servers (by its --listen-client-urls).
func (c *cluster) controlPlane(procs map[int][]string) ([]int, error) {
	u, err := url.Parse(c.fc.Config.Host)
	if err != nil {
		return nil, err
	}
	apiserver, etcdURL := 0, ""
	for pid, args := range procs {
		if filepath.Base(args[0]) == "kube-apiserver" && argValue(args, "--secure-port") == u.Port() {
			apiserver = pid
			etcdURL = argValue(args, "--etcd-servers")
		}
	}
	if apiserver == 0 {
		return nil, fmt.Errorf("cluster %s: no kube-apiserver process with --secure-port=%s", c.name, u.Port())
	}
	pids := []int{apiserver}
	for pid, args := range procs {
		if filepath.Base(args[0]) == "etcd" && etcdURL != "" && argValue(args, "--listen-client-urls") == etcdURL {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// commandLines reads the arguments of every process.
func commandLines() (map[int][]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int][]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		out[pid] = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	return out, nil
}

// argValue is the value of a --flag=value argument.
func argValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// allClusters is every cluster of the workload: the agent's and the
// members.
func (b *bench) allClusters() []*cluster {
	return append([]*cluster{b.srcC}, b.tgtC...)
}

// cpuUse is the CPU seconds used so far by the workload's control planes
// and by the agent.
type cpuUse struct{ controlPlane, agent float64 }

func (b *bench) cpuUse() (cpuUse, error) {
	cp, err := controlPlaneCPU(b.allClusters())
	if err != nil {
		return cpuUse{}, err
	}
	a, err := b.agent.usage()
	return cpuUse{controlPlane: cp, agent: a.CPUSeconds}, err
}
