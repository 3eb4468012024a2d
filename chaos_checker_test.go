package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
)

// This file is the checker of the chaos suite (chaos_test.go): a history of
// what the clients did and saw, and the verdicts drawn from it. The checker
// knows nothing about the faults; it judges the history alone, so a scenario
// that breaks the lock on purpose (restart without persistence, failover of
// an asynchronous replica) must and does make it report violations, and
// TestChaosChecker feeds it synthetic histories.
//
// All times are readings of this process's clock, with Go's monotonic part:
// every client of a scenario runs in this one process, so the readings of
// different clients are comparable without any allowance for skew. The
// nodes' expiry clock is the host's too (containers share the kernel clock).

// chaosHistory is what the clients of one scenario did and saw. It is safe
// for concurrent use.
type chaosHistory struct {
	mu       sync.Mutex
	holds    []*hold
	ops      int            // lock calls: acquire, extend, release
	failures map[string]int // failed acquires by cause (see cause)
	unclean  []error        // failed acquires with a misleading error (see acquire)
	extendOK int
	lost     int // extends and releases that reported ErrNotHeld
	skipped  int // critical sections abandoned because validity ran out

	counters map[string]*atomic.Int64 // per key, incremented read-wait-write under the lock
	commits  map[string]int           // increments written per key
}

func newChaosHistory() *chaosHistory {
	return &chaosHistory{
		failures: make(map[string]int),
		counters: make(map[string]*atomic.Int64),
		commits:  make(map[string]int),
	}
}

// hold is one successful acquisition: one holder. Two holds are different
// holders even when the same goroutine made them.
type hold struct {
	h        *chaosHistory
	lock     *redlock.Lock // nil in synthetic histories
	Client   string        // who acquired, for reports
	Key      string
	Token    string
	Fence    uint64
	Start    time.Time // Acquire was called
	Acquired time.Time // Acquire returned the lock

	// Guarded by h.mu.
	until      time.Time // latest validity deadline: Until() after the last successful Extend
	released   time.Time // Release was called; zero if never
	releaseErr error
}

// whose describes the holds that had token, for the report of a leaked
// key: none means the token was a failed acquire's.
func (h *chaosHistory) whose(token string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, hd := range h.holds {
		if hd.Token == token {
			out = append(out, fmt.Sprintf("%s held %s from %s (acquire called %s), until %s, release called %s (err %v)",
				hd.Client, hd.Key, hd.Acquired.Format(time.StampMicro), hd.Start.Format(time.StampMicro),
				hd.until.Format(time.StampMicro), hd.released.Format(time.StampMicro), hd.releaseErr))
		}
	}
	if len(out) == 0 {
		return "no hold had this token: a failed acquire's (or a lock handed over to one that gave up)"
	}
	return strings.Join(out, "; ")
}

// add records a hold (used directly by synthetic histories).
func (h *chaosHistory) add(hd *hold) *hold {
	hd.h = h
	h.mu.Lock()
	h.holds = append(h.holds, hd)
	h.mu.Unlock()
	return hd
}

// acquire calls Acquire (or TryAcquire when try is set) and records the
// outcome. Timestamps are taken outside the call: Start no later and Acquired
// no earlier than the real events, which only shortens the window the
// checker tests (see window).
func (h *chaosHistory) acquire(ctx context.Context, c *redlock.Client, client, key string, ttl time.Duration, try bool) (*hold, error) {
	start := time.Now()
	var l *redlock.Lock
	var err error
	if try {
		l, err = c.TryAcquire(ctx, key, ttl)
	} else {
		l, err = c.Acquire(ctx, key, ttl)
	}
	ret := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops++
	if err != nil {
		h.failures[cause(err)]++
		// A failed acquire must match ErrNotAcquired, and match the caller's
		// context error only if that context ended: a node's own deadline
		// is never reported as the caller's.
		if !errors.Is(err, redlock.ErrNotAcquired) || (ctx.Err() == nil && cause(err) == "deadline") {
			h.unclean = append(h.unclean, err)
		}
		return nil, err
	}
	hd := &hold{h: h, lock: l, Client: client, Key: key, Token: l.Token(), Fence: l.Fence(),
		Start: start, Acquired: ret, until: l.Until()}
	h.holds = append(h.holds, hd)
	return hd, nil
}

// uncleanErrs returns the failed acquires whose error was misleading (see
// acquire).
func (h *chaosHistory) uncleanErrs() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.unclean)
}

// extend calls Extend and moves the recorded validity deadline on success.
func (hd *hold) extend(ctx context.Context, ttl time.Duration) error {
	err := hd.lock.Extend(ctx, ttl)
	h := hd.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops++
	switch {
	case err == nil:
		h.extendOK++
		hd.until = hd.lock.Until()
	case errors.Is(err, redlock.ErrNotHeld):
		h.lost++
	}
	return err
}

// release records the moment the holder gives the lock up, then calls
// Release. The moment is taken before the call: the holder stops acting on
// the lock there, and the delete cannot reach any node before it.
func (hd *hold) release(ctx context.Context) error {
	h := hd.h
	h.mu.Lock()
	hd.released = time.Now()
	h.mu.Unlock()
	err := hd.lock.Release(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops++
	hd.releaseErr = err
	if errors.Is(err, redlock.ErrNotHeld) {
		h.lost++
	}
	return err
}

// Until returns the hold's current validity deadline.
func (hd *hold) Until() time.Time {
	hd.h.mu.Lock()
	defer hd.h.mu.Unlock()
	return hd.until
}

// window is the interval in which the holder may act on the lock: from the
// return of Acquire to the end of validity or the call to Release, whichever
// comes first.
//
// Why these endpoints make the overlap check sound (no false alarms):
// Redlock promises that while a lock is valid, and until its holder begins to
// release it, no other Acquire of the key returns successfully. The start is
// the return of Acquire, not its call: an Acquire that began while another
// client held the lock and waited for it is legitimate, so the call time
// would raise false alarms. The end is Until, which the library guarantees
// against node expiry (given bounded drift), or the moment Release was
// called, because the successor may legitimately get the lock as soon as the
// deletes land, before Release returns. Every recorded timestamp errs toward
// a shorter window (Acquired is read after the call returned, the release
// moment before the call started), so measurement noise can hide a
// violation of a few microseconds but never invent one. The windows are
// half-open, so a successor that acquires exactly when its predecessor's
// window ends does not count.
func (hd *hold) window() history.Interval {
	to := hd.until
	if !hd.released.IsZero() && hd.released.Before(to) {
		to = hd.released
	}
	return history.Interval{From: hd.Acquired, To: to}
}

// section is one critical section in progress: the counter was read and
// will be written back plus one, the classic lost-update pattern that the
// lock must make safe.
type section struct {
	hd   *hold
	ctr  *atomic.Int64
	read int64
}

// enter reads the key's counter. Atomics make the read and the write visible
// to the race detector without ordering them: the lock alone must keep two
// sections apart.
func (hd *hold) enter() *section {
	h := hd.h
	h.mu.Lock()
	ctr := h.counters[hd.Key]
	if ctr == nil {
		ctr = new(atomic.Int64)
		h.counters[hd.Key] = ctr
	}
	h.mu.Unlock()
	return &section{hd: hd, ctr: ctr, read: ctr.Load()}
}

// exit writes the counter back if the lock is still valid, as a correct
// holder does, and reports whether it did.
func (s *section) exit() bool {
	h := s.hd.h
	if !time.Now().Before(s.hd.Until()) {
		h.mu.Lock()
		h.skipped++
		h.mu.Unlock()
		return false
	}
	s.ctr.Store(s.read + 1)
	h.mu.Lock()
	h.commits[s.hd.Key]++
	h.mu.Unlock()
	return true
}

// cause names why an acquire failed, for the summary. The error alone
// tells: it matches context.DeadlineExceeded or context.Canceled only when
// the caller's context ended (a node that missed its own deadline reports
// ErrNoReply), which acquire checks.
func cause(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "deadline"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return "other"
	}
	if qe.Elapsed > 0 {
		return "no validity"
	}
	busy, down, guarded := 0, 0, 0
	for _, n := range qe.Nodes {
		switch {
		case errors.Is(n.Err, redlock.ErrHeldByOther):
			busy++
		case errors.Is(n.Err, redlock.ErrRestartGuard):
			guarded++
		default:
			down++
		}
	}
	switch {
	case guarded > 0 && down == 0:
		return map[bool]string{true: "busy+guarded", false: "guarded"}[busy > 0]
	case down == 0:
		return "busy"
	case busy == 0:
		return "unreachable"
	default:
		return "busy+unreachable"
	}
}

// fencedStore is the storage a lock protects, with the fencing check: it
// refuses a write whose fence is lower than the highest it has accepted for
// the key. With guard false it accepts everything, as storage that ignores
// fences does. It records every write for the checker.
type fencedStore struct {
	guard bool

	mu      sync.Mutex
	highest map[string]uint64
	writes  []storeWrite
}

type storeWrite struct {
	hd       *hold
	at       time.Time
	accepted bool
}

func newFencedStore(guard bool) *fencedStore {
	return &fencedStore{guard: guard, highest: make(map[string]uint64)}
}

// write stores on behalf of hd, with hd's fence, and reports whether the
// store accepted it. The comparison and the write are one atomic step.
func (s *fencedStore) write(hd *hold) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := !s.guard || hd.Fence >= s.highest[hd.Key]
	if ok {
		s.highest[hd.Key] = max(s.highest[hd.Key], hd.Fence)
	}
	s.writes = append(s.writes, storeWrite{hd: hd, at: time.Now(), accepted: ok})
	return ok
}

func (s *fencedStore) log() []storeWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// overlap is two holders of one key at once.
type overlap struct{ history.Overlap[*hold] }

func (o overlap) String() string {
	const clock = "15:04:05.000"
	return fmt.Sprintf("%q: %s holds [%v, %v), %s holds [%v, %v) (%v overlap)", o.A.Key,
		o.A.Holder.Client, o.A.From.Format(clock), o.A.To.Format(clock),
		o.B.Holder.Client, o.B.From.Format(clock), o.B.To.Format(clock), o.Both.Len().Round(time.Millisecond))
}

// verdict is what the checker concludes from a history.
type verdict struct {
	Overlaps      []overlap // (a) two holders of one key at once
	StaleAccepted int       // (b) writes by a superseded holder that the store took
	StaleRejected int       //     ... and that it refused
	// RightfulRejected counts writes by the newest holder that the store
	// refused: fencing that hurts liveness. It must stay 0 too.
	RightfulRejected int
	LostUpdates      int               // (c) increments written minus increments the counters show
	Leaked           []history.NodeKey // (d) keys no live holder accounts for
	Residue          int               // keys of holders that never confirmed a release
}

// check judges the history, the writes a store saw (nil if none) and the
// keys found on the nodes at the end (nil if not scanned). Call it once the
// workload has stopped.
func (h *chaosHistory) check(writes []storeWrite, found []history.NodeKey) verdict {
	h.mu.Lock()
	defer h.mu.Unlock()
	var v verdict

	// (a) Overlaps, per key, between every pair of distinct holders.
	byKey := make(map[string][]*hold)
	windows := make([]history.Window[*hold], len(h.holds))
	for i, hd := range h.holds {
		byKey[hd.Key] = append(byKey[hd.Key], hd)
		windows[i] = history.Window[*hold]{Key: hd.Key, Holder: hd, Interval: hd.window()}
	}
	for _, o := range history.Overlaps(windows) {
		v.Overlaps = append(v.Overlaps, overlap{o})
	}

	// (b) A write is stale when another holder of the key acquired after the
	// writer did and before the write: the writer had been superseded,
	// whatever it believed. The fences play no part in this judgement, so it
	// also judges the store.
	for _, w := range writes {
		stale := false
		for _, o := range byKey[w.hd.Key] {
			if o != w.hd && o.Acquired.After(w.hd.Acquired) && o.Acquired.Before(w.at) {
				stale = true
				break
			}
		}
		switch {
		case stale && w.accepted:
			v.StaleAccepted++
		case stale:
			v.StaleRejected++
		case !w.accepted:
			v.RightfulRejected++
		}
	}

	// (c) Every committed increment must show in the counter.
	for key, n := range h.commits {
		v.LostUpdates += n - int(h.counters[key].Load())
	}

	// (d) A key left on a node is accounted for only by a holder that never
	// confirmed its release: it stays until its TTL, as designed. Anything
	// else, the token of a failed attempt (which no hold knows) or of a
	// released lock, was left behind by a rollback or release that did not
	// reach the node.
	unreleased := make(map[string]bool)
	for _, hd := range h.holds {
		if hd.released.IsZero() || hd.releaseErr != nil {
			unreleased[hd.Token] = true
		}
	}
	for _, k := range found {
		if unreleased[k.Value] {
			v.Residue++
		} else {
			v.Leaked = append(v.Leaked, k)
		}
	}
	return v
}

// acquiredBetween counts the holds whose Acquire started at or after from
// and returned at or before to.
func (h *chaosHistory) acquiredBetween(from, to time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, hd := range h.holds {
		if !hd.Start.Before(from) && !hd.Acquired.After(to) {
			n++
		}
	}
	return n
}

// firstAcquiredAfter is when the first acquisition whose attempt started
// at from or later returned, and false if there was none.
func (h *chaosHistory) firstAcquiredAfter(from time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first time.Time
	for _, hd := range h.holds {
		if !hd.Start.Before(from) && (first.IsZero() || hd.Acquired.Before(first)) {
			first = hd.Acquired
		}
	}
	return first, !first.IsZero()
}

// summary is one row of the chaos table.
type summary struct {
	ID, Name string
	Ops      int
	Acquired int
	Failures map[string]int
	Lost     int // extends and releases reporting ErrNotHeld
	verdict
	LeakChecked bool
	Expected    string // the asserted outcome, in words
}

func (h *chaosHistory) summary(id, name string, v verdict, leakChecked bool, expected string) summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	return summary{ID: id, Name: name, Ops: h.ops, Acquired: len(h.holds),
		Failures: maps.Clone(h.failures), Lost: h.lost, verdict: v, LeakChecked: leakChecked, Expected: expected}
}

func (s summary) failures() string {
	if len(s.Failures) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Failures)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.Failures[k]))
	}
	return strings.Join(parts, ", ")
}

func (s summary) leaked() string {
	if !s.LeakChecked {
		return "n/a"
	}
	return fmt.Sprint(len(s.Leaked))
}

func (s summary) stale() string {
	if s.StaleAccepted+s.StaleRejected == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d", s.StaleRejected, s.StaleAccepted)
}

// line is the one-line summary a scenario logs.
func (s summary) line() string {
	return fmt.Sprintf("%s %s: ops=%d acquired=%d failed=[%s] lost-reported=%d overlaps=%d lost-updates=%d stale-rejected/accepted=%s leaked=%s",
		s.ID, s.Name, s.Ops, s.Acquired, s.failures(), s.Lost, len(s.Overlaps), s.LostUpdates, s.stale(), s.leaked())
}

// chaosTable collects the rows of the scenarios that ran.
type chaosTable struct {
	mu   sync.Mutex
	rows []summary
	// lag measures the process's scheduling lag while the scenarios run;
	// their latency bounds allow for it (lagProbe).
	lag *lagProbe
}

// record logs a scenario's summary line and adds it to the table.
func (t *chaosTable) record(tb testing.TB, s summary) {
	tb.Helper()
	tb.Log(s.line())
	t.add(s)
}

func (t *chaosTable) add(s summary) {
	t.mu.Lock()
	t.rows = append(t.rows, s)
	t.mu.Unlock()
}

func (t *chaosTable) markdown() string {
	t.mu.Lock()
	rows := slices.Clone(t.rows)
	t.mu.Unlock()
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	var b strings.Builder
	b.WriteString("| # | scenario | ops | acquired | failed acquires by cause | ErrNotHeld reported | overlaps | lost updates | stale writes rejected/accepted | leaked keys | asserted |\n")
	b.WriteString("|---|---|--:|--:|---|--:|--:|--:|--:|--:|---|\n")
	for _, s := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %d | %d | %d | %s | %s | %s |\n",
			s.ID, s.Name, s.Ops, s.Acquired, s.failures(), s.Lost, len(s.Overlaps), s.LostUpdates, s.stale(), s.leaked(), s.Expected)
	}
	return b.String()
}

// TestChaosChecker shows that the checker can fail: synthetic histories with
// an overlap, a stale write taken by the store, a lost update and a leaked
// key are all reported, and the boundary cases are not.
func TestChaosChecker(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(h *chaosHistory, client, key string, fence uint64, acquired, until, released int) *hold {
		hd := h.add(&hold{Client: client, Key: key, Token: client + "-token", Fence: fence,
			Start: at(acquired - 5), Acquired: at(acquired), until: at(until)})
		if released >= 0 {
			hd.released = at(released)
		}
		return hd
	}

	t.Run("overlaps", func(t *testing.T) {
		h := newChaosHistory()
		mk(h, "A", "k", 0, 0, 1000, 800)    // holds [0, 800)
		mk(h, "B", "k", 0, 500, 1500, 900)  // starts inside A: a violation
		mk(h, "C", "k", 0, 900, 2000, 1200) // starts when B's window ends: none
		mk(h, "D", "k", 0, 1300, 1250, -1)  // Until before its own start: an empty window
		mk(h, "E", "other", 0, 100, 2000, -1)
		mk(h, "F", "k", 0, 1200, 3000, -1) // starts as C releases: none
		mk(h, "G", "k", 0, 2999, 4000, -1) // starts inside F's validity: a violation
		v := h.check(nil, nil)
		var got []string
		for _, o := range v.Overlaps {
			got = append(got, o.A.Holder.Client+o.B.Holder.Client)
		}
		if want := []string{"AB", "FG"}; !slices.Equal(got, want) {
			t.Fatalf("overlaps %v, want %v", got, want)
		}
		t.Log(v.Overlaps[0])
	})

	t.Run("stale writes", func(t *testing.T) {
		h := newChaosHistory()
		a := mk(h, "A", "k", 7, 0, 100, -1)
		b := mk(h, "B", "k", 8, 300, 1000, 900)
		writes := []storeWrite{
			{hd: a, at: at(50), accepted: true},   // A while it holds: rightful
			{hd: b, at: at(400), accepted: true},  // B: rightful
			{hd: a, at: at(500), accepted: false}, // A after B took over, refused
			{hd: a, at: at(600), accepted: true},  // ... and taken: the violation
			{hd: b, at: at(700), accepted: false}, // B refused though newest
		}
		v := h.check(writes, nil)
		if v.StaleAccepted != 1 || v.StaleRejected != 1 || v.RightfulRejected != 1 {
			t.Fatalf("stale accepted %d, rejected %d, rightful rejected %d; want 1, 1, 1",
				v.StaleAccepted, v.StaleRejected, v.RightfulRejected)
		}
	})

	t.Run("stores", func(t *testing.T) {
		h := newChaosHistory()
		a := mk(h, "A", "k", 7, 0, 100, -1)
		b := mk(h, "B", "k", 8, 300, 1000, 900)
		guarded, naive := newFencedStore(true), newFencedStore(false)
		for _, s := range []*fencedStore{guarded, naive} {
			s.write(a)
			s.write(b)
			s.write(a)
		}
		// The stores stamp writes with the real time; move them onto the
		// synthetic timeline.
		fix := func(ws []storeWrite) []storeWrite {
			for i := range ws {
				ws[i].at = at(100 * (i + 1) * 3)
			}
			return ws
		}
		if v := h.check(fix(guarded.log()), nil); v.StaleRejected != 1 || v.StaleAccepted != 0 {
			t.Fatalf("guarded store: %+v", v)
		}
		if v := h.check(fix(naive.log()), nil); v.StaleAccepted != 1 {
			t.Fatalf("unguarded store: stale accepted %d, want 1", v.StaleAccepted)
		}
	})

	t.Run("lost updates", func(t *testing.T) {
		h := newChaosHistory()
		a := mk(h, "A", "k", 0, 0, 60_000, -1)
		b := mk(h, "B", "k", 0, 0, 60_000, -1)
		sa, sb := a.enter(), b.enter() // both read 0
		sa.exit()
		sb.exit() // writes 1 again
		c := mk(h, "C", "k", 0, 0, 60_000, -1)
		c.enter().exit()
		expired := mk(h, "D", "k", 0, 0, -1, -1)
		if expired.enter().exit() {
			t.Fatal("a section past its validity wrote")
		}
		if v := h.check(nil, nil); v.LostUpdates != 1 {
			t.Fatalf("lost updates %d, want 1", v.LostUpdates)
		}
	})

	t.Run("leaks", func(t *testing.T) {
		h := newChaosHistory()
		mk(h, "A", "k", 0, 0, 100, 50) // released
		held := mk(h, "B", "k", 0, 200, 300, -1)
		failed := mk(h, "C", "k", 0, 400, 500, 450)
		failed.releaseErr = redlock.ErrNotHeld
		found := []history.NodeKey{
			{Node: 0, Key: "k", Value: "A-token"},       // a released lock's key: leaked
			{Node: 1, Key: "k", Value: held.Token},      // never released: residue
			{Node: 2, Key: "k", Value: failed.Token},    // release not confirmed: residue
			{Node: 3, Key: "k", Value: "unknown-token"}, // a failed attempt's key: leaked
		}
		v := h.check(nil, found)
		if len(v.Leaked) != 2 || v.Residue != 2 {
			t.Fatalf("leaked %v, residue %d; want 2 and 2", v.Leaked, v.Residue)
		}
	})

	t.Run("table", func(t *testing.T) {
		var tab chaosTable
		h := newChaosHistory()
		mk(h, "A", "k", 0, 0, 1000, -1)
		mk(h, "B", "k", 0, 10, 1000, -1)
		h.failures["busy"] = 3
		tab.add(h.summary("9", "synthetic", h.check(nil, nil), false, "overlaps > 0"))
		md := tab.markdown()
		if !strings.Contains(md, "| 9 | synthetic | 0 | 2 | busy 3 | 0 | 1 | 0 | 0/0 | n/a | overlaps > 0 |") {
			t.Fatalf("table:\n%s", md)
		}
	})
}
