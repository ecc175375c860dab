// Package events records core/v1 Events about the objects the agents act
// on, as client-go's tools/record does: asynchronously, an Event repeated
// about the same object counted on one Event object, similar Events folded
// into one, and a burst of them per object limited.
//
// # Why it is written by hand
//
// tools/record works on the Go types of k8s.io/api/core/v1, whose package
// registers every core type with its methods (Pods, Services, Volumes...,
// 1.7 MB of code), and computes its count updates with strategic merge
// patches, which bring kube-openapi, gnostic, two YAML libraries and
// protobuf descriptors: together about 4 MB of the member binary, a fifth
// of it, and most of those pages resident in every agent. The member needs
// none of it otherwise. This package writes the Event's JSON through the
// REST client and follows tools/record (v0.36) where it decides what is
// written:
//
//   - An Event is named <object>.<nanoseconds in hex> (a UUID when that is
//     not a valid name), in the object's namespace (default for a
//     cluster-scoped object), with source.component and
//     reportingComponent set to the recorder's component.
//   - The same Event again (same object, type, reason and message) patches
//     the count and lastTimestamp of the Event written before, as long as
//     the recorder remembers it (the last 4,096 Events); if that Event is
//     gone, a new one is created.
//   - When an object gets its 10th distinct message of one type and reason
//     within 10 minutes, the message is replaced by "(combined from similar
//     events): " and the last message, and those Events count on one Event
//     object. (That Event names its reportingComponent, where
//     tools/record leaves it empty.)
//   - An object may get 25 Events of one type at once, then one every 5
//     minutes; the others are dropped.
//   - Events wait in a queue of 1,000 and are written one at a time; when
//     the queue is full an Event is dropped (and logged). A write that
//     fails for want of an answer is tried again, up to 12 times 10 s
//     apart; a write the API server refuses is not.
//
// The tests hold it to these rules against an API server
// (events_test.go).
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// The types of Events, as core/v1 names them.
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// Recorder records Events about objects.
type Recorder interface {
	// Eventf records an Event of eventtype (Normal or Warning) about
	// object, with reason and the message messageFmt formats with args.
	// It does not block: the Event is written in the background.
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// What tools/record's defaults are; see the package documentation.
const (
	queueLength      = 1000
	rememberedEvents = 4096
	similarMessages  = 10
	similarWindow    = 10 * time.Minute
	burstPerObject   = 25
	refillPerObject  = 5 * time.Minute
	triesPerEvent    = 12
	retryInterval    = 10 * time.Second
	combinedPrefix   = "(combined from similar events): "
	// namespaceTerminating is the cause of the API server's refusal of an
	// object in a namespace being deleted.
	namespaceTerminating = "NamespaceTerminating"
)

// Options are what a Broadcaster is made of besides its cluster.
type Options struct {
	// Component is the Events' source.component and reportingComponent.
	Component string
	// Scheme gives the kind of typed objects whose TypeMeta is empty; an
	// object whose kind is known neither way gets no Event (logged).
	Scheme *runtime.Scheme
	// Log receives the Events that could not be written.
	Log logr.Logger

	// For tests: the clock, and the pause between tries of a write.
	clock         clock.Clock
	retryInterval time.Duration
}

// Broadcaster writes the Events recorded through it to one cluster.
type Broadcaster struct {
	opts   Options
	client rest.Interface
	queue  chan *Event
	cache  *correlator

	mu     sync.RWMutex
	closed bool // Shutdown was called: Events are dropped
	ctx    context.Context
	cancel context.CancelFunc
}

var _ Recorder = (*Broadcaster)(nil)

// New returns a Broadcaster writing to the cluster of cfg, through
// httpClient's connections if it is not nil, and starts its writer.
// Shutdown stops it.
func New(cfg *rest.Config, httpClient *http.Client, opts Options) (*Broadcaster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath, cfg.GroupVersion = "", nil
	cfg.AcceptContentTypes, cfg.ContentType = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	// The metav1 scheme decodes the API server's errors; the Events
	// themselves are JSON of Event.
	cfg.NegotiatedSerializer = metainternalversionscheme.Codecs.WithoutConversion()
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, err
		}
	}
	client, err := rest.UnversionedRESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("events client: %w", err)
	}
	return start(client, opts), nil
}

func start(client rest.Interface, opts Options) *Broadcaster {
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	if opts.retryInterval == 0 {
		opts.retryInterval = retryInterval
	}
	b := &Broadcaster{opts: opts, client: client, queue: make(chan *Event, queueLength), cache: newCorrelator(opts.clock)}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	go b.write()
	return b
}

// Shutdown stops taking Events. Those queued are still written, each tried
// once, by the writer, which Shutdown does not wait for.
func (b *Broadcaster) Shutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.cancel()
		close(b.queue)
	}
}

// Eventf implements Recorder.
func (b *Broadcaster) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	log := b.opts.Log
	if eventtype != Normal && eventtype != Warning {
		log.Error(nil, "Unsupported event type", "eventType", eventtype, "reason", reason)
		return
	}
	ref, err := b.reference(object)
	if err != nil {
		log.Error(err, "Cannot record an Event about the object", "reason", reason)
		return
	}
	e := newEvent(ref, b.opts.Component, eventtype, reason, fmt.Sprintf(messageFmt, args...), b.opts.clock.Now())
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return
	}
	select {
	case b.queue <- e:
	default:
		log.Error(nil, "Too many Events queued: dropped one", "object", ref.Namespace+"/"+ref.Name, "reason", reason, "message", e.Message)
	}
}

// reference is what an Event says of the object it is about.
func (b *Broadcaster) reference(object runtime.Object) (ObjectReference, error) {
	gvk := object.GetObjectKind().GroupVersionKind()
	if gvk.Empty() && b.opts.Scheme != nil {
		if gvks, _, err := b.opts.Scheme.ObjectKinds(object); err == nil {
			gvk = gvks[0]
		}
	}
	if gvk.Empty() {
		return ObjectReference{}, fmt.Errorf("the kind of %T is not known", object)
	}
	m, err := meta.Accessor(object)
	if err != nil {
		return ObjectReference{}, err
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return ObjectReference{Kind: kind, APIVersion: apiVersion, Namespace: m.GetNamespace(), Name: m.GetName(),
		UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}, nil
}

// write writes the queued Events until the queue is closed.
func (b *Broadcaster) write() {
	for e := range b.queue {
		w, ok := b.cache.correlate(e)
		if !ok {
			continue
		}
		for try := 1; ; try++ {
			written, err := b.send(w)
			if err == nil {
				b.cache.written(w.key, written)
				break
			}
			if !retriable(err) {
				log := b.opts.Log.V(1)
				if !apierrors.IsAlreadyExists(err) && !apierrors.HasStatusCause(err, namespaceTerminating) {
					log = b.opts.Log
				}
				log.Error(err, "The API server refused an Event (not tried again)", "event", w.event.Name, "reason", w.event.Reason)
				break
			}
			if try >= triesPerEvent || b.ctx.Err() != nil {
				b.opts.Log.Error(err, "Cannot write an Event", "event", w.event.Name, "reason", w.event.Reason, "tries", try)
				break
			}
			b.opts.Log.V(1).Info("Cannot write an Event; trying again", "event", w.event.Name, "reason", w.event.Reason, "try", try, "error", err.Error())
			// The first pause is random, so that agents that lost the
			// same API server do not all come back at once.
			pause := b.opts.retryInterval
			if try == 1 {
				pause = time.Duration(rand.Float64() * float64(pause)) //nolint:gosec // a spread of pauses, not a secret
			}
			select {
			case <-b.ctx.Done():
			case <-b.opts.clock.After(pause):
			}
		}
	}
}

// send creates w's Event, or patches the one it repeats; if that one is
// gone it creates it anew.
func (b *Broadcaster) send(w correlated) (*Event, error) {
	e := w.event
	// The writes of one Event are bounded by the client's timeout; the
	// broadcaster's context only stops the pauses between tries, so that
	// what was queued before Shutdown is still written.
	ctx := context.Background()
	if w.repeat {
		body, err := json.Marshal(map[string]any{"count": e.Count, "lastTimestamp": e.LastTimestamp, "message": e.Message})
		if err != nil {
			return nil, err
		}
		got, err := b.decode(b.client.Patch(types.StrategicMergePatchType).AbsPath(eventsPath(e.Namespace, e.Name)...).
			Body(body).Do(ctx).Raw())
		if !apierrors.IsNotFound(err) {
			return got, err
		}
	}
	e.ResourceVersion = ""
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return b.decode(b.client.Post().AbsPath(eventsPath(e.Namespace)...).Body(body).Do(ctx).Raw())
}

func (b *Broadcaster) decode(raw []byte, err error) (*Event, error) {
	if err != nil {
		return nil, err
	}
	out := &Event{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decoding the Event the API server returned: %w", err)
	}
	return out, nil
}

func eventsPath(namespace string, name ...string) []string {
	return append([]string{"/api/v1/namespaces", namespace, "events"}, name...)
}

// retriable reports whether a write that failed with err may succeed
// later: the API server did not answer, or not with a Status.
func retriable(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status)
}

// newEvent is a new Event about ref.
func newEvent(ref ObjectReference, component, eventtype, reason, message string, now time.Time) *Event {
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	t := metav1.NewTime(now)
	return &Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(ref.Name, now), Namespace: namespace},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Source:              EventSource{Component: component},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                eventtype,
		ReportingController: component,
	}
}

// eventName is <name>.<now in nanoseconds, hex>, or a UUID where that is
// not a valid name (a name of 253 characters).
func eventName(name string, now time.Time) string {
	n := fmt.Sprintf("%s.%x", name, now.UnixNano())
	if len(validation.IsDNS1123Subdomain(n)) > 0 {
		return uuid.NewString()
	}
	return n
}

// Event is a core/v1 Event: the fields this package writes, with the
// names core/v1 gives them in JSON.
type Event struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	InvolvedObject      ObjectReference `json:"involvedObject"`
	Reason              string          `json:"reason,omitempty"`
	Message             string          `json:"message,omitempty"`
	Source              EventSource     `json:"source"`
	FirstTimestamp      metav1.Time     `json:"firstTimestamp"`
	LastTimestamp       metav1.Time     `json:"lastTimestamp"`
	Count               int32           `json:"count,omitempty"`
	Type                string          `json:"type,omitempty"`
	ReportingController string          `json:"reportingComponent"`
	ReportingInstance   string          `json:"reportingInstance"`
}

// ObjectReference is core/v1's, without fieldPath.
type ObjectReference struct {
	Kind            string    `json:"kind,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Name            string    `json:"name,omitempty"`
	UID             types.UID `json:"uid,omitempty"`
	APIVersion      string    `json:"apiVersion,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
}

// EventSource is core/v1's.
type EventSource struct {
	Component string `json:"component,omitempty"`
	Host      string `json:"host,omitempty"`
}
