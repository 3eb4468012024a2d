package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNemesisCheckerProcesses feeds Check histories of worker processes
// stopped and killed. A stopped holder's late write, live KeepAlive
// context or running Do after another Lock held the key meanwhile is a
// paused holder's overlap, counted and not found, and its write must be refused
// once the newer holder has written; without the stop each is what it was
// (a lease finding, or a stale write). A key that a killed process held
// must be taken by another Lock within KillBound of its validity's end,
// or it is a lockout.
func TestNemesisCheckerProcesses(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// lock is a Lock of process proc acquired in [acq0, acq1], valid
	// until until, whose Release started at rel (none if rel < 0).
	lock := func(id int, proc string, acq0, acq1, until, rel int) *Lock {
		l := &Lock{ID: id, Client: "w", Proc: proc, Key: "k", Acquires: []Span{{at(acq0), at(acq1)}},
			Proofs: []Proof{{at(acq1), at(until)}}}
		if rel >= 0 {
			l.Releases = []Span{{at(rel), at(rel + 1)}}
		}
		return l
	}
	fenced := func(l *Lock, fence uint64) *Lock { l.Fenced, l.Fence = true, fence; return l }
	shared := func(l *Lock) *Lock { l.Shared = true; return l }
	permit := func(l *Lock, n, slot int) *Lock { l.Key, l.Permits, l.Slot = "s", n, slot; return l }
	w := func(seq, id int, fence uint64, accepted bool, ms int) FenceWrite {
		return FenceWrite{Seq: seq, LockID: id, Key: "k", Fence: fence, At: at(ms), Accepted: accepted}
	}
	pause := func(proc string, from, to int) []Pause { return []Pause{{proc, Interval{at(from), at(to)}}} }
	// A holder of p1 takes the key at 10, valid until 100, checks its
	// validity at 90 and is stopped over [95, 300); lock 2 of p2 takes the
	// key at 120 and writes at 130; lock 1's write lands at 310.
	late := func(accepted bool) Record {
		return Record{Locks: []*Lock{fenced(lock(1, "p1", 0, 10, 100, 320), 5), fenced(lock(2, "p2", 20, 120, 400, 380), 7)},
			Writes: []FenceWrite{w(1, 1, 5, true, 20), w(2, 2, 7, true, 130), w(3, 1, 5, accepted, 310)}}
	}
	withPauses := func(r Record, ps []Pause) Record { r.Pauses = ps; return r }
	// Lock 1 of p1 holds under KeepAlive until 100; its context is seen
	// live at 310, after lock 2 took the key at 120.
	look := func(r Record) Record {
		r.Leases = []LeaseObs{{LockID: 1, Key: "k", At: at(310), Live: true, Before: at(100), After: at(100)}}
		return r
	}
	keepAlive := Record{Locks: []*Lock{lock(1, "p1", 0, 10, 100, 320), lock(2, "p2", 20, 120, 400, 380)}}
	// A Do of p1 whose context was seen live until 310, and lock 2 of p2
	// that took the key at 120.
	do := &Lock{ID: 1, Client: "d", Proc: "p1", Key: "k", Do: true, Acquires: []Span{{at(0), at(10)}},
		Releases: []Span{{at(320), at(321)}}, Proofs: []Proof{{at(10), at(310)}}, FnStart: at(10), FnEnd: at(320)}
	doOverlap := Record{Locks: []*Lock{do, lock(2, "p2", 20, 120, 400, 380)}}
	// Lock 1 of p1 holds until 100 and p1 is killed at 50; lock 2 takes
	// the key at taken.
	killed := func(l1 *Lock, l2 *Lock) Record {
		return Record{Locks: []*Lock{l1, l2}, Kills: []Kill{{"p1", at(50)}}, KillBound: 200 * time.Millisecond}
	}
	// lateWithDown: lock 2 takes a killed holder's key at 350, 250 after
	// it was free (the bound is 200), with n of 5 nodes down over [from, to).
	lateWithDown := func(n, from, to int) Record {
		r := killed(lock(1, "p1", 0, 10, 100, -1), lock(2, "p2", 20, 350, 400, 380))
		r.Nodes = 5
		for i := range n {
			r.Down = append(r.Down, NodeDown{Node: i, Interval: Interval{at(from), at(to)}})
		}
		return r
	}

	tests := []struct {
		name           string
		r              Record
		kind           string // "" for a clean history
		paused, staleR int    // paused holders' overlaps, stale writes refused
	}{
		{"a paused holder's late write, refused", withPauses(late(false), pause("p1", 95, 300)), "", 1, 1},
		{"a paused holder's late write, accepted", withPauses(late(true), pause("p1", 95, 300)), "fencing", 1, 0},
		{"a late write of a holder never paused", late(false), "", 0, 1},
		{"a late write of a holder paused in another process", withPauses(late(false), pause("p2", 95, 300)), "", 0, 1},
		{"a paused holder's late write, refused after the newer holder left", withPauses(Record{
			Locks:  []*Lock{fenced(lock(1, "p1", 0, 10, 100, 320), 5), fenced(lock(2, "p2", 20, 120, 200, 180), 7)},
			Writes: []FenceWrite{w(1, 2, 7, true, 130), w(2, 1, 5, false, 310)}}, pause("p1", 95, 300)), "", 1, 1},
		{"a late write before the newer holder took the key", withPauses(Record{
			Locks:  []*Lock{fenced(lock(1, "p1", 0, 10, 100, 320), 5), fenced(lock(2, "p2", 20, 320, 400, 380), 7)},
			Writes: []FenceWrite{w(1, 1, 5, true, 310), w(2, 2, 7, true, 330)}}, pause("p1", 95, 300)), "", 0, 0},
		{"a paused holder's KeepAlive context live", withPauses(look(keepAlive), pause("p1", 95, 300)), "", 1, 0},
		{"a paused holder's KeepAlive context live, no other holder", withPauses(look(Record{
			Locks: []*Lock{lock(1, "p1", 0, 10, 100, 320)}}), pause("p1", 95, 300)), "", 0, 0},
		{"a KeepAlive context live, no pause", look(keepAlive), "lease", 0, 0},
		{"a KeepAlive context live, paused before its Until only", withPauses(look(keepAlive), pause("p1", 40, 90)), "lease", 0, 0},
		{"a paused Do running under another holder", withPauses(doOverlap, pause("p1", 95, 300)), "", 1, 0},
		{"a Do running under another holder, no pause", doOverlap, "lease", 0, 0},
		{"a killed holder's key taken after its validity", killed(lock(1, "p1", 0, 10, 100, -1), lock(2, "p2", 20, 150, 400, 380)), "", 0, 0},
		{"a killed holder's key never taken again", killed(lock(1, "p1", 0, 10, 100, -1), lock(2, "p2", 20, 350, 400, 380)), "lockout", 0, 0},
		// A majority of 5 nodes down over [120, 220): no Lock could take
		// the key then, so the bound runs to 400, past lock 2's 350.
		{"a killed holder's key taken late, after a majority was down", lateWithDown(3, 120, 220), "", 0, 0},
		{"a killed holder's key taken late, a minority down", lateWithDown(2, 120, 220), "lockout", 0, 0},
		{"a killed holder's key, a majority down before it was free only", lateWithDown(3, 0, 100), "lockout", 0, 0},
		{"a killed holder's key, the run ended first", func() Record {
			r := killed(lock(1, "p1", 0, 10, 100, -1), lock(2, "p2", 20, 350, 400, 380))
			r.End = at(250)
			return r
		}(), "", 0, 0},
		{"a holder of another process than the killed", func() Record {
			r := killed(lock(1, "p3", 0, 10, 100, -1), lock(2, "p2", 20, 350, 400, 380))
			return r
		}(), "", 0, 0},
		{"a killed holder had released", killed(lock(1, "p1", 0, 10, 100, 40), lock(2, "p2", 20, 350, 400, 380)), "", 0, 0},
		{"a killed reader's key taken by a writer", killed(shared(lock(1, "p1", 0, 10, 100, -1)), lock(2, "p2", 20, 150, 400, 380)), "", 0, 0},
		{"a killed reader's key taken by readers only", killed(shared(lock(1, "p1", 0, 10, 100, -1)), shared(lock(2, "p2", 20, 150, 400, 380))), "", 0, 0},
		{"a killed reader's key taken by readers only, a writer refused", func() Record {
			r := killed(shared(lock(1, "p1", 0, 10, 100, -1)), shared(lock(2, "p2", 20, 150, 400, 380)))
			r.Waits = []Wait{{Proc: "p3", Keys: []string{"k"}, TTL: time.Second, Span: Span{at(120), at(250)}}}
			return r
		}(), "lockout", 0, 0},
		{"a killed reader's key, a writer refused before its validity ended only", func() Record {
			r := killed(shared(lock(1, "p1", 0, 10, 100, -1)), shared(lock(2, "p2", 20, 150, 400, 380)))
			r.Waits = []Wait{{Proc: "p3", Keys: []string{"k"}, TTL: time.Second, Span: Span{at(20), at(90)}}}
			return r
		}(), "", 0, 0},
		{"a killed reader's key, a writer waiting when its process was killed", func() Record {
			r := killed(shared(lock(1, "p1", 0, 10, 100, -1)), shared(lock(2, "p2", 20, 150, 400, 380)))
			r.Waits = []Wait{{Proc: "p3", Keys: []string{"k"}, TTL: time.Second, Span: Span{Start: at(110)}}}
			return r
		}(), "lockout", 0, 0},
		{"a killed reader's key, only readers tried", func() Record {
			r := killed(shared(lock(1, "p1", 0, 10, 100, -1)), shared(lock(2, "p2", 20, 150, 400, 380)))
			r.Waits = []Wait{{Proc: "p3", Keys: []string{"k"}, Shared: true, TTL: time.Second, Span: Span{at(120), at(250)}}}
			return r
		}(), "", 0, 0},
		{"a killed permit's slot taken", killed(permit(lock(1, "p1", 0, 10, 100, -1), 2, 1), permit(lock(2, "p2", 20, 150, 400, 380), 2, 1)), "", 0, 0},
		{"a killed permit's slot never taken", killed(permit(lock(1, "p1", 0, 10, 100, -1), 2, 1), permit(lock(2, "p2", 20, 150, 400, 380), 2, 0)), "lockout", 0, 0},
		// The rules of one process hold in several: n+1 permits, and a
		// reader beside a writer, from different processes.
		{"n+1 permits of three processes", Record{Locks: []*Lock{
			permit(lock(1, "p1", 0, 10, 100, 80), 2, 0), permit(lock(2, "p2", 0, 20, 100, 90), 2, 1),
			permit(lock(3, "p3", 0, 30, 100, 95), 2, 0)}}, "permits", 0, 0},
		{"a reader of one process beside a writer of another", Record{Locks: []*Lock{
			lock(1, "p1", 0, 10, 100, 80), shared(lock(2, "p2", 20, 60, 200, 150))}}, "shared", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Check(&tc.r)
			for _, kind := range Kinds {
				if kind == tc.kind {
					assert.Positive(t, v.Count(kind), "%s not found", kind)
				} else {
					assert.Zero(t, v.Count(kind), "%s: %v", kind, v.Found)
				}
			}
			assert.Equal(t, tc.paused, v.PausedOverlaps, "paused holders' overlaps")
			assert.Equal(t, tc.staleR, v.StaleRefused, "stale writes refused")
			assert.Equal(t, v.Count("fencing"), v.StaleAccepted, "stale writes accepted")
		})
	}
}
