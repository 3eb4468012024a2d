package history

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNemesisChecker feeds the nemesis's checker (Check) hand-made histories: each
// bad one holds one kind of violation, which the checker must find and
// count under that kind alone; each clean one must pass, so that the
// checker's windows are not so wide that legitimate histories fail.
func TestNemesisChecker(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	sp := func(from, to int) Span { return Span{at(from), at(to)} }
	pr := func(from, until int) Proof { return Proof{at(from), at(until)} }
	// plain is a Lock acquired in [acq0, acq1], valid until until, whose
	// Release started at rel (no Release if rel < 0).
	plain := func(id int, acq0, acq1, until, rel int) *Lock {
		l := &Lock{ID: id, Client: "c", Key: "k", Acquires: []Span{sp(acq0, acq1)}, Proofs: []Proof{pr(acq1, until)}}
		if rel >= 0 {
			l.Releases = []Span{sp(rel, rel+1)}
		}
		return l
	}
	owned := func(l *Lock, owner string) *Lock { l.Owner = owner; return l }
	fenced := func(l *Lock, fence uint64) *Lock { l.Fenced, l.Fence = true, fence; return l }
	do := func(id, acq0, fnStart, lastLive, fnEnd int, nilErr bool) *Lock {
		return &Lock{ID: id, Client: "d", Key: "k", Do: true, Acquires: []Span{sp(acq0, fnStart)},
			Releases: []Span{sp(fnEnd, fnEnd+1)}, Proofs: []Proof{pr(fnStart, lastLive)},
			FnStart: at(fnStart), FnEnd: at(fnEnd), DoNil: nilErr}
	}
	// w is the write number seq to the store, by lock id, at ms.
	w := func(seq, id int, fence uint64, accepted bool, ms int) FenceWrite {
		return FenceWrite{Seq: seq, LockID: id, Key: "k", Fence: fence, At: at(ms), Accepted: accepted}
	}
	// Lock 1 holds [10, 50) with fence 5; lock 2, whose Acquire started
	// after lock 1's returned, holds [60, 150) with fence 7.
	twoFenced := func(f1, f2 uint64) []*Lock {
		return []*Lock{fenced(plain(1, 0, 10, 100, 50), f1), fenced(plain(2, 20, 60, 200, 150), f2)}
	}

	tests := []struct {
		name string
		r    Record
		kind string // "" for a clean history
	}{
		{"sequential holders", Record{Locks: []*Lock{plain(1, 0, 10, 100, 50), plain(2, 5, 50, 200, 150)}}, ""},
		{"successor after expiry", Record{Locks: []*Lock{plain(1, 0, 10, 100, -1), plain(2, 20, 100, 200, 150)}}, ""},
		{"overlap", Record{Locks: []*Lock{plain(1, 0, 10, 100, 80), plain(2, 20, 60, 200, 150)}}, "exclusion"},
		{"overlap with a never-released lock", Record{Locks: []*Lock{plain(1, 0, 10, 100, -1), plain(2, 20, 99, 200, 150)}}, "exclusion"},
		{"extended past the successor", Record{Locks: []*Lock{
			func() *Lock { l := plain(1, 0, 10, 100, 300); l.Proofs = append(l.Proofs, pr(90, 250)); return l }(),
			plain(2, 20, 150, 400, 350)}}, "exclusion"},
		{"extension after expiry leaves a gap", Record{Locks: []*Lock{
			func() *Lock { l := plain(1, 0, 10, 100, 300); l.Proofs = append(l.Proofs, pr(180, 250)); return l }(),
			plain(2, 20, 110, 170, 170)}}, ""},
		{"extended shorter", Record{Locks: []*Lock{
			func() *Lock {
				l := plain(1, 0, 10, 300, 400)
				l.Caps, l.Proofs = append(l.Caps, pr(95, 150)), append(l.Proofs, pr(100, 150))
				return l
			}(),
			plain(2, 20, 200, 500, 450)}}, ""},
		{"extended shorter, successor too early", Record{Locks: []*Lock{
			func() *Lock {
				l := plain(1, 0, 10, 300, 400)
				l.Caps, l.Proofs = append(l.Caps, pr(95, 150)), append(l.Proofs, pr(100, 150))
				return l
			}(),
			plain(2, 20, 140, 500, 450)}}, "exclusion"},
		{"failed extend caps the claim", Record{Locks: []*Lock{
			func() *Lock { l := plain(1, 0, 10, 300, 400); l.Caps = append(l.Caps, pr(95, 150)); return l }(),
			plain(2, 20, 200, 500, 450)}}, ""},
		{"a cap does not raise the claim", Record{Locks: []*Lock{
			func() *Lock { l := plain(1, 0, 10, 100, 400); l.Caps = append(l.Caps, pr(95, 150)); return l }(),
			plain(2, 20, 120, 500, 450)}}, ""},
		{"re-entry is one hold", Record{Locks: []*Lock{
			func() *Lock {
				l := owned(plain(1, 0, 10, 300, 100), "o")
				l.Acquires = append(l.Acquires, sp(20, 30))
				l.Releases = append(l.Releases, sp(200, 201))
				return l
			}(),
			plain(2, 50, 210, 400, 350)}}, ""},
		{"first release of a re-entered lock", Record{Locks: []*Lock{
			func() *Lock {
				l := owned(plain(1, 0, 10, 300, 100), "o")
				l.Acquires = append(l.Acquires, sp(20, 30))
				l.Releases = append(l.Releases, sp(200, 201))
				return l
			}(),
			plain(2, 50, 150, 400, 350)}}, "exclusion"},
		{"released twice", Record{Locks: []*Lock{
			func() *Lock {
				l := plain(1, 0, 10, 300, 100)
				l.Releases = append(l.Releases, sp(101, 102))
				return l
			}(),
			plain(2, 50, 150, 400, 350)}}, ""},
		{"taken over by its owner", Record{Locks: []*Lock{
			owned(plain(1, 0, 10, 300, 250), "o"), owned(plain(2, 100, 120, 400, 150), "o"), plain(3, 110, 160, 500, 450)}}, ""},
		{"taken over twice", Record{Locks: []*Lock{
			owned(plain(1, 0, 10, 300, 290), "o"), owned(plain(2, 15, 20, 300, 290), "o"),
			owned(plain(3, 25, 30, 300, 50), "o"), plain(4, 40, 60, 500, 450)}}, ""},
		{"two locks of one owner, one released", Record{Locks: []*Lock{
			owned(plain(1, 0, 10, 300, 250), "o"), owned(plain(2, 100, 120, 400, 350), "o"), plain(3, 110, 160, 500, 450)}}, "exclusion"},
		// Two Locks of one owner acquire at the same time: Lock 1 returns
		// first, but its write landed after lock 2's on a node it took over
		// there; its Release drops what it took over, ending lock 2
		// (the sim's seed 2 on 5dde695).
		{"a concurrent Lock of the owner released first", Record{Locks: []*Lock{
			owned(plain(1, 0, 100, 1000, 105), "o"), owned(plain(2, 50, 110, 1000, 900), "o"), plain(3, 150, 160, 500, 450)}}, ""},
		{"the owner's Lock that returned before, released", Record{Locks: []*Lock{
			owned(plain(1, 0, 40, 1000, 105), "o"), owned(plain(2, 50, 110, 1000, 900), "o"), plain(3, 150, 160, 500, 450)}}, "exclusion"},
		{"a concurrent Lock of the owner released after another holder came", Record{Locks: []*Lock{
			owned(plain(1, 0, 100, 1000, 300), "o"), owned(plain(2, 50, 110, 1000, 900), "o"), plain(3, 150, 160, 500, 450)}}, "exclusion"},
		{"owners differ", Record{Locks: []*Lock{
			owned(plain(1, 0, 10, 300, 250), "o"), owned(plain(2, 100, 120, 400, 150), "p")}}, "exclusion"},
		{"do, then a successor", Record{Locks: []*Lock{do(1, 0, 10, 90, 100, true), plain(2, 50, 101, 200, 150)}}, ""},
		{"do's context live under another holder", Record{Locks: []*Lock{do(1, 0, 10, 90, 100, false), plain(2, 50, 60, 200, 150)}}, "lease"},
		{"do returned nil over another holder", Record{Locks: []*Lock{do(1, 0, 10, 30, 100, true), plain(2, 50, 60, 200, 150)}}, "lease"},
		{"do overlap within the slack", Record{Slack: 20 * time.Millisecond,
			Locks: []*Lock{do(1, 0, 10, 70, 100, false), plain(2, 50, 60, 200, 150)}}, ""},
		{"fences rise", Record{Locks: twoFenced(5, 7),
			Writes: []FenceWrite{w(1, 1, 5, true, 20), w(2, 2, 7, true, 70), w(3, 1, 5, false, 80), w(4, 2, 7, true, 90)}}, ""},
		{"a late write before the newer holder's", Record{Locks: twoFenced(5, 7),
			Writes: []FenceWrite{w(1, 1, 5, true, 55), w(2, 2, 7, true, 70)}}, ""},
		{"store accepted a stale write", Record{Locks: twoFenced(5, 7),
			Writes: []FenceWrite{w(1, 2, 7, true, 70), w(2, 1, 5, true, 80)}}, "fencing"},
		{"store accepted a stale write, fences 0", Record{Locks: twoFenced(0, 0),
			Writes: []FenceWrite{w(1, 2, 0, true, 70), w(2, 1, 0, true, 80)}}, "fencing"},
		{"store refused a write within its validity", Record{Locks: twoFenced(5, 7),
			Writes: []FenceWrite{w(1, 1, 5, false, 30)}}, "fencing"},
		{"a fenced lock without a fence", Record{Locks: twoFenced(0, 7)}, "fencing"},
		{"a write of a lock never acquired", Record{Locks: twoFenced(5, 7),
			Writes: []FenceWrite{w(1, 3, 5, true, 30)}}, "fencing"},
		{"successor's fence not above", Record{
			Locks: []*Lock{fenced(plain(1, 0, 10, 100, 50), 7), fenced(plain(2, 20, 60, 200, 150), 7)}}, "fencing"},
		{"concurrent acquires need not be ordered", Record{
			Locks: []*Lock{fenced(plain(1, 0, 10, 100, -1), 7), fenced(plain(2, 5, 160, 200, 150), 6)}}, ""},
		{"keep-alive ended in time", Record{Leases: []LeaseObs{
			{LockID: 1, Key: "k", At: at(90), Live: true, Before: at(100), After: at(100)},
			{LockID: 1, Key: "k", At: at(100), Live: false, Before: at(100), After: at(100)}}}, ""},
		{"keep-alive renewed between the readings", Record{Leases: []LeaseObs{
			{LockID: 1, Key: "k", At: at(100), Live: true, Before: at(100), After: at(200)}}}, ""},
		{"keep-alive live after until", Record{Leases: []LeaseObs{
			{LockID: 1, Key: "k", At: at(110), Live: true, Before: at(100), After: at(100)}}}, "lease"},
		{"Probe in time", Record{Bound: time.Second, Probes: []Probe{{Key: "k", Took: 900 * time.Millisecond}}}, ""},
		{"Probe too slow", Record{Bound: time.Second, Probes: []Probe{{Key: "k", Took: 1100 * time.Millisecond}}}, "lockout"},
		{"Probe failed", Record{Bound: time.Second, Probes: []Probe{{Key: "k", Took: time.Millisecond, Err: errors.New("not acquired")}}}, "lockout"},
		{"shared Probe too slow", Record{Bound: time.Second, Probes: []Probe{{Key: "k", Took: 900 * time.Millisecond},
			{Key: "k", Shared: true, Took: 1100 * time.Millisecond}}}, "lockout"},
		{"leftover key", Record{Leftovers: []NodeKey{{Node: 2, Key: "k", Value: "tok.1"}}}, "leftovers"},
	}
	// A stale write the store refused is fencing at work: counted, as a
	// run must show some, and not reported.
	v := Check(&Record{Locks: twoFenced(5, 7), Writes: []FenceWrite{w(1, 2, 7, true, 70), w(2, 1, 5, false, 80)}})
	assert.Equal(t, 1, v.StaleRefused, "stale writes refused")
	assert.Empty(t, v.Found)
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
		})
	}
}

// TestNemesisCheckerClockJump: a node's clock that jumps forward expires a
// holder's key early, and once a majority did, a second Lock takes the key
// while the first still claims it. The overlap is an exclusion finding;
// the older holder's write after the newer one's, within its own claimed
// validity, is stale all the same: refused, it is fencing covering the
// overlap (StaleRefused, OverlapRefused); accepted, a fencing finding.
func TestNemesisCheckerClockJump(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Lock 1 (fence 5) holds [10, 280) by its claim; the nodes' clocks
	// jumped at 40, and lock 2 (fence 7), whose Acquire started at 50,
	// holds [60, 350).
	locks := func() []*Lock {
		return []*Lock{
			{ID: 1, Client: "a", Key: "k", Fenced: true, Fence: 5, Acquires: []Span{{at(0), at(10)}},
				Proofs: []Proof{{at(10), at(300)}}, Releases: []Span{{at(280), at(281)}}},
			{ID: 2, Client: "b", Key: "k", Fenced: true, Fence: 7, Acquires: []Span{{at(50), at(60)}},
				Proofs: []Proof{{at(60), at(400)}}, Releases: []Span{{at(350), at(351)}}},
		}
	}
	w := func(seq, id int, fence uint64, accepted bool, ms int) FenceWrite {
		return FenceWrite{Seq: seq, LockID: id, Key: "k", Fence: fence, At: at(ms), Accepted: accepted}
	}
	// Lock 1 writes within the overlap before lock 2 has: nothing stale.
	// Then lock 2 writes, then lock 1 again, still within its claim.
	refused := Check(&Record{Locks: locks(), Writes: []FenceWrite{
		w(1, 1, 5, true, 65), w(2, 2, 7, true, 70), w(3, 1, 5, false, 80)}})
	assert.Equal(t, 1, refused.Count("exclusion"), "the overlap: %v", refused.Found)
	assert.Zero(t, refused.Count("fencing"), "the older holder's write refused within its claim: %v", refused.Found)
	assert.Zero(t, refused.StaleAccepted, "stale writes accepted")
	assert.Equal(t, 1, refused.StaleRefused, "stale writes refused")
	assert.Equal(t, 1, refused.OverlapRefused, "stale writes refused within the writer's claim")

	accepted := Check(&Record{Locks: locks(), Writes: []FenceWrite{
		w(1, 1, 5, true, 65), w(2, 2, 7, true, 70), w(3, 1, 5, true, 80)}})
	assert.Equal(t, 1, accepted.Count("exclusion"), "the overlap: %v", accepted.Found)
	assert.Equal(t, 1, accepted.Count("fencing"), "the older holder's write accepted after the newer one's: %v", accepted.Found)
	assert.Equal(t, 1, accepted.StaleAccepted, "stale writes accepted")
	assert.Zero(t, accepted.StaleRefused+accepted.OverlapRefused, "no write refused")

	// Lock 2's Acquire started before lock 1's returned: neither is the
	// newer, and the store refusing lock 1 for lock 2's higher fence is
	// still its part in the overlap, not a finding.
	concurrent := locks()
	concurrent[1].Acquires = []Span{{at(5), at(60)}}
	both := Check(&Record{Locks: concurrent, Writes: []FenceWrite{w(1, 2, 7, true, 70), w(2, 1, 5, false, 80)}})
	assert.Equal(t, 1, both.Count("exclusion"), "the overlap: %v", both.Found)
	assert.Zero(t, both.Count("fencing"), "lock 1 refused for the fence of lock 2, which held beside it: %v", both.Found)
	assert.Equal(t, 1, both.OverlapRefused, "stale writes refused within the writer's claim")

	// Without the overlap (lock 2 after lock 1's release), lock 1 makes
	// no write after lock 2's, and a refusal within its claim is one.
	sequential := locks()
	sequential[1].Acquires = []Span{{at(285), at(290)}}
	clean := Check(&Record{Locks: sequential, Writes: []FenceWrite{w(1, 1, 5, true, 65), w(2, 2, 7, true, 300)}})
	assert.Empty(t, clean.Found)
	wrong := Check(&Record{Locks: sequential, Writes: []FenceWrite{w(1, 1, 5, false, 65)}})
	assert.Equal(t, 1, wrong.Count("fencing"), "a write refused within its claim, no newer holder: %v", wrong.Found)
	assert.Zero(t, wrong.OverlapRefused)
}

// TestNemesisCheckerMultiKey feeds Check histories with Locks of several
// keys (AcquireAll): a hold of such a Lock is a hold of each of its keys, so
// it must not overlap a holder of any one of them, of one key or of several,
// while holders of disjoint keys, or of a shared key one after the other,
// pass.
func TestNemesisCheckerMultiKey(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// lock is a Lock of keys acquired in [acq0, acq1], valid until until,
	// whose Release started at rel.
	lock := func(id int, keys []string, acq0, acq1, until, rel int) *Lock {
		l := &Lock{ID: id, Client: "c", Key: keys[0], Acquires: []Span{{at(acq0), at(acq1)}},
			Proofs: []Proof{{at(acq1), at(until)}}, Releases: []Span{{at(rel), at(rel + 1)}}}
		if len(keys) > 1 {
			l.Keys = keys
		}
		return l
	}
	fenced := func(l *Lock, fence uint64) *Lock { l.Fenced, l.Fence = true, fence; return l }
	ab, bc := []string{"a", "b"}, []string{"b", "c"}

	tests := []struct {
		name string
		r    Record
		kind string // "" for a clean history
		key  string // the key of every finding
	}{
		{"multi-key, then single on its second key", Record{Locks: []*Lock{
			lock(1, ab, 0, 10, 100, 50), lock(2, []string{"b"}, 5, 60, 200, 150)}}, "", ""},
		{"single, then multi-key", Record{Locks: []*Lock{
			lock(1, []string{"b"}, 0, 10, 100, 50), lock(2, ab, 5, 60, 200, 150)}}, "", ""},
		{"multi-key and single on a disjoint key", Record{Locks: []*Lock{
			lock(1, ab, 0, 10, 100, 80), lock(2, []string{"c"}, 5, 20, 200, 150)}}, "", ""},
		{"multi-key overlaps single on its second key", Record{Locks: []*Lock{
			lock(1, ab, 0, 10, 100, 80), lock(2, []string{"b"}, 5, 60, 200, 150)}}, "exclusion", "b"},
		{"single overlaps multi-key on its second key", Record{Locks: []*Lock{
			lock(1, []string{"b"}, 0, 10, 100, 80), lock(2, ab, 5, 60, 200, 150)}}, "exclusion", "b"},
		{"two multi-key sets overlap on the shared key", Record{Locks: []*Lock{
			lock(1, ab, 0, 10, 100, 80), lock(2, bc, 5, 60, 200, 150)}}, "exclusion", "b"},
		{"two multi-key sets one after the other", Record{Locks: []*Lock{
			lock(1, ab, 0, 10, 100, 50), lock(2, bc, 5, 60, 200, 150)}}, "", ""},
		{"single after multi-key, fence not above", Record{Locks: []*Lock{
			fenced(lock(1, ab, 0, 10, 100, 50), 7), fenced(lock(2, []string{"b"}, 20, 60, 200, 150), 7)}}, "fencing", "b"},
		{"single after multi-key, fence above", Record{Locks: []*Lock{
			fenced(lock(1, ab, 0, 10, 100, 50), 7), fenced(lock(2, []string{"b"}, 20, 60, 200, 150), 8)}}, "", ""},
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
			for _, f := range v.Found {
				assert.Equal(t, tc.key, f.Key, "finding on the wrong key: %s", f.Detail)
			}
		})
	}
	// The overlap names both Locks.
	v := Check(&Record{Locks: []*Lock{lock(1, ab, 0, 10, 100, 80), lock(2, []string{"b"}, 5, 60, 200, 150)}})
	if assert.Len(t, v.Found, 1) {
		assert.ElementsMatch(t, []int{1, 2}, []int{v.Found[0].Holds[0].ID, v.Found[0].Holds[1].ID})
		assert.Contains(t, v.Found[0].Detail, "keys a, b")
	}
}

// TestNemesisCheckerShared feeds Check histories with shared Locks: per
// key, any number of shared holders or exactly one exclusive holder (of
// one key or of several), judged by the same windows as exclusive holds.
// A shared Lock overlapping an exclusive one is a shared finding on that
// key (a lease finding if one of them is a Do); shared Locks overlapping
// each other pass, and are counted.
func TestNemesisCheckerShared(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// lock is a Lock of keys acquired in [acq0, acq1], valid until until,
	// whose Release started at rel (no Release if rel < 0).
	lock := func(id int, keys []string, acq0, acq1, until, rel int) *Lock {
		l := &Lock{ID: id, Client: "c", Key: keys[0], Acquires: []Span{{at(acq0), at(acq1)}},
			Proofs: []Proof{{at(acq1), at(until)}}}
		if len(keys) > 1 {
			l.Keys = keys
		}
		if rel >= 0 {
			l.Releases = []Span{{at(rel), at(rel + 1)}}
		}
		return l
	}
	k := []string{"k"}
	reader := func(id, acq0, acq1, until, rel int) *Lock {
		l := lock(id, k, acq0, acq1, until, rel)
		l.Shared = true
		return l
	}
	writer := func(id, acq0, acq1, until, rel int) *Lock { return lock(id, k, acq0, acq1, until, rel) }
	fenced := func(l *Lock, fence uint64) *Lock { l.Fenced, l.Fence = true, fence; return l }
	extended := func(l *Lock, from, until int) *Lock {
		l.Caps = append(l.Caps, Proof{at(from - 1), at(until)})
		l.Proofs = append(l.Proofs, Proof{at(from), at(until)})
		return l
	}
	sharedDo := func(id, acq0, fnStart, lastLive, fnEnd int) *Lock {
		return &Lock{ID: id, Client: "d", Key: "k", Do: true, Shared: true, Acquires: []Span{{at(acq0), at(fnStart)}},
			Releases: []Span{{at(fnEnd), at(fnEnd + 1)}}, Proofs: []Proof{{at(fnStart), at(lastLive)}},
			FnStart: at(fnStart), FnEnd: at(fnEnd)}
	}
	ak, kb := []string{"a", "k"}, []string{"a", "b"}

	tests := []struct {
		name     string
		r        Record
		kind     string // "" for a clean history
		together int    // pairs of shared Locks that held together
	}{
		{"a reader overlaps a writer", Record{Locks: []*Lock{
			writer(1, 0, 10, 100, 80), reader(2, 20, 60, 200, 150)}}, "shared", 0},
		{"a writer overlaps a reader", Record{Locks: []*Lock{
			reader(1, 0, 10, 100, 80), writer(2, 20, 60, 200, 150)}}, "shared", 0},
		{"two readers overlap", Record{Locks: []*Lock{
			reader(1, 0, 10, 100, 80), reader(2, 20, 60, 200, 150)}}, "", 1},
		{"three readers at once", Record{Locks: []*Lock{
			reader(1, 0, 10, 100, 80), reader(2, 20, 30, 200, 150), reader(3, 5, 40, 300, 70)}}, "", 3},
		{"a reader overlaps an AcquireAll writer of its key", Record{Locks: []*Lock{
			lock(1, ak, 0, 10, 100, 80), reader(2, 20, 60, 200, 150)}}, "shared", 0},
		{"an AcquireAll writer overlaps a reader of its key", Record{Locks: []*Lock{
			reader(1, 0, 10, 100, 80), lock(2, ak, 20, 60, 200, 150)}}, "shared", 0},
		{"a reader beside an AcquireAll writer of other keys", Record{Locks: []*Lock{
			lock(1, kb, 0, 10, 100, 80), reader(2, 20, 60, 200, 150)}}, "", 0},
		{"writer, readers, writer in turn", Record{Locks: []*Lock{
			writer(1, 0, 10, 100, 50), reader(2, 5, 50, 200, 120), reader(3, 5, 60, 200, 150),
			writer(4, 55, 150, 300, 250), reader(5, 100, 250, 400, -1)}}, "", 1},
		{"a writer after a crashed reader's validity", Record{Locks: []*Lock{
			reader(1, 0, 10, 100, -1), writer(2, 20, 100, 200, 150)}}, "", 0},
		{"a writer within a crashed reader's validity", Record{Locks: []*Lock{
			reader(1, 0, 10, 100, -1), writer(2, 20, 99, 200, 150)}}, "shared", 0},
		{"a reader extended past the writer's start", Record{Locks: []*Lock{
			extended(reader(1, 0, 10, 100, 300), 90, 250), writer(2, 20, 150, 400, 350)}}, "shared", 0},
		{"a reader extended shorter", Record{Locks: []*Lock{
			extended(reader(1, 0, 10, 300, 400), 100, 150), writer(2, 20, 200, 500, 450)}}, "", 0},
		{"readers together, a writer beside one", Record{Locks: []*Lock{
			reader(1, 0, 10, 100, 80), reader(2, 20, 30, 300, 250), writer(3, 40, 90, 200, 150)}}, "shared", 1},
		{"a shared Do's context live under a writer", Record{Locks: []*Lock{
			sharedDo(1, 0, 10, 90, 100), writer(2, 50, 60, 200, 150)}}, "lease", 0},
		{"a shared Do beside a reader", Record{Locks: []*Lock{
			sharedDo(1, 0, 10, 90, 100), reader(2, 50, 60, 200, 150)}}, "", 1},
		{"a shared Lock of a fenced Client has no fence", Record{Locks: []*Lock{
			fenced(reader(1, 0, 10, 100, 80), 0), fenced(writer(2, 5, 80, 200, 150), 7)}}, "", 0},
		{"a shared Lock with a fence", Record{Locks: []*Lock{fenced(reader(1, 0, 10, 100, 80), 3)}}, "fencing", 0},
		{"a write of a shared Lock", Record{Locks: []*Lock{fenced(reader(1, 0, 10, 100, 80), 0)},
			Writes: []FenceWrite{{Seq: 1, LockID: 1, Key: "k", At: at(20), Accepted: true}}}, "fencing", 0},
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
			for _, f := range v.Found {
				if f.Kind == "shared" || f.Kind == "lease" {
					assert.Equal(t, "k", f.Key, "finding on the wrong key: %s", f.Detail)
				}
			}
			assert.Equal(t, tc.together, v.SharedTogether, "shared Locks together")
		})
	}
	// The finding names the reader as shared, and the writer of several
	// keys by its keys.
	v := Check(&Record{Locks: []*Lock{lock(1, ak, 0, 10, 100, 80), reader(2, 20, 60, 200, 150)}})
	if assert.Len(t, v.Found, 1) {
		assert.ElementsMatch(t, []int{1, 2}, []int{v.Found[0].Holds[0].ID, v.Found[0].Holds[1].ID})
		assert.Contains(t, v.Found[0].Detail, "lock #2 of c (shared)")
		assert.Contains(t, v.Found[0].Detail, "keys a, k")
	}
}

// TestNemesisCheckerPermits feeds Check histories with permits: per key, at
// most n permits hold at once, no two overlapping in one slot, judged by
// the same windows as exclusive holds; a key of permits holds nothing
// else. n+1 permits at once are a permits finding naming the n+1 holders,
// as are two overlapping in one slot or with different counts; n at once,
// or holders of one slot in turn, pass, and are counted.
func TestNemesisCheckerPermits(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// permit is one of n permits of key "s", in slot, acquired in [acq0,
	// acq1], valid until until, whose Release started at rel (no Release
	// if rel < 0).
	permitOf := func(key string, id, n, slot, acq0, acq1, until, rel int) *Lock {
		l := &Lock{ID: id, Client: "c", Key: key, Permits: n, Slot: slot, Acquires: []Span{{at(acq0), at(acq1)}},
			Proofs: []Proof{{at(acq1), at(until)}}}
		if rel >= 0 {
			l.Releases = []Span{{at(rel), at(rel + 1)}}
		}
		return l
	}
	permit := func(id, n, slot, acq0, acq1, until, rel int) *Lock {
		return permitOf("s", id, n, slot, acq0, acq1, until, rel)
	}
	lock := func(id int, keys []string, acq0, acq1, until, rel int) *Lock {
		l := &Lock{ID: id, Client: "c", Key: keys[0], Acquires: []Span{{at(acq0), at(acq1)}},
			Proofs: []Proof{{at(acq1), at(until)}}, Releases: []Span{{at(rel), at(rel + 1)}}}
		if len(keys) > 1 {
			l.Keys = keys
		}
		return l
	}
	shared := func(l *Lock) *Lock { l.Shared = true; return l }
	fenced := func(l *Lock, fence uint64) *Lock { l.Fenced, l.Fence = true, fence; return l }
	extended := func(l *Lock, from, until int) *Lock {
		l.Caps = append(l.Caps, Proof{at(from - 1), at(until)})
		l.Proofs = append(l.Proofs, Proof{at(from), at(until)})
		return l
	}
	permitDo := func(id, n, slot, acq0, fnStart, lastLive, fnEnd int) *Lock {
		return &Lock{ID: id, Client: "d", Key: "s", Do: true, Permits: n, Slot: slot, Acquires: []Span{{at(acq0), at(fnStart)}},
			Releases: []Span{{at(fnEnd), at(fnEnd + 1)}}, Proofs: []Proof{{at(fnStart), at(lastLive)}},
			FnStart: at(fnStart), FnEnd: at(fnEnd)}
	}

	tests := []struct {
		name     string
		r        Record
		kind     string // "" for a clean history
		most     int    // the most Locks a finding names
		together int    // pairs of permits that held together
		full     int    // times a key's n permits all held (two in one slot count)
	}{
		{"n+1 at once, in n+1 slots", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 80), permit(2, 2, 1, 0, 20, 100, 90), permit(3, 2, 2, 0, 30, 100, 95)}}, "permits", 3, 3, 1},
		{"n+1 at once", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 80), permit(2, 2, 1, 0, 20, 100, 90), permit(3, 2, 0, 0, 30, 100, 95)}}, "permits", 3, 2, 1},
		{"n at once", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 80), permit(2, 2, 1, 0, 20, 100, 90)}}, "", 0, 1, 1},
		{"three of three at once", Record{Locks: []*Lock{
			permit(1, 3, 0, 0, 10, 100, 80), permit(2, 3, 2, 0, 20, 100, 90), permit(3, 3, 1, 0, 30, 100, 95)}}, "", 0, 3, 1},
		{"three holders, never more than two at once", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 50), permit(2, 2, 1, 0, 20, 100, 90), permit(3, 2, 0, 20, 50, 200, 120)}}, "", 0, 2, 1},
		{"full twice", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 50), permit(2, 2, 1, 0, 20, 100, 40), permit(3, 2, 0, 20, 50, 200, 120),
			permit(4, 2, 1, 20, 60, 200, 100)}}, "", 0, 2, 2},
		{"two in one slot", Record{Locks: []*Lock{
			permit(1, 3, 1, 0, 10, 100, 80), permit(2, 3, 1, 20, 60, 200, 150)}}, "permits", 2, 0, 0},
		{"one slot in turn", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 50), permit(2, 2, 0, 5, 50, 200, 150)}}, "", 0, 0, 0},
		{"one slot after a crashed holder's validity", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, -1), permit(2, 2, 0, 20, 100, 200, 150)}}, "", 0, 0, 0},
		{"one slot within a crashed holder's validity", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, -1), permit(2, 2, 0, 20, 99, 200, 150)}}, "permits", 2, 0, 1},
		{"extended past a third holder's start", Record{Locks: []*Lock{
			extended(permit(1, 2, 0, 0, 10, 100, 300), 90, 250), permit(2, 2, 1, 0, 20, 300, 280),
			permit(3, 2, 0, 20, 150, 400, 350)}}, "permits", 3, 2, 1},
		{"extended shorter, a third holder after", Record{Locks: []*Lock{
			extended(permit(1, 2, 0, 0, 10, 300, 400), 100, 150), permit(2, 2, 1, 0, 20, 300, 280),
			permit(3, 2, 0, 20, 200, 400, 350)}}, "", 0, 2, 2},
		{"permits of different counts", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 80), permit(2, 3, 1, 20, 60, 200, 150)}}, "permits", 2, 0, 1},
		{"n+1 on two keys", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 80), permit(2, 2, 1, 0, 20, 100, 90), permitOf("t", 3, 2, 0, 0, 30, 100, 95)}}, "", 0, 1, 1},
		{"a permit beside an exclusive Lock", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 80), lock(2, []string{"s"}, 20, 60, 200, 150)}}, "exclusion", 2, 0, 0},
		{"a permit beside a shared Lock", Record{Locks: []*Lock{
			shared(lock(1, []string{"s"}, 0, 10, 100, 80)), permit(2, 2, 0, 20, 60, 200, 150)}}, "exclusion", 2, 0, 0},
		{"a permit beside an AcquireAll of its key", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 80), lock(2, []string{"a", "s"}, 20, 60, 200, 150)}}, "exclusion", 2, 0, 0},
		{"an exclusive Lock after the permits", Record{Locks: []*Lock{
			permit(1, 2, 0, 0, 10, 100, 50), permit(2, 2, 1, 0, 20, 100, 60), lock(3, []string{"s"}, 20, 60, 200, 150)}}, "", 0, 1, 1},
		{"a permit Do's context live in its slot under another", Record{Locks: []*Lock{
			permitDo(1, 2, 0, 0, 10, 90, 100), permit(2, 2, 0, 50, 60, 200, 150)}}, "lease", 2, 0, 1},
		{"a permit Do beside another", Record{Locks: []*Lock{
			permitDo(1, 2, 0, 0, 10, 90, 100), permit(2, 2, 1, 50, 60, 200, 150)}}, "", 0, 1, 1},
		{"a permit Do's overlap within the slack", Record{Slack: 20 * time.Millisecond, Locks: []*Lock{
			permitDo(1, 2, 0, 0, 10, 70, 75), permit(2, 2, 0, 50, 60, 200, 150)}}, "", 0, 0, 0},
		{"n+1 with a Do", Record{Locks: []*Lock{
			permitDo(1, 2, 0, 0, 10, 90, 100), permit(2, 2, 1, 0, 20, 100, 90), permit(3, 2, 2, 0, 30, 100, 95)}}, "lease", 3, 3, 1},
		{"a permit of a fenced Client has no fence", Record{Locks: []*Lock{fenced(permit(1, 2, 0, 0, 10, 100, 80), 0)}}, "", 0, 0, 0},
		{"a permit with a fence", Record{Locks: []*Lock{fenced(permit(1, 2, 0, 0, 10, 100, 80), 3)}}, "fencing", 0, 0, 0},
		{"a write of a permit", Record{Locks: []*Lock{fenced(permit(1, 2, 0, 0, 10, 100, 80), 0)},
			Writes: []FenceWrite{{Seq: 1, LockID: 1, Key: "s", At: at(20), Accepted: true}}}, "fencing", 0, 0, 0},
		{"permits Probe in time", Record{Bound: time.Second, Probes: []Probe{{Key: "s", Permits: 2, Took: 900 * time.Millisecond}}}, "", 0, 0, 0},
		{"permits Probe too slow", Record{Bound: time.Second, Probes: []Probe{{Key: "s", Permits: 2, Took: 1100 * time.Millisecond}}}, "lockout", 0, 0, 0},
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
			most := 0
			for _, f := range v.Found {
				most = max(most, len(f.Holds))
				if len(f.Holds) > 0 {
					assert.Equal(t, "s", f.Key, "finding on the wrong key: %s", f.Detail)
				}
			}
			assert.Equal(t, tc.most, most, "the most Locks a finding names: %v", v.Found)
			assert.Equal(t, tc.together, v.PermitsTogether, "permits together")
			assert.Equal(t, tc.full, v.PermitsFull, "permits full")
		})
	}
	// The finding of n+1 names each holder, its slot and its window, once.
	v := Check(&Record{Locks: []*Lock{
		permit(1, 2, 0, 0, 10, 100, 80), permit(2, 2, 1, 0, 20, 100, 90), permit(3, 2, 2, 0, 30, 100, 95)}})
	if assert.Len(t, v.Found, 1) {
		f := v.Found[0]
		var ids []int
		for _, l := range f.Holds {
			ids = append(ids, l.ID)
		}
		assert.Equal(t, []int{1, 2, 3}, ids)
		assert.Contains(t, f.Detail, "3 permits of 2 hold at once")
		assert.Contains(t, f.Detail, "lock #3 of c (permit, slot 2 of 2) holds [")
		assert.Equal(t, at(30), f.At)
	}
}
