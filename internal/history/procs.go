package history

import (
	"slices"
	"time"
)

// This file judges what worker processes of their own add to a record:
// a process stopped (SIGSTOP) past its Locks' validity, the hazard fencing
// exists for (Kleppmann's GC pause), and a process killed (SIGKILL) while
// it held Locks, whose keys must come free when their validity ends.
//
// A stopped holder cannot see its validity end: when it runs again, a
// write it had checked before the stop lands late, its KeepAlive context
// is still live until its timer runs, a Do's function goes on. When
// another Lock held the key meanwhile (since the holder's validity ended),
// that is a paused holder's overlap:
// no lock service can prevent it, so it is counted (PausedOverlaps), not
// found, and the fenced store must refuse its writes once the newer
// holder has written (checkFencing judges them as any write).
//
// Instants of different processes are wall-clock readings on one machine
// (each process reads the wall clock once and adds its monotonic elapsed
// time, so that a clock step in the middle of a run moves nothing).

// Pause is a worker process stopped over Interval: From read after SIGSTOP
// was sent, To before SIGCONT, so that it errs short (a pause excuses what
// happens within it).
type Pause struct {
	Proc string
	Interval
}

// Kill is a worker process killed at At, read after SIGKILL was sent.
type Kill struct {
	Proc string
	At   time.Time
}

// holds are the windows of every Lock (Lock.windows), by key, for the
// rules that ask who held a key at an instant.
type holds struct {
	over  map[*Lock]time.Time // takeovers
	all   []Window[*Lock]
	byKey map[string][]Window[*Lock]
	byID  map[int]*Lock
	// of is each Lock's windows, computed once: the rules ask for them
	// per write, and a 30-minute run has tens of thousands of writes.
	of map[*Lock][]Interval
}

func newHolds(r *Record) *holds {
	hs := &holds{over: takeovers(r.Locks), byKey: make(map[string][]Window[*Lock]), byID: make(map[int]*Lock),
		of: make(map[*Lock][]Interval, len(r.Locks))}
	for _, l := range r.Locks {
		hs.byID[l.ID] = l
		hs.of[l] = l.windows(hs.over[l])
		for _, iv := range hs.of[l] {
			for _, k := range l.AllKeys() {
				w := Window[*Lock]{Key: k, Holder: l, Interval: iv}
				hs.all = append(hs.all, w)
				hs.byKey[k] = append(hs.byKey[k], w)
			}
		}
	}
	return hs
}

// heldByOther reports whether a Lock other than l held key at some
// instant of iv.
func (hs *holds) heldByOther(key string, l *Lock, iv Interval) bool {
	return slices.ContainsFunc(hs.byKey[key], func(w Window[*Lock]) bool {
		return w.Holder != l && !Intersect(w.Interval, iv).Empty()
	})
}

// meantime is the interval from the end of l's last window before at (its
// first Acquire's return if none ended) to at: what l did not see if it
// acts at at.
func (hs *holds) meantime(l *Lock, at time.Time) Interval {
	from := l.Acquires[0].End
	for _, iv := range hs.of[l] {
		if !iv.To.After(at) {
			from = Latest(from, iv.To)
		}
	}
	return Interval{from, at}
}

// paused reports whether process proc was stopped at some instant of iv.
func (r *Record) paused(proc string, iv Interval) bool {
	return slices.ContainsFunc(r.Pauses, func(p Pause) bool {
		return p.Proc == proc && !Intersect(p.Interval, iv).Empty()
	})
}

// pausedDo reports whether a Do among ls had its process stopped within
// both, or up to Slack before it: a Do that wakes sees its context live
// until its timer runs, up to Slack late.
func (r *Record) pausedDo(ls []*Lock, both Interval) bool {
	iv := Interval{both.From.Add(-r.Slack), both.To}
	return slices.ContainsFunc(ls, func(l *Lock) bool { return l.Do && r.paused(l.Proc, iv) })
}

// checkKilled reports, as a lockout, a key that a killed process's Lock
// held (acquired, not released) at the kill, and that no other Lock took
// within KillBound after the later of the kill and the end of the Lock's
// validity, though one tried (triedToTake): its entries did not expire.
// Nobody trying is no evidence: the workers pick their rounds at random,
// and the waiters' key sees a writer every few seconds only (a 10-minute
// run once found a killed reader's key of it untaken for want of one). A
// permit's attempts are not recorded, so a permit's slot is judged
// without. Another Lock takes an exclusive
// Lock's key by any acquire of it (but a permit's), a shared Lock's by an
// exclusive acquire (a writer is let in), a permit's by a permit in its
// slot. The time in which no quorum of nodes could be asked does not count
// (killDeadline). A bound that runs past End is not judged (the end-of-run
// probes judge the keys then).
func checkKilled(v *Verdict, r *Record) {
	down := r.quorumDown()
	for _, k := range r.Kills {
		for _, l := range r.Locks {
			if l.Proc != k.Proc || l.Do || !slices.ContainsFunc(l.held(), func(iv Interval) bool { return iv.Contains(k.At) }) {
				continue
			}
			free := k.At
			for _, iv := range l.valid() {
				free = Latest(free, iv.To)
			}
			deadline := r.killDeadline(free, down)
			if !r.End.IsZero() && deadline.After(r.End) {
				continue
			}
			for _, key := range l.AllKeys() {
				taken := slices.ContainsFunc(r.Locks, func(o *Lock) bool {
					return o != l && slices.Contains(o.AllKeys(), key) && takesFrom(o, l) &&
						slices.ContainsFunc(o.Acquires, func(a Span) bool { return a.End.After(k.At) && !a.End.After(deadline) })
				})
				if !taken && (l.Permits > 0 || r.triedToTake(l, key, Interval{free, deadline})) {
					v.add("lockout", key, free, "%q: %s of process %s, killed at %s, held it until %s; no other Lock took it within %v, by %s (the run ended at %s)",
						key, l.Describe(), k.Proc, k.At.Format("15:04:05.000000"), free.Format("15:04:05.000000"), r.KillBound,
						deadline.Format("15:04:05.000000"), r.End.Format("15:04:05.000000"))
					v.Found[len(v.Found)-1].Holds = []*Lock{l}
				}
			}
		}
	}
}

// killDeadline is when another Lock must have taken a killed holder's key
// that was free from free on: KillBound later, not counting the time in
// which no quorum of nodes could be asked (down: Record.quorumDown), as
// when a majority was faulty or within its restart guard. Then no Lock can
// take any key, which is the guard's documented cost, no lockout.
func (r *Record) killDeadline(free time.Time, down []Interval) time.Time {
	deadline := free.Add(r.KillBound)
	for {
		var lost time.Duration
		for _, d := range down {
			if x := Intersect(d, Interval{free, deadline}); !x.Empty() {
				lost += x.Len()
			}
		}
		next := free.Add(r.KillBound + lost)
		if !next.After(deadline) {
			return deadline
		}
		deadline = next
	}
}

// triedToTake reports whether a Lock that could take key from l (takesFrom)
// tried to within iv: an acquire of it, a Lock's or a recorded wait's
// (Record.Waits: every exclusive acquire, and every shared Acquire), that
// overlaps iv, whatever it got. A wait whose process was killed ends at
// the kill.
func (r *Record) triedToTake(l *Lock, key string, iv Interval) bool {
	for _, o := range r.Locks {
		if o == l || !slices.Contains(o.AllKeys(), key) || !takesFrom(o, l) {
			continue
		}
		for _, a := range o.Acquires {
			if a.Start.Before(iv.To) && a.End.After(iv.From) {
				return true
			}
		}
	}
	for _, w := range r.Waits {
		if !slices.Contains(w.Keys, key) || (l.Shared && w.Shared) {
			continue
		}
		end := w.End
		for _, k := range r.Kills {
			if k.Proc == w.Proc && !k.At.Before(w.Start) && (end.IsZero() || k.At.Before(end)) {
				end = k.At
			}
		}
		if w.Start.Before(iv.To) && (end.IsZero() || end.After(iv.From)) {
			return true
		}
	}
	return false
}

// takesFrom reports whether o's acquire shows that l's hold of their key
// had ended: a Lock that could not hold beside l.
func takesFrom(o, l *Lock) bool {
	switch {
	case l.Permits > 0:
		return o.Permits > 0 && o.Slot == l.Slot
	case l.Shared:
		return o.exclusive()
	default:
		return o.Permits == 0
	}
}
