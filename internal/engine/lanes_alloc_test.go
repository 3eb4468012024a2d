package engine

import "testing"

// TestNewSequencerOneAllocation: for 1 to 7 nodes the sequencer and its
// lanes come in one allocation (every Acquire makes one).
func TestNewSequencerOneAllocation(t *testing.T) {
	for n := 1; n <= 7; n++ {
		var s *Lanes
		allocs := testing.AllocsPerRun(100, func() { s = NewLanes(n) })
		if allocs != 1 || len(s.lanes) != n {
			t.Errorf("NewLanes(%d): %v allocations, %d lanes; want 1 and %d", n, allocs, len(s.lanes), n)
		}
	}
}
