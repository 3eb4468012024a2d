// Package history judges recorded histories of lock calls: the half-open
// intervals in which a holder may act on a key, the overlaps of different
// holders' intervals (Overlaps, which the chaos suite's checker and the
// nemesis's both judge exclusion with), and the nemesis's whole check of a
// Record (Check).
//
// All times are readings of one machine's clock: of one process's, with
// Go's monotonic part, when every client runs in the test's process; of
// several processes' when workers run apart (procs.go says how they are
// read), so that readings of different clients compare without any
// allowance for skew.
package history

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Interval is a half-open [From, To).
type Interval struct{ From, To time.Time }

// Empty reports whether iv holds no instant.
func (iv Interval) Empty() bool { return !iv.From.Before(iv.To) }

// Contains reports whether at is within iv.
func (iv Interval) Contains(at time.Time) bool { return !at.Before(iv.From) && at.Before(iv.To) }

// Len is iv's length, or less than zero for an empty interval that ends
// before it starts.
func (iv Interval) Len() time.Duration { return iv.To.Sub(iv.From) }

func (iv Interval) String() string {
	return fmt.Sprintf("[%s, %s)", iv.From.Format("15:04:05.000000"), iv.To.Format("15:04:05.000000"))
}

// Earliest returns the earlier of a and b.
func Earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Latest returns the later of a and b.
func Latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Intersect returns what a and b share, Empty if nothing.
func Intersect(a, b Interval) Interval {
	return Interval{Latest(a.From, b.From), Earliest(a.To, b.To)}
}

// Union merges the intervals that overlap or touch, dropping empty ones,
// and returns the result sorted by start.
func Union(ivs []Interval) []Interval {
	ivs = slices.DeleteFunc(slices.Clone(ivs), Interval.Empty)
	slices.SortFunc(ivs, func(a, b Interval) int { return a.From.Compare(b.From) })
	var out []Interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && !iv.From.After(out[n-1].To) {
			out[n-1].To = Latest(out[n-1].To, iv.To)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// MostAtOnce returns the largest number of the intervals that share an
// instant. One that ends when another starts does not share it.
func MostAtOnce(ivs []Interval) int {
	type edge struct {
		at time.Time
		d  int
	}
	edges := make([]edge, 0, 2*len(ivs))
	for _, iv := range ivs {
		if !iv.Empty() {
			edges = append(edges, edge{iv.From, +1}, edge{iv.To, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // an end before a start at the same instant
	})
	most, n := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	return most
}

// Window is an interval in which Holder may act on Key.
type Window[H comparable] struct {
	Key    string
	Holder H
	Interval
}

// Overlap is two windows on one key, of different holders, that intersect:
// two holders at once.
type Overlap[H comparable] struct {
	A, B Window[H] // A starts no later than B
	Both Interval  // what they share, never empty
}

// Overlaps returns every pair of windows on one key, of different holders,
// that intersect, by key, then by the start of A, then of B. An empty
// window holds nothing; one that starts when another ends does not
// intersect it. A holder may have several windows on a key; two of its own
// are never a pair.
func Overlaps[H comparable](ws []Window[H]) []Overlap[H] {
	byKey := make(map[string][]Window[H])
	for _, w := range ws {
		if !w.Empty() {
			byKey[w.Key] = append(byKey[w.Key], w)
		}
	}
	var out []Overlap[H]
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		ws := byKey[key]
		slices.SortStableFunc(ws, func(a, b Window[H]) int { return a.From.Compare(b.From) })
		// A sweep over the windows sorted by start finds each intersecting
		// pair once.
		for i, a := range ws {
			for _, b := range ws[i+1:] {
				if !b.From.Before(a.To) {
					break // b and every later one start after a ends
				}
				if a.Holder != b.Holder {
					out = append(out, Overlap[H]{A: a, B: b, Both: Intersect(a.Interval, b.Interval)})
				}
			}
		}
	}
	return out
}
