package controller

import "sync"

// ownWrites tells the watch events of our own writes of a source's
// metadata (status, copy-once record, an older version's finalizer) from
// everybody else's changes, so that a source is not reconciled again for
// what its last reconcile wrote: that was every status write, and with it
// twice the work for a new namespace (every source's "N/N namespaces
// synced" changes) or a deleted mirror.
//
// A write (patchSourceRecord) is conditioned on the resourceVersion it was
// computed from, so the version it makes differs from that one by our
// change alone; every other change comes with a resourceVersion of its
// own. The watch may bring the written version before the write's answer
// does (the agent's watches have a connection of their own): events that
// arrive while a write of their source is in flight wait for its answer,
// and are handled unless they are that write.
type ownWrites struct {
	mu sync.Mutex
	// last is the resourceVersion our last write of each source made; it
	// also tells a cache that lags behind that write (patchSourceRecord).
	last map[Key]string
	// inFlight holds, per source being written, the events that arrived
	// meanwhile.
	inFlight map[Key]*ownWrite
}

type ownWrite struct {
	writers int // writes of the source in flight
	events  []heldEvent
}

type heldEvent struct {
	resourceVersion string
	handle          func()
}

// begin notes a write of key's metadata; call the returned function with
// the resourceVersion it made, or "" when it failed.
func (o *ownWrites) begin(key Key) func(written string) {
	o.mu.Lock()
	if o.inFlight == nil {
		o.inFlight, o.last = map[Key]*ownWrite{}, map[Key]string{}
	}
	w := o.inFlight[key]
	if w == nil {
		w = &ownWrite{}
		o.inFlight[key] = w
	}
	w.writers++
	o.mu.Unlock()
	return func(written string) { o.end(key, w, written) }
}

func (o *ownWrites) end(key Key, w *ownWrite, written string) {
	o.mu.Lock()
	if written != "" {
		o.last[key] = written
	}
	w.writers--
	var held []heldEvent
	if w.writers == 0 {
		delete(o.inFlight, key)
		held = w.events
	}
	last := o.last[key]
	o.mu.Unlock()
	for _, e := range held {
		if e.resourceVersion != last {
			e.handle()
		}
	}
}

func (o *ownWrites) lastOf(key Key) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last[key]
}

// sort calls handle for an event of key at resourceVersion unless it is
// our own last write; while a write of key is in flight, once it is
// answered.
func (o *ownWrites) sort(key Key, resourceVersion string, handle func()) {
	o.mu.Lock()
	if resourceVersion != "" && o.last[key] == resourceVersion {
		o.mu.Unlock()
		return
	}
	if w := o.inFlight[key]; w != nil {
		w.events = append(w.events, heldEvent{resourceVersion: resourceVersion, handle: handle})
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	handle()
}

// forget drops what is known of key's writes: the source is gone.
func (o *ownWrites) forget(key Key) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, key)
}
