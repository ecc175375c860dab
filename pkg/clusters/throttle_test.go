package clusters

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	"k8s.io/client-go/rest"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"1", time.Second},
		{"3", 3 * time.Second},
		{"0", minThrottle},
		{"-4", minThrottle},
		{"", minThrottle},
		{"soon", minThrottle},
		{"120", maxThrottle},
		{now.Add(5 * time.Second).Format(http.TimeFormat), 5 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), minThrottle},
		{now.Add(time.Hour).Format(http.TimeFormat), maxThrottle},
	} {
		if got := retryAfter(tc.header, now); got != tc.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tc.header, got, tc.want)
		}
	}
}

// Whatever a server (or a proxy before it) sends, the back-off stays
// within its bounds.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "99999999999999999999", "Sun, 06 Nov 1994 08:49:37 GMT", ""} {
		f.Add(s)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, header string) {
		if d := retryAfter(header, now); d < minThrottle || d > maxThrottle {
			t.Fatalf("retryAfter(%q) = %s, out of [%s, %s]", header, d, minThrottle, maxThrottle)
		}
	})
}

// throttlingServer answers 429 with Retry-After retryAfter while throttling
// is set, else 200, and notes when each request arrived. Its 429 is API
// Priority and Fairness's, or with resource set the one of a resource
// whose watch cache is still filling.
type throttlingServer struct {
	*httptest.Server
	mu         sync.Mutex
	throttling bool
	resource   bool // set before the server starts
	retryAfter string
	arrived    []time.Time
}

func newThrottlingServer(t *testing.T, retryAfter string, resource bool) *throttlingServer {
	s := &throttlingServer{throttling: true, retryAfter: retryAfter, resource: resource}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		s.arrived = append(s.arrived, time.Now())
		throttling := s.throttling
		s.mu.Unlock()
		if throttling {
			w.Header().Set("Retry-After", s.retryAfter)
			if s.resource { // set before the server started
				// What a watch cache that is still filling answers.
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"storage is (re)initializing","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`))
				return
			}
			// What API Priority and Fairness answers.
			http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *throttlingServer) requests() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrived...)
}

func (s *throttlingServer) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttling = false
}

// client returns a REST client whose requests go through a closingTransport
// with the cluster back-off th, as a Cluster's do.
func (s *throttlingServer) client(t *testing.T, th *throttle) *rest.RESTClient {
	cfg := &rest.Config{Host: s.URL}
	cfg.NegotiatedSerializer = metainternalversionscheme.Codecs.WithoutConversion()
	httpClient := &http.Client{Transport: &closingTransport{next: http.DefaultTransport, conns: trackedDialer(nil).ConnectionTracker, throttle: th}}
	c, err := rest.UnversionedRESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A 429 ends the call that got it (client-go does not sleep and retry it
// inside the call), and holds the cluster's next requests for the
// Retry-After: one sent soon after waits for it; one that would wait
// longer than maxHold is refused without being sent. The probe is never
// held.
func TestThrottleHoldsTheClusterNotTheCall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	srv := newThrottlingServer(t, "1", false)
	th := &throttle{cluster: "busy"}
	c := srv.client(t, th)
	start := time.Now()
	err := c.Get().AbsPath("/api/v1/namespaces").Do(ctx).Error()
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "got %v", err)
	g.Expect(srv.requests()).To(HaveLen(1), "the call retried the 429 itself")
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second), "the call waited out the Retry-After itself")
	g.Expect(th.remaining()).To(BeNumerically(">", 0), "the cluster is held for the Retry-After")

	// The next request waits for the Retry-After, once, and is sent.
	srv.heal()
	err = c.Get().AbsPath("/api/v1/namespaces").Do(ctx).Error()
	g.Expect(err).NotTo(HaveOccurred())
	arrived := srv.requests()
	g.Expect(arrived).To(HaveLen(2))
	g.Expect(arrived[1].Sub(arrived[0])).To(BeNumerically(">=", 900*time.Millisecond), "sent before the Retry-After had passed")
	g.Expect(th.remaining()).To(BeNumerically("<=", 0), "the back-off is over")

	// A long Retry-After: the cluster is not asked before it has passed,
	// and a request is refused at once rather than held by a worker.
	long := newThrottlingServer(t, "10", false)
	th = &throttle{cluster: "busier"}
	c = long.client(t, th)
	g.Expect(apierrors.IsTooManyRequests(c.Get().AbsPath("/x").Do(ctx).Error())).To(BeTrue())
	start = time.Now()
	err = c.Get().AbsPath("/x").Do(ctx).Error()
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "got %v", err)
	delay, ok := apierrors.SuggestsClientDelay(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(delay).To(BeNumerically(">=", 9))
	g.Expect(time.Since(start)).To(BeNumerically("<", maxHold), "held for a back-off longer than maxHold")
	g.Expect(long.requests()).To(HaveLen(1), "sent while the cluster asked to be left alone")

	// The probe is sent all the same: it is how the cluster is known to
	// be alive.
	err = c.Get().AbsPath("/readyz").Do(context.WithValue(ctx, probeKey{}, true)).Error()
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue())
	g.Expect(long.requests()).To(HaveLen(2))
}

// A 429 about one resource (a watch cache still filling, a CRD just
// created) holds that request alone: client-go waits out its Retry-After
// and sends it again, and the cluster's other requests go at once.
func TestResourceThrottleHoldsTheCallNotTheCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	srv := newThrottlingServer(t, "1", true)
	th := &throttle{cluster: "filling"}
	c := srv.client(t, th)
	done := make(chan error, 1)
	go func() { done <- c.Get().AbsPath("/apis/example.com/v1/widgets").Do(ctx).Error() }()
	g.Eventually(srv.requests).Should(HaveLen(1))
	g.Expect(th.remaining()).To(BeNumerically("<=", 0), "the cluster is held for one resource's 429")
	srv.heal()
	g.Eventually(done, 5*time.Second).Should(Receive(BeNil()), "client-go sent the request again after its Retry-After")
	arrived := srv.requests()
	g.Expect(arrived).To(HaveLen(2))
	g.Expect(arrived[1].Sub(arrived[0])).To(BeNumerically(">=", 900*time.Millisecond), "sent again before the Retry-After had passed")
}
