package controller

import (
	"slices"
	"testing"
)

// The events of a source are handled unless they are our own last write
// of it, whether the watch brings that write before or after its answer;
// a change of somebody else's that arrives while our write is in flight is
// handled once the write is answered, and every event is handled when the
// write failed.
func TestOwnWrites(t *testing.T) {
	k := Key{Namespace: "app", Name: "db"}
	for _, tc := range []struct {
		name string
		// run plays the events and writes on o, noting handled events.
		run  func(o *ownWrites, event func(rv string))
		want []string
	}{
		{"our write, answered first", func(o *ownWrites, event func(string)) {
			end := o.begin(k)
			end("11")
			event("11")
		}, nil},
		{"our write, seen first", func(o *ownWrites, event func(string)) {
			end := o.begin(k)
			event("11")
			end("11")
		}, nil},
		{"somebody else's change while ours is in flight", func(o *ownWrites, event func(string)) {
			end := o.begin(k)
			event("11")
			event("12")
			end("12")
		}, []string{"11"}},
		{"our write failed", func(o *ownWrites, event func(string)) {
			end := o.begin(k)
			event("11")
			end("")
		}, []string{"11"}},
		{"no write", func(_ *ownWrites, event func(string)) {
			event("10")
			event("11")
		}, []string{"10", "11"}},
		{"a later change of the written version's successor", func(o *ownWrites, event func(string)) {
			end := o.begin(k)
			end("11")
			event("11")
			event("12")
		}, []string{"12"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &ownWrites{}
			var handled []string
			tc.run(o, func(rv string) { o.sort(k, rv, func() { handled = append(handled, rv) }) })
			if !slices.Equal(handled, tc.want) {
				t.Errorf("handled %v, want %v", handled, tc.want)
			}
		})
	}
}
