package main

import (
	"maps"
	"testing"
)

func TestWatchesBetween(t *testing.T) {
	// mark is an API server with open WATCHes and ended WATCHes (by
	// resource), of which the bench opened and ended benchOpened and
	// benchEnded.
	mark := func(open, ended, benchOpened, benchEnded map[string]float64) apiMark {
		m := apiMark{server: apiSnapshot{requests: counts{}, watchesOpen: open, unresponsive: map[string]float64{}}, bench: counts{}, benchOpened: counts{}}
		for res, n := range ended {
			m.server.requests["WATCH "+res] = n
		}
		for res, n := range benchOpened {
			m.benchOpened["WATCH "+res] = n
		}
		for res, n := range benchEnded {
			m.bench["WATCH "+res] = n
		}
		return m
	}
	type m = map[string]float64
	own := m{"secrets": 1} // the API server's own informer
	for _, tc := range []struct {
		name         string
		a, b         apiMark
		newProcess   bool
		wantOpened   m
		wantRestarts m
		wantOpen     m
	}{{
		name: "agent started: three informers, no restart",
		a:    mark(m{"secrets": 2}, nil, m{"secrets": 1}, nil),
		b:    mark(m{"secrets": 5}, nil, m{"secrets": 1}, nil), newProcess: true,
		wantOpened: m{"secrets": 3}, wantRestarts: m{}, wantOpen: m{"secrets": 3},
	}, {
		name: "agent started: two of its watches closed and reopened, one of the bench's too",
		a:    mark(m{"secrets": 2}, m{"secrets": 10}, m{"secrets": 1}, nil),
		b:    mark(m{"secrets": 5}, m{"secrets": 13}, m{"secrets": 2}, m{"secrets": 1}), newProcess: true,
		wantOpened: m{"secrets": 5}, wantRestarts: m{"secrets": 2}, wantOpen: m{"secrets": 3},
	}, {
		name:       "same process: a restart",
		a:          mark(m{"secrets": 5}, m{"secrets": 3}, m{"secrets": 1}, nil),
		b:          mark(m{"secrets": 5}, m{"secrets": 4}, m{"secrets": 1}, nil),
		wantOpened: m{"secrets": 1}, wantRestarts: m{"secrets": 1}, wantOpen: m{"secrets": 3},
	}, {
		name:       "same process: a kind newly watched",
		a:          mark(m{"secrets": 5}, nil, m{"secrets": 1}, nil),
		b:          mark(m{"secrets": 5, "configmaps": 3}, nil, m{"secrets": 1}, nil),
		wantOpened: m{"configmaps": 3}, wantRestarts: m{}, wantOpen: m{"secrets": 3, "configmaps": 3},
	}, {
		name: "restarted agent: the old one's watches end in the phase",
		a:    mark(m{"secrets": 5}, m{"secrets": 3}, m{"secrets": 1}, nil),
		b:    mark(m{"secrets": 5}, m{"secrets": 6}, m{"secrets": 1}, nil), newProcess: true,
		wantOpened: m{"secrets": 3}, wantRestarts: m{}, wantOpen: m{"secrets": 3},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			agent := tc.b.server.requests.sub(tc.a.server.requests).sub(tc.b.bench.sub(tc.a.bench))
			w := watchesBetween(tc.a, tc.b, agent, tc.newProcess, own)
			for name, got := range map[string][2]m{"opened": {w.Opened, tc.wantOpened}, "restarts": {w.Restarts, tc.wantRestarts}, "open at the end": {w.OpenAtEnd, tc.wantOpen}} {
				if !maps.Equal(got[0], got[1]) {
					t.Errorf("%s = %v, want %v", name, got[0], got[1])
				}
			}
		})
	}
}
