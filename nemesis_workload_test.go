package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
)

// This file is the nemesis's workload: workers that run a random mix of
// every feature on a few keys, and the recorder of what they did and saw,
// in the shape internal/history.Check reads.

// nemRecorder records a run. It is safe for concurrent use.
type nemRecorder struct {
	mu      sync.Mutex
	locks   map[*redlock.Lock]*history.Lock
	all     []*history.Lock
	writes  []history.FenceWrite
	leases  []history.LeaseObs
	highest map[string]uint64 // the fenced store: highest fence accepted per key
	ops     int
	shared  int            // of ops, those on shared Locks (named "...-shared")
	permits int            // of ops, those on permits (named "...-permit")
	results map[string]int // "op: outcome" counts, for the log
	events  []nemEvent     // what happened, for the timeline of a finding
	// wrongs lists what the library got wrong that the checker does not
	// judge: a Lock whose Shared() or Permit() was not what its Acquire or
	// Do asked for (the checker would judge it by the wrong rule), and a
	// call that failed with ErrInvalidArgument, which no call of the
	// workload is (permits have keys of their own).
	wrongs []string
}

// nemEvent is one line of the timeline: a call that ended, or a fault. Keys
// are the keys it concerns (several for a Lock of several keys), nil for a
// fault, which concerns every key.
type nemEvent struct {
	At   time.Time
	Keys []string
	Text string
}

// event adds a line to the timeline of each of keys (nil: of every key).
func (rec *nemRecorder) event(at time.Time, keys []string, format string, args ...any) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.events = append(rec.events, nemEvent{at, keys, fmt.Sprintf(format, args...)})
}

// timeline returns the lines about key from before until after at, in
// order, at most max of them (the latest).
func (rec *nemRecorder) timeline(key string, at time.Time, before, after time.Duration, max int) string {
	rec.mu.Lock()
	evs := slices.Clone(rec.events)
	rec.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b nemEvent) int { return a.At.Compare(b.At) })
	var lines []string
	for _, e := range evs {
		if (e.Keys == nil || slices.Contains(e.Keys, key)) && !e.At.Before(at.Add(-before)) && !e.At.After(at.Add(after)) {
			lines = append(lines, e.At.Format("15:04:05.000000")+" "+e.Text)
		}
	}
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return strings.Join(lines, "\n")
}

func newNemRecorder() *nemRecorder {
	return &nemRecorder{locks: make(map[*redlock.Lock]*history.Lock), highest: make(map[string]uint64),
		results: make(map[string]int)}
}

// op counts one call and its outcome. The name of a call on a shared
// Lock ends in "-shared", on a permit in "-permit" (opName). A call that
// failed with ErrInvalidArgument is wrong: every call the workload makes
// is valid.
func (rec *nemRecorder) op(name string, err error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.ops++
	switch {
	case strings.HasSuffix(name, "-shared"):
		rec.shared++
	case strings.HasSuffix(name, "-permit"):
		rec.permits++
	}
	rec.results[name+": "+outcome(err)]++
	if errors.Is(err, redlock.ErrInvalidArgument) {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("%s failed with ErrInvalidArgument: %v", name, err))
	}
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, s := range []error{redlock.ErrClosed, redlock.ErrInvalidArgument, redlock.ErrLockLost, redlock.ErrUnavailable,
		redlock.ErrReleased, redlock.ErrReleaseUnconfirmed, redlock.ErrNotHeld, redlock.ErrNotAcquired} {
		if strings.Contains(err.Error(), s.Error()) {
			return s.Error()
		}
	}
	return "other"
}

// result returns how many calls of op ended with err's outcome.
func (rec *nemRecorder) result(op string, err error) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.results[op+": "+outcome(err)]
}

// opName names a call of op on nl, a shared Lock's with "-shared", a
// permit's with "-permit".
func opName(op string, nl *history.Lock) string {
	switch {
	case nl.Shared:
		return op + "-shared"
	case nl.Permits > 0:
		return op + "-permit"
	}
	return op
}

// opCount returns how many calls were made, and how many of them on
// shared Locks and on permits.
func (rec *nemRecorder) opCount() (all, shared, permits int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.ops, rec.shared, rec.permits
}

func (rec *nemRecorder) outcomes() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(rec.results)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, rec.results[k]))
	}
	return strings.Join(parts, ", ")
}

// acquired records that an Acquire in s returned l: a new Lock, or one
// more hold of a Lock its owner re-entered. fenced says that l's Client
// fences, shared that the Acquire asked for a shared Lock, permits the n
// of Permits it asked for (0: none): the checker judges l by what was
// asked for, and a Lock that says otherwise is wrong. A permit is judged
// in the slot its Permit() gives.
func (rec *nemRecorder) acquired(l *redlock.Lock, worker, owner string, fenced, shared bool, permits int, s history.Span) *history.Lock {
	at := time.Now()
	u := l.Until()
	slot, isPermit := l.Permit()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl := rec.locks[l]
	if nl == nil {
		nl = &history.Lock{ID: len(rec.all) + 1, Client: worker, Key: l.Key(), Owner: owner, Shared: shared,
			Permits: permits, Slot: slot, Fenced: fenced, Fence: l.Fence()}
		if keys := l.Keys(); len(keys) > 1 {
			nl.Keys = keys // a hold of each: the checker's windows are on every one
		}
		if l.Shared() != shared {
			rec.wrongs = append(rec.wrongs, fmt.Sprintf("lock #%d of %s: Shared() %v, asked %v", nl.ID, worker, l.Shared(), shared))
		}
		rec.checkPermit(fmt.Sprintf("lock #%d of %s", nl.ID, worker), permits, slot, isPermit)
		rec.locks[l] = nl
		rec.all = append(rec.all, nl)
	}
	nl.Acquires = append(nl.Acquires, s)
	nl.Proofs = append(nl.Proofs, history.Proof{From: at, Until: u})
	return nl
}

// checkPermit notes as wrong a Permit() of what (a Lock, a Do) that is
// not what was asked for: ok with a slot below n for a permit of n
// (permits > 0), not ok for any other Lock.
func (rec *nemRecorder) checkPermit(what string, permits, slot int, ok bool) {
	if ok != (permits > 0) || ok && (slot < 0 || slot >= permits) {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("%s: Permit() %d, %v, asked Permits(%d)", what, slot, ok, permits))
	}
}

// prove records the validity l claims now. Until is read after the
// moment: an Extend that ended in between only ever lowered it, or raised
// it from a start before the moment, when the old claim still stood. A
// permit must still hold the slot it was judged in.
func (rec *nemRecorder) prove(nl *history.Lock, l *redlock.Lock) {
	at := time.Now()
	u := l.Until()
	slot, _ := l.Permit()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Proofs = append(nl.Proofs, history.Proof{From: at, Until: u})
	if nl.Permits > 0 && slot != nl.Slot {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("lock #%d of %s: Permit() moved from slot %d to %d", nl.ID, nl.Client, nl.Slot, slot))
	}
}

// capAt records an Extend of nl for ttl starting at start: from then on the
// lock is valid at most until the TTL less the drift (the default) from
// there, whatever the Extend's outcome.
func (rec *nemRecorder) capAt(nl *history.Lock, start time.Time, ttl time.Duration) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Caps = append(nl.Caps, history.Proof{From: start, Until: start.Add(ttl - ttl/100 - 2*time.Millisecond)})
}

// releasing records the start of a Release of nl, before it is called.
func (rec *nemRecorder) releasing(nl *history.Lock) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Releases = append(nl.Releases, history.Span{Start: time.Now()})
	return len(nl.Releases) - 1
}

func (rec *nemRecorder) released(nl *history.Lock, i int, err error) {
	end := time.Now()
	rec.mu.Lock()
	nl.Releases[i].End = end
	rec.mu.Unlock()
	rec.op(opName("release", nl), err)
}

// write is a write to the fenced store on behalf of nl, an exclusive Lock
// of a fenced Client (whatever its fence), to each of its keys: the store
// refuses a fence lower than the highest it accepted for the key. The
// check and the write are one step per key. A shared Lock or a permit,
// which has no fence, writes nothing.
func (rec *nemRecorder) write(nl *history.Lock) {
	if !nl.Fenced || nl.Shared || nl.Permits > 0 {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, key := range nl.AllKeys() {
		ok := nl.Fence >= rec.highest[key]
		if ok {
			rec.highest[key] = nl.Fence
		}
		rec.writes = append(rec.writes, history.FenceWrite{Seq: len(rec.writes), LockID: nl.ID, Key: key,
			Fence: nl.Fence, At: time.Now(), Accepted: ok})
	}
}

// look records one look at a KeepAlive context of l and reports whether it
// was live.
func (rec *nemRecorder) look(nl *history.Lock, l *redlock.Lock, kctx context.Context) bool {
	before := l.Until()
	at := time.Now()
	live := kctx.Err() == nil
	after := l.Until()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.leases = append(rec.leases, history.LeaseObs{LockID: nl.ID, Key: nl.Key, At: at, Live: live, Before: before, After: after})
	return live
}

// do records a Do call whose function ran. gotShared is what its Lock's
// Shared() said, gotPermit whether its Permit() said ok (its slot is in
// d.Slot).
func (rec *nemRecorder) do(d *history.Lock, gotShared, gotPermit bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	d.ID = len(rec.all) + 1
	rec.all = append(rec.all, d)
	if gotShared != d.Shared {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("Do #%d of %s: Shared() %v, asked %v", d.ID, d.Client, gotShared, d.Shared))
	}
	rec.checkPermit(fmt.Sprintf("Do #%d of %s", d.ID, d.Client), d.Permits, d.Slot, gotPermit)
}

// wrong returns what the library got wrong that the checker does not
// judge (wrongs).
func (rec *nemRecorder) wrong() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.wrongs)
}

// record returns a copy of the history for the checker.
func (rec *nemRecorder) record() *history.Record {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := &history.Record{Writes: slices.Clone(rec.writes), Leases: slices.Clone(rec.leases)}
	for _, l := range rec.all {
		cp := *l
		cp.Acquires, cp.Releases, cp.Proofs, cp.Caps = slices.Clone(l.Acquires), slices.Clone(l.Releases), slices.Clone(l.Proofs), slices.Clone(l.Caps)
		cp.Keys = slices.Clone(l.Keys)
		// A Release still in progress started all the same.
		r.Locks = append(r.Locks, &cp)
	}
	return r
}

// worker runs operations until stop. Its choices come from the seed, each
// round's from a source of its own, so that a replay makes the same choices
// in the same round whatever the outcomes before it; their timing varies.
func (run *nemRun) worker(w int, stop <-chan struct{}) {
	slot := run.slots[nemSlotOf(w)]
	name := fmt.Sprintf("w%d@%s", w, slot.name)
	for round := uint64(0); ; round++ {
		select {
		case <-stop:
			return
		default:
		}
		r := rand.New(rand.NewPCG(run.seed, uint64(w)<<40|round))
		c := slot.c.Load()
		key := run.keys[r.IntN(len(run.keys))]
		ttl := logDur(r, nemMinTTL, nemMaxTTL)
		p := r.IntN(100)
		stalled := p >= 35 && p < 45
		if run.permits && (run.permitsOnly || !stalled && r.IntN(4) == 0) {
			// A permit of a semaphore key, through the same Client: a
			// quarter of the rounds but the stalled holder's, which stay
			// as many as without permits, as their stale fenced writes
			// are rare. Not more: the lock keys' rarest activity
			// (readers together) must still show in a 20 s run.
			sem := run.sems[r.IntN(len(run.sems))]
			switch p := r.IntN(100); {
			case p < 20:
				run.doRun(r, c, name, sem.key, ttl, sem.n)
			case p < 45:
				run.keepAliveRun(r, slot, c, name, sem.key, ttl, sem.n)
			default:
				run.plainRun(r, slot, c, name, sem.key, ttl, sem.n)
			}
			sleepUpTo(r, 20*time.Millisecond)
			continue
		}
		switch {
		case p < 15:
			run.doRun(r, c, name, key, ttl, 0)
		case p < 35:
			run.keepAliveRun(r, slot, c, name, key, ttl, 0)
		case stalled:
			run.pausedRun(r, name, key, ttl)
		default:
			run.plainRun(r, slot, c, name, key, ttl, 0)
		}
		sleepUpTo(r, 20*time.Millisecond)
	}
}

// logDur is uniform on a log scale: as many TTLs near 50 ms as near 2 s, so
// that short holds (many handovers) and long ones (renewals, faults within
// one hold) both come often.
func logDur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return time.Duration(float64(lo) * math.Pow(float64(hi)/float64(lo), r.Float64()))
}

func sleepUpTo(r *rand.Rand, d time.Duration) { time.Sleep(randDur(r, 0, d)) }

// nemMultiKeys returns key and one or two other keys of the pool, in a
// random order (AcquireAll sorts them): a set of two or three that overlaps
// the other sets and the single keys, as the pool is small.
func (run *nemRun) nemMultiKeys(r *rand.Rand, key string) []string {
	others := slices.DeleteFunc(slices.Clone(run.keys), func(k string) bool { return k == key })
	r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	keys := append([]string{key}, others[:min(len(others), 1+r.IntN(2))]...)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// acquire makes an Acquire or a TryAcquire with a random deadline (some end
// mid-round): with permits, one of the n permits of key, a semaphore key
// (one key, no owner); otherwise, with shareable, a third of the time
// (run.shared) of key shared, which has one key and no owner; otherwise,
// with multi, a quarter of the time an AcquireAll or TryAcquireAll of key
// and one or two other keys of the pool, otherwise of key alone under an
// owner of a small pool a third of the time, so that re-entry and takeover
// from another Client happen (an owner's Lock has one key). Readers and
// writers of one key, single or several, thus contend, and permits of one
// semaphore key.
func (run *nemRun) acquire(r *rand.Rand, slot *nemSlot, c *redlock.Client, name, key string, ttl time.Duration, multi, shareable bool, permits int) (*redlock.Lock, *history.Lock) {
	var opts []redlock.AcquireOption
	if permits > 0 {
		opts = append(opts, redlock.Permits(permits))
		multi, shareable = false, false
	}
	shared := shareable && run.shared && r.IntN(3) == 0
	if shared {
		opts = append(opts, redlock.Shared())
	}
	var keys []string
	if !shared && multi && r.IntN(4) == 0 {
		keys = run.nemMultiKeys(r, key)
	}
	owner := ""
	if permits == 0 && !shared && keys == nil && r.IntN(3) == 0 && run.owners {
		owner = fmt.Sprintf("req-%d", r.IntN(3))
		opts = append(opts, redlock.WithOwner(owner))
	}
	try := r.IntN(3) == 0
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, 2*time.Second))
	defer cancel()
	start := time.Now()
	var l *redlock.Lock
	var err error
	switch {
	case keys != nil && try:
		l, err = c.TryAcquireAll(ctx, keys, ttl, opts...)
	case keys != nil:
		l, err = c.AcquireAll(ctx, keys, ttl, opts...)
	case try:
		l, err = c.TryAcquire(ctx, key, ttl, opts...)
	default:
		l, err = c.Acquire(ctx, key, ttl, opts...)
	}
	end := time.Now()
	op := map[bool]string{true: "try-acquire", false: "acquire"}[try]
	what := fmt.Sprintf("owner %q", owner)
	evKeys := []string{key}
	switch {
	case keys != nil:
		op += "-all"
		what = fmt.Sprintf("keys %v", keys)
		evKeys = keys
	case shared:
		op += "-shared"
		what = "shared"
	case permits > 0:
		op += "-permit"
		what = fmt.Sprintf("permit of %d", permits)
	}
	run.rec.op(op, err)
	if err != nil {
		run.rec.event(end, evKeys, "%s %s(%s, ttl %v) from %s: %v", name, op, what, ttl, start.Format("15:04:05.000000"), err)
		return nil, nil
	}
	nl := run.rec.acquired(l, name, owner, slot.fenced, shared, permits, history.Span{Start: start, End: end})
	held := fmt.Sprintf("fence %d", l.Fence())
	if permits > 0 {
		held = fmt.Sprintf("slot %d", nl.Slot)
	}
	run.rec.event(end, nl.AllKeys(), "%s %s(%s, ttl %v) from %s: lock #%d (token %s, %s, until %s)", name, op, what, ttl,
		start.Format("15:04:05.000000"), nl.ID, l.Token(), held, l.Until().Format("15:04:05.000000"))
	return l, nl
}

// plainRun holds a lock, exclusive or shared, or a permit of key (with
// permits, its n), for a random time (sometimes past its TTL), writes to
// the fenced store while it believes it holds the lock (and sometimes
// after) if it is exclusive, may extend it, and releases it: once, twice,
// twice at once, or racing an Extend.
func (run *nemRun) plainRun(r *rand.Rand, slot *nemSlot, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	l, nl := run.acquire(r, slot, c, name, key, ttl, true, true, permits)
	if l == nil {
		return
	}
	work := randDur(r, 0, ttl*3/2)
	extendAt := time.Duration(-1)
	if r.IntN(2) == 0 {
		extendAt = randDur(r, 0, work+1)
	}
	stale := r.IntN(4) == 0 // writes after Until too: the store must refuse them when superseded
	if time.Now().Before(l.Until()) {
		run.rec.write(nl) // a holder's first write, which supersedes its predecessors'
	}
	start := time.Now()
	for {
		step := randDur(r, 5*time.Millisecond, 50*time.Millisecond)
		if time.Since(start)+step > work {
			break
		}
		time.Sleep(step)
		if extendAt >= 0 && time.Since(start) >= extendAt {
			extendAt = -1
			run.extend(r, l, nl)
		}
		if stale || time.Now().Before(l.Until()) {
			run.rec.write(nl)
		}
	}
	switch r.IntN(10) {
	case 0: // twice
		run.release(l, nl)
		run.release(l, nl)
	case 1: // twice at once
		var wg sync.WaitGroup
		wg.Go(func() { run.release(l, nl) })
		wg.Go(func() { run.release(l, nl) })
		wg.Wait()
	case 2: // racing an Extend
		var wg sync.WaitGroup
		er := rand.New(rand.NewPCG(r.Uint64(), 0))
		wg.Go(func() { run.extend(er, l, nl) })
		wg.Go(func() { run.release(l, nl) })
		wg.Wait()
	default:
		run.release(l, nl)
	}
}

// pausedRun replays a stalled holder under the nemesis, through the first
// Client, which fences: A takes the key and writes, pauses past its
// validity (a GC pause, a stalled process), B takes the key and writes,
// then A wakes up and writes again, which the fenced store must refuse.
// Either Acquire may fail under the faults; B's, of the same owner as A's,
// may return A's Lock again. A may hold several keys (AcquireAll), key
// among them; B takes key alone, so that B's Acquire, which must succeed
// for the stale write to be made, is no rarer than before. Both are
// exclusive: a shared Lock writes nothing.
func (run *nemRun) pausedRun(r *rand.Rand, name, key string, ttl time.Duration) {
	slot := run.slots[0]
	c := slot.c.Load()
	worker, _, _ := strings.Cut(name, "@")
	name = worker + "@" + slot.name
	a, na := run.acquire(r, slot, c, name, key, ttl, true, false, 0)
	if a == nil {
		return
	}
	if time.Now().Before(a.Until()) {
		run.rec.write(na)
	}
	time.Sleep(time.Until(a.Until()) + randDur(r, 0, ttl/2))
	if b, nb := run.acquire(r, slot, c, name, key, logDur(r, nemMinTTL, nemMaxTTL), false, false, 0); b != nil {
		run.rec.write(nb)
		run.rec.write(na)
		run.release(b, nb)
	}
	run.release(a, na)
}

func (run *nemRun) extend(r *rand.Rand, l *redlock.Lock, nl *history.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, time.Second))
	defer cancel()
	ttl := logDur(r, nemMinTTL, nemMaxTTL)
	start := time.Now()
	run.rec.capAt(nl, start, ttl)
	err := l.Extend(ctx, ttl)
	run.rec.op(opName("extend", nl), err)
	run.rec.event(time.Now(), nl.AllKeys(), "extend of lock #%d from %s: %v (until %s)", nl.ID, start.Format("15:04:05.000000"), err,
		l.Until().Format("15:04:05.000000"))
	if err == nil {
		run.rec.prove(nl, l)
	}
}

func (run *nemRun) release(l *redlock.Lock, nl *history.Lock) {
	i := run.rec.releasing(nl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := l.Release(ctx)
	run.rec.released(nl, i, err)
	run.rec.event(time.Now(), nl.AllKeys(), "release of lock #%d from %s: %v", nl.ID, start.Format("15:04:05.000000"), err)
}

// keepAliveRun holds a lock, exclusive or shared, or a permit of key
// (with permits, its n), under KeepAlive for up to three TTLs, looking at
// the context and Until every few milliseconds and, if it is exclusive,
// writing to the fenced store while the context is live.
func (run *nemRun) keepAliveRun(r *rand.Rand, slot *nemSlot, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	l, nl := run.acquire(r, slot, c, name, key, ttl, true, true, permits)
	if l == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	kctx := l.KeepAlive(ctx)
	run.rec.op(opName("keep-alive", nl), nil)
	work := randDur(r, 0, 3*ttl)
	start := time.Now()
	for time.Since(start) < work {
		if !run.rec.look(nl, l, kctx) {
			break
		}
		run.rec.prove(nl, l)
		run.rec.write(nl)
		time.Sleep(randDur(r, 2*time.Millisecond, 30*time.Millisecond))
	}
	cancel()
	run.rec.event(time.Now(), nl.AllKeys(), "keep-alive of lock #%d ends: %v", nl.ID, context.Cause(kctx))
	run.release(l, nl)
}

// doRun runs Do (with permits, on one of the n permits of key; otherwise
// a third of the time shared, with run.shared; otherwise a quarter of the
// time DoAll over key and one or two other keys) with work that sometimes
// outlives the TTL and a deadline that sometimes ends the work; the
// function notes when its context was last seen live.
func (run *nemRun) doRun(r *rand.Rand, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	shared := permits == 0 && run.shared && r.IntN(3) == 0
	var keys []string
	if permits == 0 && !shared && r.IntN(4) == 0 {
		keys = run.nemMultiKeys(r, key)
	}
	work := randDur(r, 0, 2*ttl)
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, 2*time.Second)+randDur(r, 0, 2*work))
	defer cancel()
	steps := make([]time.Duration, 0, 16)
	for total := time.Duration(0); total < work; {
		s := randDur(r, 2*time.Millisecond, 30*time.Millisecond)
		steps = append(steps, s)
		total += s
	}
	d := &history.Lock{Client: name, Key: key, Do: true, Shared: shared, Permits: permits}
	var gotShared, gotPermit bool
	start := time.Now()
	fn := func(kctx context.Context, l *redlock.Lock) error {
		if ks := l.Keys(); len(ks) > 1 {
			d.Key, d.Keys = l.Key(), ks
		}
		gotShared = l.Shared()
		d.Slot, gotPermit = l.Permit()
		d.FnStart = time.Now()
		live := d.FnStart
		for _, s := range steps {
			at := time.Now()
			if kctx.Err() != nil {
				break
			}
			live = at
			time.Sleep(s)
		}
		d.FnEnd = time.Now()
		d.Proofs = []history.Proof{{From: d.FnStart, Until: live}}
		return nil
	}
	op := "do"
	var err error
	switch {
	case keys != nil:
		op = "do-all"
		err = c.DoAll(ctx, keys, ttl, fn)
	case shared:
		op = "do-shared"
		err = c.Do(ctx, key, ttl, fn, redlock.Shared())
	case permits > 0:
		op = "do-permit"
		err = c.Do(ctx, key, ttl, fn, redlock.Permits(permits))
	default:
		err = c.Do(ctx, key, ttl, fn)
	}
	end := time.Now()
	run.rec.op(op, err)
	if d.FnStart.IsZero() {
		return
	}
	d.Acquires = []history.Span{{Start: start, End: d.FnStart}}
	d.Releases = []history.Span{{Start: d.FnEnd, End: end}}
	d.DoNil = err == nil
	run.rec.do(d, gotShared, gotPermit)
	held := ""
	if permits > 0 {
		held = fmt.Sprintf(" (slot %d of %d)", d.Slot, permits)
	}
	run.rec.event(end, d.AllKeys(), "%s %s(keys %v, ttl %v) from %s: lock #%d%s, fn %s..%s, live until %s: %v", name, op, d.AllKeys(), ttl, start.Format("15:04:05.000000"),
		d.ID, held, d.FnStart.Format("15:04:05.000000"), d.FnEnd.Format("15:04:05.000000"), d.Proofs[0].Until.Format("15:04:05.000000"), err)
}
