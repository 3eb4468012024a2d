package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNemesisCheckerLatency feeds the latency rule hand-made histories of
// a 100 ms TTL refused as too short for the nodes' latency, five nodes,
// three of them near (a round trip of 0.4 ms), two 75 ms away: a finding
// when the near quorum was untouched by faults for the quiet second before
// the call and during it; none when a fault acted on one of the near nodes
// then, or on the refused process's link to one, or the near nodes are a minority, or the TTL leaves too little for
// them.
func TestNemesisCheckerLatency(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	busy := func(node, from, to int) NodeDown { return NodeDown{Node: node, Interval: Interval{at(from), at(to)}} }
	onLink := func(node int, proc string, from, to int) NodeDown {
		d := busy(node, from, to)
		d.Proc = proc
		return d
	}
	near, far := 400*time.Microsecond, 150*time.Millisecond
	refusal := func(ttl time.Duration) LatencyRefusal {
		return LatencyRefusal{Proc: "c1", TTL: ttl, Span: Span{at(5000), at(5001)}}
	}
	record := func(rts []time.Duration, ttl time.Duration, b ...NodeDown) Record {
		return Record{RoundTrips: rts, Busy: b, LatencyRefusals: []LatencyRefusal{refusal(ttl)}, LatencyQuiet: time.Second,
			Drift: func(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }}
	}
	quorumNear := []time.Duration{near, far, near, far, near}
	tests := []struct {
		name    string
		r       Record
		finding bool
	}{
		{"a near quorum, quiet", record(quorumNear, 100*time.Millisecond), true},
		{"a fault on a near node long before", record(quorumNear, 100*time.Millisecond, busy(0, 0, 3900)), true},
		{"faults on the far nodes", record(quorumNear, 100*time.Millisecond, busy(1, 0, 6000), busy(3, 4000, 5000)), true},
		{"a fault on a near node within the quiet second", record(quorumNear, 100*time.Millisecond, busy(0, 0, 4100)), false},
		{"a fault on a near node during the call", record(quorumNear, 100*time.Millisecond, busy(2, 5000, 5200)), false},
		{"a fault on the refused process's link to a near node", record(quorumNear, 100*time.Millisecond, onLink(4, "c1", 4500, 4600)), false},
		{"a fault on another process's link to a near node", record(quorumNear, 100*time.Millisecond, onLink(4, "c2", 4500, 4600)), true},
		{"the near nodes a minority", record([]time.Duration{near, far, far, far, near}, 100*time.Millisecond), false},
		{"a TTL too short for the near nodes", record([]time.Duration{2 * time.Millisecond, far, 2 * time.Millisecond, far, 2 * time.Millisecond}, 9*time.Millisecond), false},
		{"not judged without a quiet time", func() Record { r := record(quorumNear, 100*time.Millisecond); r.LatencyQuiet = 0; return r }(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Check(&tc.r)
			want := 0
			if tc.finding {
				want = 1
			}
			assert.Equal(t, want, v.Count("latency"), "%+v", v.Found)
			for _, kind := range Kinds {
				if kind != "latency" {
					assert.Zero(t, v.Count(kind), kind)
				}
			}
			if tc.r.LatencyQuiet > 0 {
				assert.Equal(t, 1, v.LatencyRefusals, "the refusal was judged")
			}
		})
	}
}
