package events

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// correlator decides what an Event becomes before it is written, as
// tools/record's EventCorrelator does: it folds similar Events into one,
// counts repeats on the Event written before, and drops the Events over an
// object's budget. Only the broadcaster's writer calls it.
type correlator struct {
	clock clock.PassiveClock
	// similar holds, per object, type and reason, the distinct messages
	// seen lately (similarRecord).
	similar *lru.Cache
	// seen holds, per Event key, what was written of it last (seenEvent).
	seen *lru.Cache
	// budgets holds, per object and type, its token bucket.
	budgets *lru.Cache
}

type similarRecord struct {
	messages sets.Set[string]
	last     time.Time
}

type seenEvent struct {
	count           int32
	firstTimestamp  metav1.Time
	name            string
	resourceVersion string
}

// correlated is an Event as it is to be written: repeat says it patches
// the Event written before under key.
type correlated struct {
	event  *Event
	key    string
	repeat bool
}

func newCorrelator(c clock.PassiveClock) *correlator {
	return &correlator{clock: c, similar: lru.New(rememberedEvents), seen: lru.New(rememberedEvents), budgets: lru.New(rememberedEvents)}
}

// correlate returns what e becomes; false when it is over its object's
// budget and is dropped. A dropped repeat still counts: the next one
// written carries its count.
func (c *correlator) correlate(e *Event) (correlated, bool) {
	w := c.fold(e)
	if last, ok := c.seen.Get(w.key); ok {
		last := last.(seenEvent)
		w.event.Name, w.event.ResourceVersion = last.name, last.resourceVersion
		w.event.FirstTimestamp = last.firstTimestamp
		w.event.Count = last.count + 1
		w.repeat = true
	}
	c.remember(w.key, w.event)
	return w, c.withinBudget(w.event)
}

// fold replaces e by the combined Event of its object, type and reason
// once they have had similarMessages distinct messages within
// similarWindow.
func (c *correlator) fold(e *Event) correlated {
	now := c.clock.Now()
	group := key(e, e.Type, e.Reason, e.ReportingController, e.ReportingInstance)
	var r similarRecord
	if v, ok := c.similar.Get(group); ok {
		r = v.(similarRecord)
	}
	if now.Sub(r.last) > similarWindow {
		r = similarRecord{messages: sets.New[string]()}
	}
	r.messages.Insert(e.Message)
	r.last = now
	c.similar.Add(group, r)
	if r.messages.Len() < similarMessages {
		return correlated{event: e, key: key(e, e.Type, e.Reason, e.Message)}
	}
	r.messages.PopAny() // the set grows no larger
	combined := newEvent(e.InvolvedObject, e.Source.Component, e.Type, e.Reason, combinedPrefix+e.Message, now)
	return correlated{event: combined, key: group}
}

// remember records what is to be written of e under k.
func (c *correlator) remember(k string, e *Event) {
	c.seen.Add(k, seenEvent{count: e.Count, firstTimestamp: e.FirstTimestamp, name: e.Name, resourceVersion: e.ResourceVersion})
}

// written records the Event the API server returned for the one written
// under k: its name and resourceVersion are what the next repeat patches.
func (c *correlator) written(k string, got *Event) {
	c.remember(k, got)
}

// withinBudget takes a token of e's object and type: a burst of
// burstPerObject, then one per refillPerObject.
func (c *correlator) withinBudget(e *Event) bool {
	k := key(e, e.Type)
	b, ok := c.budgets.Get(k)
	if !ok {
		b = flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(float32(time.Second)/float32(refillPerObject), burstPerObject, c.clock)
		c.budgets.Add(k, b)
	}
	return b.(flowcontrol.PassiveRateLimiter).TryAccept()
}

// key joins the Event's source and object with more.
func key(e *Event, more ...string) string {
	o := e.InvolvedObject
	return strings.Join(append([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion}, more...), "\x00")
}
