package redlock_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The nemesis's clock faults: each node runs under libfaketime
// (redistest.WithFakeClock), and a fault moves its wall clock, the one
// Redis expires keys by and TIME reads, without touching ours.
//
// "clock" stays within the documented assumption, that no node's clock
// runs ahead of a Client's by more than the drift allowance over one TTL
// (doc.go): a node's clock either steps by at most nemClockStepMax, forward
// or back, and steps back at heal, or runs fast or slow by at most
// nemClockRateMax until heal, which keeps the offset gained. What it does
// to each use of the node's clock:
//   - a key's expiry (PX, and the deadlines that shared Locks' and
//     permits' entries and chained values store as node-clock
//     milliseconds): a step forward, or a fast rate, ends it early by at
//     most the allowance the Client took off its validity; a step back,
//     or a slow rate, keeps it longer by as much, which the lockout bound
//     (a second past the longest TTL) and keyLife (twice the allowance)
//     absorb;
//   - tombstones live 2 s, of which 1.4 s are needed: a few milliseconds
//     less is nothing;
//   - the restart guard (2 s by the node's clock, from the first guarded
//     acquire that sees the node new) ends up to 0.5% and a step early,
//     within the 22 ms the longest TTL's Locks leave of it;
//   - fences read the clock only to rise above it: counters, never lost
//     but by a restart or FLUSHALL, carry the order, and a wiped node
//     votes (and is read) only after its 2 s guard, far longer than the
//     nodes' clocks ever disagree (docs/fencing.md).
//
// "clock-beyond" is the control: forward steps of seconds, on one node at
// a time.

// The bound of a "clock" fault, from the Clients' drift allowance (the
// defaults: the nemesis's Clients do not set WithDrift) at the shortest
// TTL, where it is smallest: 50ms×1% + 2ms = 2.5ms. A rate error of
// nemClockRateMax takes 0.25 ms of it over that TTL. Steps are undone at
// heal, so a node's step offset stays within ±nemClockStepMax, and the
// most its clock can gain on ours by steps over any stretch is two of
// them (back, healed forward, then a forward one). Half of what is left is
// kept as margin, for what no model here covers (a node's clock that the
// event loop reads between two steps).
const (
	nemClockRateMax = redlock.DefaultDriftFactor / 2 // 0.5%
	nemClockRateMin = nemClockRateMax * 3 / 5        // 0.3%
	nemClockStepMax = (time.Duration(float64(nemMinTTL)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst -
		time.Duration(float64(nemMinTTL)*nemClockRateMax)) / 4 // 562.5µs
	nemClockStepMin = nemClockStepMax / 5
	// nemClockDrift is how far from the real time a node's clock may
	// wander before its rate faults pull it back: rates keep what they
	// gained.
	nemClockDrift = 5 * time.Millisecond
)

// nemClockOption is the bed's option for kinds: every node under
// libfaketime if the run faults clocks.
func nemClockOption(kinds []string) redistest.Option {
	if slices.ContainsFunc(kinds, func(k string) bool { return strings.HasPrefix(k, "clock") }) {
		return redistest.WithFakeClock()
	}
	return redistest.WithArgs()
}

// injectClock starts a clock fault of kind on node i and reports whether it
// lasts until healClock. "clock": a step of nemClockStepMin to
// nemClockStepMax either way, or a rate nemClockRateMin to nemClockRateMax
// fast or slow (towards the real time once the node is nemClockDrift from
// it). "clock-beyond": a step forward of half to three longest TTLs, which
// stays: over one hold, steps on several nodes expire the holder's key on a
// majority.
func (run *nemRun) injectClock(t *testing.T, r *rand.Rand, i int, kind string) bool {
	s := run.bed.Servers[i]
	if run.clockSteps == nil {
		run.clockSteps = make([]time.Duration, len(run.bed.Servers))
	}
	step, rate := time.Duration(0), 1.0
	switch {
	case kind == "clock-beyond":
		step = randDur(r, nemMaxTTL/2, 3*nemMaxTTL)
	case r.IntN(2) == 0:
		step = randDur(r, nemClockStepMin, nemClockStepMax)
		if r.IntN(2) == 0 {
			step = -step
		}
	default:
		d := nemClockRateMin + r.Float64()*(nemClockRateMax-nemClockRateMin)
		off, _ := s.Clock()
		if off > nemClockDrift || off >= -nemClockDrift && r.IntN(2) == 0 {
			d = -d
		}
		rate = 1 + d
	}
	if err := s.AdjustClock(step, rate); err != nil {
		t.Errorf("clock of node %d: %v", i, err)
		return false
	}
	off, _ := s.Clock()
	run.rec.event(time.Now(), nil, "clock of node %d: step %v, rate %.4f, now %v ahead", i, step, rate, off)
	if kind == "clock-beyond" {
		return false
	}
	run.clockSteps[i] = step
	return true
}

// healClock ends a "clock" fault on node i: the real rate again, keeping
// what a rate gained, and a step undone (a step back within the same
// bound).
func (run *nemRun) healClock(t *testing.T, i int) {
	s := run.bed.Servers[i]
	step := -run.clockSteps[i]
	run.clockSteps[i] = 0
	if err := s.AdjustClock(step, 1); err != nil {
		t.Errorf("clock of node %d: %v", i, err)
	}
}
