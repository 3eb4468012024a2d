package history

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNemesisCheckerStarved feeds the starved rule hand-made histories of
// a reader that waits 5 s for key k, bound 2 s: starved when a writer
// that waited was stopped or killed and nothing else kept the reader out,
// clean when a live writer waited, an exclusive Lock held the key, a
// quorum of nodes was down or the reader's own process was stopped.
func TestNemesisCheckerStarved(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	sp := func(from, to int) Span { return Span{at(from), at(to)} }
	iv := func(from, to int) Interval { return Interval{at(from), at(to)} }
	reader := Wait{Proc: "p0", Keys: []string{"k"}, Shared: true, TTL: time.Second, Span: sp(0, 5000), Got: true}
	writer := func(proc string, from, to int) Wait {
		return Wait{Proc: proc, Keys: []string{"k"}, TTL: 100 * time.Millisecond, Span: sp(from, to)}
	}
	pause := func(proc string, from, to int) Pause { return Pause{Proc: proc, Interval: iv(from, to)} }
	down := func(node, from, to int) NodeDown { return NodeDown{Node: node, Interval: iv(from, to)} }
	held := &Lock{ID: 1, Client: "c", Key: "k", Acquires: []Span{sp(0, 10)}, Proofs: []Proof{{at(10), at(4000)}}, Releases: []Span{sp(1000, 1001)}}
	record := func(r Record) Record {
		r.StarvedBound, r.Nodes = 2*time.Second, 5
		return r
	}
	tests := []struct {
		name    string
		r       Record
		starved bool
	}{
		{"a live writer waits all along", record(Record{Waits: []Wait{reader, writer("p1", 0, 6000)}}), false},
		{"the waiting writer's process is stopped", record(Record{Waits: []Wait{reader, writer("p1", 0, 6000)},
			Pauses: []Pause{pause("p1", 500, 4500)}}), true},
		{"stopped, for less than the bound", record(Record{Waits: []Wait{reader, writer("p1", 0, 6000)},
			Pauses: []Pause{pause("p1", 500, 2000)}}), false},
		{"the waiting writer's process is killed", record(Record{Waits: []Wait{reader, {Proc: "p1", Keys: []string{"k"}, TTL: 100 * time.Millisecond, Span: Span{Start: at(0)}}},
			Kills: []Kill{{Proc: "p1", At: at(500)}}}), true},
		{"a writer of several keys", record(Record{Waits: []Wait{reader, {Proc: "p1", Keys: []string{"a", "k"}, TTL: time.Second, Span: sp(0, 6000)}}}), false},
		{"a writer of another key", record(Record{Waits: []Wait{reader, {Proc: "p1", Keys: []string{"a"}, Span: sp(0, 6000)}}}), true},
		{"nothing keeps it out", record(Record{Waits: []Wait{reader}}), true},
		{"a reader that waits less than the bound", record(Record{Waits: []Wait{{Proc: "p0", Keys: []string{"k"}, Shared: true, Span: sp(0, 1900)}}}), false},
		{"an exclusive Lock holds until its validity ends", record(Record{Waits: []Wait{reader}, Locks: []*Lock{held}}), false},
		{"a quorum of nodes is down", record(Record{Waits: []Wait{reader, writer("p1", 0, 6000)}, Pauses: []Pause{pause("p1", 500, 4500)},
			Down: []NodeDown{down(0, 0, 3000), down(1, 1000, 5000), down(2, 2000, 4000), down(0, 2500, 4500)}}), false},
		{"a minority of nodes is down", record(Record{Waits: []Wait{reader, writer("p1", 0, 6000)}, Pauses: []Pause{pause("p1", 500, 4500)},
			Down: []NodeDown{down(0, 0, 5000), down(1, 0, 5000)}}), true},
		{"the reader's own process is stopped", record(Record{Waits: []Wait{reader}, Pauses: []Pause{pause("p0", 1000, 4000)}}), false},
		{"a reader killed before it returned", record(Record{Waits: []Wait{{Proc: "p0", Keys: []string{"k"}, Shared: true, Span: Span{Start: at(0)}}}}), false},
		{"a reader that came past the bound after the writer stopped", record(Record{Waits: []Wait{{Proc: "p0", Keys: []string{"k"}, Shared: true, Span: sp(3000, 8000)}, writer("p1", 0, 9000)},
			Pauses: []Pause{pause("p1", 500, 700)}}), false},
		{"not judged without a bound", Record{Waits: []Wait{reader}}, false},
	}
	behindStopped := []string{"the waiting writer's process is stopped", "stopped, for less than the bound",
		"the waiting writer's process is killed", "a quorum of nodes is down", "a minority of nodes is down"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Check(&tc.r)
			// The reader waited behind a stopped writer where the
			// writer's process was stopped or killed within its wait.
			behind := 0
			if slices.Contains(behindStopped, tc.name) {
				behind = 1
			}
			assert.Equal(t, behind, v.ReadsBehindStopped, "readers behind a stopped writer")
			if tc.starved {
				assert.Equal(t, 1, v.LongReads, "the reader's wait was judged")
				assert.Equal(t, 1, v.Count("starved"), v.Describe(5))
				assert.Len(t, v.Found, 1, "nothing else: %s", v.Describe(5))
			} else {
				assert.Empty(t, v.Found, v.Describe(5))
			}
		})
	}
}

func TestSubtract(t *testing.T) {
	t0 := time.Now()
	iv := func(from, to int) Interval {
		return Interval{t0.Add(time.Duration(from) * time.Millisecond), t0.Add(time.Duration(to) * time.Millisecond)}
	}
	assert.Equal(t, []Interval{iv(0, 10), iv(20, 30), iv(40, 50)}, Subtract(iv(0, 50), []Interval{iv(-5, 0), iv(10, 20), iv(30, 40)}))
	assert.Equal(t, []Interval(nil), Subtract(iv(0, 50), []Interval{iv(-5, 60)}))
	assert.Equal(t, []Interval{iv(0, 50)}, Subtract(iv(0, 50), []Interval{iv(50, 60)}))
}
