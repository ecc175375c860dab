package leader

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExpired checks the takeover decision: a Lease expires its duration
// after it was last seen to change, on our clock, and not a moment before.
func TestExpired(t *testing.T) {
	seen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		now     time.Time
		seconds int32
		want    bool
	}{
		{"just seen", seen, 15, false},
		{"a moment before the duration", seen.Add(15*time.Second - time.Nanosecond), 15, false},
		{"at the duration", seen.Add(15 * time.Second), 15, true},
		{"long after", seen.Add(time.Hour), 15, true},
		{"released (one second) after a second", seen.Add(time.Second), 1, true},
		{"zero seconds", seen, 0, true},
		// Our clock went back since: not expired, as in client-go.
		{"clock went back", seen.Add(-time.Minute), 15, false},
	} {
		if got := expired(seen, tc.now, tc.seconds); got != tc.want {
			t.Errorf("%s: expired = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestClaim checks what a candidate writes: a renewal keeps acquireTime
// and the transitions, a takeover from another holder or from nobody
// counts one transition and starts a new acquireTime.
func TestClaim(t *testing.T) {
	then := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := then.Add(time.Minute)
	for _, tc := range []struct {
		name    string
		current record
		want    record
	}{{
		name:    "renewal",
		current: record{holder: "me", seconds: 15, acquired: then, renewed: then, transitions: 3},
		want:    record{holder: "me", seconds: 8, acquired: then, renewed: now, transitions: 3},
	}, {
		name:    "takeover from another holder",
		current: record{holder: "other", seconds: 15, acquired: then, renewed: then, transitions: 3},
		want:    record{holder: "me", seconds: 8, acquired: now, renewed: now, transitions: 4},
	}, {
		name:    "takeover of a released lease",
		current: released(record{holder: "other", transitions: 3}, then),
		want:    record{holder: "me", seconds: 8, acquired: now, renewed: now, transitions: 4},
	}} {
		if got := claim(tc.current, "me", 8, now); !got.equal(tc.want) {
			t.Errorf("%s: claim = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestReleased checks the record of a leader that steps down: client-go's,
// no holder and one second, so that others take over at once.
func TestReleased(t *testing.T) {
	then := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := then.Add(time.Minute)
	got := released(record{holder: "me", seconds: 15, acquired: then, renewed: then, transitions: 3}, now)
	want := record{holder: "", seconds: 1, acquired: now, renewed: now, transitions: 3}
	if !got.equal(want) {
		t.Errorf("released = %+v, want %+v", got, want)
	}
}

// TestRecordRoundTrip checks that a record survives being stored in a
// Lease spec, that an empty spec reads as the zero record, and that equal
// sees a change of any field but not a change of time zone.
func TestRecordRoundTrip(t *testing.T) {
	r := record{holder: "me", seconds: 15, acquired: time.Unix(100, 0), renewed: time.Unix(200, 5000), transitions: 2}
	spec := r.spec()
	if got := recordOf(&spec); !got.equal(r) {
		t.Errorf("recordOf(spec()) = %+v, want %+v", got, r)
	}
	if got := recordOf(&coordinationv1.LeaseSpec{}); !got.equal(record{}) {
		t.Errorf("recordOf(empty spec) = %+v, want the zero record", got)
	}
	utc := r
	utc.renewed = metav1.NewMicroTime(r.renewed).UTC()
	if !utc.equal(r) {
		t.Error("the same instant in another zone is a change")
	}
	for name, change := range map[string]func(*record){
		"holder":      func(r *record) { r.holder = "other" },
		"seconds":     func(r *record) { r.seconds++ },
		"acquired":    func(r *record) { r.acquired = r.acquired.Add(time.Microsecond) },
		"renewed":     func(r *record) { r.renewed = r.renewed.Add(time.Microsecond) },
		"transitions": func(r *record) { r.transitions++ },
	} {
		changed := r
		change(&changed)
		if changed.equal(r) {
			t.Errorf("a change of %s is not seen", name)
		}
	}
}
