package clusters

import (
	"net/http"
	"testing"
	"time"
)

func TestAnswersInTime(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		took   time.Duration
		counts bool
	}{
		{"ok in time", http.StatusOK, 0, true},
		{"created in time", http.StatusCreated, 0, true},
		{"conflict: the API server decided", http.StatusConflict, 0, true},
		{"not found: the API server decided", http.StatusNotFound, 0, true},
		{"forbidden: it serves, not us", http.StatusForbidden, 0, true},
		{"late", http.StatusOK, 2 * time.Second, false},
		{"429: busy", http.StatusTooManyRequests, 0, false},
		{"500: its own failure", http.StatusInternalServerError, 0, false},
		{"503: not serving", http.StatusServiceUnavailable, 0, false},
		{"504: a proxy gave up on it", http.StatusGatewayTimeout, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answers{within: time.Second}
			before := time.Now()
			a.observe(time.Now().Add(-tc.took), &http.Response{StatusCode: tc.status})
			if got := a.since(before); got != tc.counts {
				t.Errorf("answered since before: %v, want %v", got, tc.counts)
			}
			if a.since(time.Now().Add(time.Millisecond)) {
				t.Error("answered since after the answer")
			}
		})
	}

	// Without the option nothing counts, and an older answer never hides a
	// newer one.
	var none *answers
	none.observe(time.Now(), &http.Response{StatusCode: http.StatusOK})
	if none.since(time.Time{}) {
		t.Error("a cluster without AnswerWithin answered")
	}
	a := &answers{within: time.Second}
	a.observe(time.Now(), &http.Response{StatusCode: http.StatusOK})
	mid := time.Now()
	a.last.Store(a.last.Load() + int64(time.Hour)) // a newer answer
	a.observe(time.Now(), &http.Response{StatusCode: http.StatusOK})
	if !a.since(mid.Add(30 * time.Minute)) {
		t.Error("an older answer replaced a newer one")
	}
}
