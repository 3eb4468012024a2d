package sim

import (
	"slices"
	"time"
)

// Schedule is one run of the simulator: a seed's run for a duration, less
// what a shrink left out of it. Everything a run does follows from its
// seed: each worker's round draws from a source of its own (the seed, the
// worker, the round), and so does each of the nemesis's faults (the seed
// and the fault's place in the run), so that leaving some out moves
// nothing else that is drawn. The zero value of each list keeps all.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	// Workers are the workers that run, by index (nil: all).
	Workers []int
	// Rounds are, per worker, the only rounds it runs, each from when it
	// started in the run the shrink began from; a worker not in the map
	// runs all its rounds, one after the other.
	Rounds map[int][]Round
	// Faults are the nemesis's faults that act, by their place among its
	// draws (nil: all; an empty list: none).
	Faults []int
	// Handovers makes it the run of Handovers, where Releases hand keys
	// to waiters of their Client, instead of Guarded's.
	Handovers bool `json:",omitempty"`
	// First stops the run at its first finding (a planted bug's run:
	// TestPlantedBugs), checking the history every simulated second.
	First bool `json:",omitempty"`
}

// Fault is one of the nemesis's faults that acted in a run: its place
// among the nemesis's draws, which fixes it, and when it acted, after the
// workload's start.
type Fault struct {
	K  int
	At time.Duration
}

// Round is one round of a worker: its place among the worker's rounds,
// which fixes its choices, and when it starts, after the workload's start.
type Round struct {
	N  int
	At time.Duration
}

// runs reports whether worker w runs.
func (s *Schedule) runs(w int) bool {
	return s == nil || s.Workers == nil || slices.Contains(s.Workers, w)
}

// rounds returns the rounds worker w runs, and whether they are listed
// (false: all of them).
func (s *Schedule) rounds(w int) ([]Round, bool) {
	if s == nil || s.Rounds == nil {
		return nil, false
	}
	r, ok := s.Rounds[w]
	return r, ok
}

// acts reports whether the nemesis's fault k acts.
func (s *Schedule) acts(k int) bool {
	return s == nil || s.Faults == nil || slices.Contains(s.Faults, k)
}
