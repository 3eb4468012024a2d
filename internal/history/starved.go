package history

import (
	"slices"
	"time"
)

// This file judges the readers' liveness (the starved rule): a shared
// Acquire may wait while an exclusive Lock holds its key and while an
// exclusive Acquire waits for it (a writer's preference, docs/shared.md),
// and for at most StarvedBound beyond. A waiting writer whose process was
// stopped or killed waits no more: its announcement must expire on the
// nodes within the bound. Nobody can be admitted while a quorum of nodes
// is down, nor while its own process is stopped: that time is excused too.
// Every excuse errs wide, so that the rule misses a short starvation
// rather than invent one.

// Wait is one call that may wait for a key: an exclusive acquire of any
// kind (Acquire, TryAcquire, AcquireAll, Do, DoAll: a writer) or a shared
// Acquire (a reader that waits; a shared TryAcquire is not one).
type Wait struct {
	Proc   string
	Keys   []string
	Shared bool
	// TTL is what the call asked for: how long its writes may stay on
	// the nodes when its process stopped within the call, before it could
	// roll them back.
	TTL time.Duration
	// Span is the call: Start read before it, End after it returned;
	// End is zero for a call whose process was killed first.
	Span
	Got bool // it returned a Lock
}

// NodeDown is a node out of every quorum over an interval: faulty (its
// process stopped or down, its network cut, slow, its clock moved), or
// within its restart guard.
type NodeDown struct {
	Node int
	// Proc, when set, is the one process cut from the node (a blackhole, a
	// partition of some clients): the node ran, and only that process's
	// commands could not reach it. It is no node down for a quorum, only
	// for the deletes of that process's Locks (checkLate).
	Proc string
	Interval
	// Healed is when the fault itself ended, before To when the node then
	// stays out of the quorums for its restart guard: from Healed on, what
	// reaches the node runs (checkLate). Zero: To.
	Healed time.Time
}

// cut is the part of d in which nothing reached node d.Node or ran there.
func (d NodeDown) cut() Interval {
	if d.Healed.IsZero() || d.Healed.After(d.To) {
		return d.Interval
	}
	return Interval{d.From, d.Healed}
}

// cutWithin is how long node was cut off (NodeDown.cut) within iv from
// process proc: cut off from all, or from proc alone.
func (r *Record) cutWithin(node int, proc string, iv Interval) time.Duration {
	var ivs []Interval
	for _, d := range r.Down {
		if d.Node == node && (d.Proc == "" || d.Proc == proc) {
			if x := Intersect(d.cut(), iv); !x.Empty() {
				ivs = append(ivs, x)
			}
		}
	}
	var sum time.Duration
	for _, x := range Union(ivs) {
		sum += x.Len()
	}
	return sum
}

// checkStarved reports a shared Acquire that was refused, for longer than
// StarvedBound in one stretch, while no exclusive Lock held its key, no
// writer waited for it in a live process, a quorum of nodes was up and its
// own process ran: a starved finding. Not judged when StarvedBound is 0.
func checkStarved(v *Verdict, r *Record) {
	if r.StarvedBound <= 0 {
		return
	}
	v.ReadsBehindStopped = r.readsBehindStopped()
	busy := make(map[string][]Interval)
	down := r.quorumDown()
	for _, w := range r.Waits {
		if !w.Shared || w.End.IsZero() || len(w.Keys) != 1 || w.End.Sub(w.Start) <= r.StarvedBound {
			continue
		}
		v.LongReads++
		key := w.Keys[0]
		if _, ok := busy[key]; !ok {
			busy[key] = Union(append(r.writersOn(key), down...))
		}
		excused := busy[key]
		for _, p := range r.Pauses {
			if p.Proc == w.Proc {
				excused = append(excused, p.Interval)
			}
		}
		free := Subtract(Interval{w.Start, w.End}, Union(excused))
		for _, f := range free {
			if f.Len() > r.StarvedBound {
				v.add("starved", key, f.From, "%q: a shared Acquire of process %s waited %s (got it: %v); none held the key exclusively, no writer waited in a live process, a quorum of nodes was up and its process ran over %s (%v, bound %v)",
					key, w.Proc, w.Span.Interval(), w.Got, f, f.Len().Round(time.Millisecond), r.StarvedBound)
				break
			}
		}
	}
}

// writersOn returns when writers kept key from readers, as the record
// tells: each exclusive Lock of it from its first Acquire's start until
// its Release ended or its validity did (a key whose Release failed stays
// until it expires), and each exclusive call for it while its process ran,
// and for its TTL after its process was stopped or killed within the call
// (its attempt's writes stay until they expire).
func (r *Record) writersOn(key string) []Interval {
	var out []Interval
	for _, l := range r.Locks {
		if !l.exclusive() || len(l.Acquires) == 0 || !slices.Contains(l.AllKeys(), key) {
			continue
		}
		end := l.Acquires[0].End
		for _, a := range l.Acquires {
			end = Latest(end, a.End)
		}
		for _, rel := range l.Releases {
			end = Latest(end, rel.End)
		}
		for _, p := range l.Proofs {
			end = Latest(end, p.Until)
		}
		out = append(out, Interval{l.Acquires[0].Start, end})
	}
	for _, w := range r.Waits {
		if w.Shared || !slices.Contains(w.Keys, key) {
			continue
		}
		end := w.End
		for _, k := range r.Kills {
			if k.Proc == w.Proc && !k.At.Before(w.Start) && (end.IsZero() || k.At.Before(end)) {
				end = k.At
				out = append(out, Interval{k.At, k.At.Add(w.TTL)})
			}
		}
		if end.IsZero() {
			continue // killed before any kill was recorded: nothing to judge by
		}
		call := Interval{w.Start, end}
		var stops []Interval
		for _, p := range r.Pauses {
			if p.Proc == w.Proc && !Intersect(p.Interval, call).Empty() {
				stops = append(stops, p.Interval)
				from := Latest(p.From, w.Start)
				out = append(out, Interval{from, from.Add(w.TTL)})
			}
		}
		out = append(out, Subtract(call, Union(stops))...)
	}
	return out
}

// quorumDown returns when fewer than a quorum of the Nodes nodes were up
// (NodeDown), none if Nodes is 0.
func (r *Record) quorumDown() []Interval {
	if r.Nodes == 0 {
		return nil
	}
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	byNode := make(map[int][]Interval)
	for _, d := range r.Down {
		if d.Proc == "" { // a link cut leaves the node up for the others
			byNode[d.Node] = append(byNode[d.Node], d.Interval)
		}
	}
	for _, ivs := range byNode {
		for _, iv := range Union(ivs) {
			edges = append(edges, edge{iv.From, +1}, edge{iv.To, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d
	})
	quorum := r.Nodes/2 + 1
	var out []Interval
	n := 0
	var from time.Time
	for _, e := range edges {
		was := r.Nodes-n < quorum
		n += e.d
		now := r.Nodes-n < quorum
		switch {
		case now && !was:
			from = e.at
		case was && !now:
			out = append(out, Interval{from, e.at})
		}
	}
	return out
}

// Subtract returns the parts of iv outside the sorted, disjoint ivs
// (as Union returns them).
func Subtract(iv Interval, ivs []Interval) []Interval {
	var out []Interval
	from := iv.From
	for _, x := range ivs {
		if !x.To.After(from) {
			continue
		}
		if !x.From.Before(iv.To) {
			break
		}
		if x.From.After(from) {
			out = append(out, Interval{from, x.From})
		}
		from = Latest(from, x.To)
	}
	if from.Before(iv.To) {
		out = append(out, Interval{from, iv.To})
	}
	return out
}

// Interval returns the span as an interval.
func (s Span) Interval() Interval { return Interval{s.Start, s.End} }

// readsBehindStopped counts the shared waits for one key that were under
// way at some instant within StarvedBound after another process's writer,
// waiting for that key, was stopped or killed (Verdict.ReadsBehindStopped).
func (r *Record) readsBehindStopped() int {
	type stop struct {
		key, proc string
		at        time.Time
	}
	var stops []stop
	for _, x := range r.Waits {
		if x.Shared || len(x.Keys) != 1 {
			continue
		}
		within := func(at time.Time) bool {
			return !at.Before(x.Start) && (x.End.IsZero() || at.Before(x.End))
		}
		for _, p := range r.Pauses {
			if p.Proc == x.Proc && within(p.From) {
				stops = append(stops, stop{x.Keys[0], x.Proc, p.From})
			}
		}
		for _, k := range r.Kills {
			if k.Proc == x.Proc && within(k.At) {
				stops = append(stops, stop{x.Keys[0], x.Proc, k.At})
			}
		}
	}
	n := 0
	for _, w := range r.Waits {
		if !w.Shared || len(w.Keys) != 1 {
			continue
		}
		for _, s := range stops {
			if s.key == w.Keys[0] && s.proc != w.Proc && w.Start.Before(s.at.Add(r.StarvedBound)) && (w.End.IsZero() || w.End.After(s.at)) {
				n++
				break
			}
		}
	}
	return n
}
