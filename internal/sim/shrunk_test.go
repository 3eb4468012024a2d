package sim

import (
	"testing"
	"time"
)

// Shrunk schedules of real runs: each a planted bug's finding as
// -sim.shrink reduced it, kept as a regression test. It passes on today's
// code and fails with the bug planted (docs/testing.md, "Shrinking").

// TestShrunkFenceNotRaised is seed 2's run with the planted bug "fence not
// raised" (Mutations: FenceAbove in internal/script/fence.go returns the
// highest reading, not one more), shrunk on 2026-12-07 from edcffa4's tree:
// the 10 s run (416 operations in 137 rounds, 17 faults; fencing first at
// 166 ms) to one round of worker 0 and no fault, in 2 s. The round takes
// one key 13 times, each Lock released before the next (13 ms in all); each
// node's clock is up to 300 ms ahead of the bubble's or behind it (Skew),
// and a Lock whose quorum's clocks read behind the counter the Lock before
// it left gets, with the bug, that Lock's fence: 10 fencing findings
// (history fcb02a6dc03f59db).
func TestShrunkFenceNotRaised(t *testing.T) {
	Replay(t, Schedule{
		Seed:     2,
		Duration: 2 * time.Second,
		Workers:  []int{0},
		Rounds: map[int][]Round{
			0: {{N: 3, At: 1806 * time.Millisecond}},
		},
		Faults: []int{},
	})
}
