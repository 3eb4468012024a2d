package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
)

// This file is the nemesis's workload: workers that run a random mix of
// every feature on a few keys, in worker processes (nemesis_procs_test.go),
// and the recorder of what they did and saw, in the shape
// internal/history.Check reads.

// nemWorkload is what one worker process runs: its workers, their
// Clients, and its end of the fenced store.
type nemWorkload struct {
	cfg     nemWorkerConfig
	seed    uint64
	keys    []string
	sems    []nemSem
	owners  bool // a third of the acquires WithOwner
	shared  bool // a third of the Acquires, TryAcquires and Dos Shared
	permits bool // a quarter of the rounds (all with permitsOnly) take a permit of one of sems
	// Permits have keys of their own: a key that permits hold refuses
	// every other acquire, and one that another Lock holds refuses
	// permits, with ErrInvalidArgument.
	permitsOnly bool
	slots       []*nemSlot
	rec         *nemRecorder
	store       *nemStoreClient
}

// nemSem is a semaphore key and the n of its permits.
type nemSem struct {
	Key string
	N   int
}

// nemSlot is one Client, shared by the workers that use it; it is replaced
// by a new one when its process closes it mid-wl.
type nemSlot struct {
	name   string
	fenced bool // its Clients fence
	c      atomic.Pointer[redlock.Client]
	make   func() *redlock.Client
	mu     sync.Mutex
	every  []nemClient // every Client the slot had, for the final Close
}

// nemClient is a Client and its node clients.
type nemClient struct {
	c     *redlock.Client
	nodes []redis.UniversalClient
}

// nemSlotCount is how many Clients k workers use: the first four share two.
func nemSlotCount(k int) int {
	if k <= 4 {
		return (k + 1) / 2
	}
	return 2 + k - 4
}

// nemSlotOf is the slot of the i-th worker of a process.
func nemSlotOf(i int) int {
	if i < 4 {
		return i / 2
	}
	return i - 2
}

// nemRecorder records a wl. In a worker process it applies each record
// to its own copy (which the workers read their Locks from) and sends it
// to TestNemesis, whose recorder applies it in turn. It is safe for
// concurrent use.
type nemRecorder struct {
	mu     sync.Mutex
	proc   string       // the worker process ("" in TestNemesis's)
	sink   func(nemMsg) // where a worker process sends its records
	ids    int          // Locks numbered so far in this process
	locks  map[*redlock.Lock]*history.Lock
	byID   map[int]*history.Lock
	all    []*history.Lock
	leases []history.LeaseObs
	// observations are the observers' reports (Election.Leader, Observe).
	observations []history.Observation
	// waits are the calls that may wait for a key, by id: recorded when
	// they start, so that a call whose process is killed is known.
	waits   map[int]*history.Wait
	waitIDs []int
	results map[string]int // "op: outcome" counts
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

func newNemRecorder(proc string, sink func(nemMsg)) *nemRecorder {
	return &nemRecorder{proc: proc, sink: sink, locks: make(map[*redlock.Lock]*history.Lock),
		byID: make(map[int]*history.Lock), waits: make(map[int]*history.Wait), results: make(map[string]int)}
}

// send applies m and, in a worker process, sends it on; with rec.mu held,
// so that TestNemesis gets the records in the order they were applied.
func (rec *nemRecorder) send(m nemMsg) {
	rec.apply(m)
	if rec.sink != nil {
		rec.sink(m)
	}
}

// add applies a record of a worker process (a nemMsg it sent).
func (rec *nemRecorder) add(m nemMsg) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.apply(m)
}

// apply applies one record, with rec.mu held:
//   - lock: a new Lock (m.Lock, without its calls);
//   - acquire: an Acquire returned Lock m.ID (m.Span), which claimed m.Proof;
//   - proof, cap: Lock m.ID claimed m.Proof, or an Extend capped it;
//   - releasing, released: the m.N-th Release of Lock m.ID started, ended at m.At;
//   - do: a Do whose function ran (m.Lock, whole);
//   - lease: a look at a KeepAlive context;
//   - wait, waited: a call that may wait for a key started (m.Wait, with
//     its id in m.N), returned at m.At, with a Lock if m.Text is "got";
//   - elected: lock m.ID is a leadership (Election.Campaign);
//   - observed: an observer's report, m.Obs;
//   - call: a call m.Name ended with outcome m.Text;
//   - event: a line of the timeline; wrong: what the library got wrong.
func (rec *nemRecorder) apply(m nemMsg) {
	if m.Op == "wait" || m.Op == "waited" {
		rec.applyWait(m)
		return
	}
	l := rec.byID[m.ID]
	if l == nil && m.ID != 0 {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("a record %q of lock #%d, which no record made", m.Op, m.ID))
		return
	}
	switch m.Op {
	case "lock", "do":
		rec.byID[m.Lock.ID] = m.Lock
		rec.all = append(rec.all, m.Lock)
	case "acquire":
		l.Acquires = append(l.Acquires, m.Span)
		l.Proofs = append(l.Proofs, m.Proof)
		if m.TTL > 0 {
			l.TTLs = append(l.TTLs, m.TTL)
		}
	case "elected":
		l.Election = true
	case "observed":
		rec.observations = append(rec.observations, *m.Obs)
	case "proof":
		l.Proofs = append(l.Proofs, m.Proof)
	case "cap":
		l.Caps = append(l.Caps, m.Proof)
		if m.TTL > 0 {
			l.TTLs = append(l.TTLs, m.TTL)
		}
	case "releasing":
		l.Releases = append(l.Releases, history.Span{Start: m.At})
	case "released":
		l.Releases[m.N].End = m.At
		l.Released = l.Released || m.OK
	case "lease":
		rec.leases = append(rec.leases, *m.Lease)
	case "call":
		rec.results[m.Name+": "+m.Text]++
		if m.Text == redlock.ErrInvalidArgument.Error() {
			rec.wrongs = append(rec.wrongs, fmt.Sprintf("%s failed with ErrInvalidArgument", m.Name))
		}
	case "event":
		rec.events = append(rec.events, nemEvent{m.At, m.Keys, m.Text})
	case "wrong":
		rec.wrongs = append(rec.wrongs, m.Text)
	}
}

// applyWait applies a wait or waited record, with rec.mu held.
func (rec *nemRecorder) applyWait(m nemMsg) {
	if m.Op == "wait" {
		w := *m.Wait
		rec.waits[m.N] = &w
		rec.waitIDs = append(rec.waitIDs, m.N)
		return
	}
	if w := rec.waits[m.N]; w != nil {
		w.End, w.Got = m.At, m.Text == "got"
	}
}

// waiting records that a call that may wait for keys starts now, from
// process rec.proc: a writer's (an exclusive acquire of any kind), or a
// shared Acquire's. ttl is what it asks for. It returns the call's id for
// waited.
func (rec *nemRecorder) waiting(keys []string, shared bool, ttl time.Duration) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.ids++
	id := rec.newID()
	rec.send(nemMsg{Op: "wait", N: id, Wait: &history.Wait{Proc: rec.proc, Keys: slices.Clone(keys), Shared: shared, TTL: ttl,
		Span: history.Span{Start: nemNow()}}})
	return id
}

// waited records that call id returned, with a Lock if got.
func (rec *nemRecorder) waited(id int, got bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	text := ""
	if got {
		text = "got"
	}
	rec.send(nemMsg{Op: "waited", N: id, At: nemNow(), Text: text})
}

// writerWaiting reports whether a writer of process proc waits for a key
// that readers use (one of readerKeys) now, as far as its records say: its
// call started and has not returned.
func (rec *nemRecorder) writerWaiting(proc string, readerKeys []string) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := len(rec.waitIDs) - 1; i >= 0; i-- {
		w := rec.waits[rec.waitIDs[i]]
		if w.Proc == proc && !w.Shared && w.End.IsZero() && slices.ContainsFunc(w.Keys, func(k string) bool { return slices.Contains(readerKeys, k) }) {
			return true
		}
	}
	return false
}

// event adds a line to the timeline of each of keys (nil: of every key).
func (rec *nemRecorder) event(at time.Time, keys []string, format string, args ...any) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "event", At: at, Keys: keys, Text: fmt.Sprintf(format, args...)})
}

// wrong notes what the library got wrong, with rec.mu held.
func (rec *nemRecorder) wrong(format string, args ...any) {
	rec.send(nemMsg{Op: "wrong", Text: fmt.Sprintf(format, args...)})
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

// op counts one call and its outcome. The name of a call on a shared
// Lock ends in "-shared", on a permit in "-permit" (opName). A call that
// failed with ErrInvalidArgument is wrong: every call the workload makes
// is valid.
func (rec *nemRecorder) op(name string, err error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "call", Name: name, Text: outcome(err)})
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

// nemOpKinds are the kinds of operation of the summary line, in its
// order, and the calls (names without their outcome) each counts. An
// operation is an acquire, an Extend, a KeepAlive or a Do; the Releases
// that end the holds are not counted.
var nemOpKinds = []struct {
	name  string
	calls []string
}{
	{"acquire", []string{"acquire", "try-acquire", "acquire-waiter", "campaign"}}, // exclusive, of one key; a campaign is one
	{"all", []string{"acquire-all", "try-acquire-all"}},
	{"shared", []string{"acquire-shared", "try-acquire-shared", "acquire-shared-waiter"}},
	{"permits", []string{"acquire-permit", "try-acquire-permit"}},
	{"extend", []string{"extend", "extend-shared", "extend-permit"}},
	{"keepalive", []string{"keep-alive", "keep-alive-shared", "keep-alive-permit"}},
	{"do", []string{"do", "do-all", "do-shared", "do-permit"}},
}

// opCounts returns how many operations of each of nemOpKinds were made,
// whatever their outcome, and their sum.
func (rec *nemRecorder) opCounts() (map[string]int, int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	kind := make(map[string]string)
	for _, k := range nemOpKinds {
		for _, c := range k.calls {
			kind[c] = k.name
		}
	}
	out := make(map[string]int)
	all := 0
	for name, n := range rec.results {
		call, _, _ := strings.Cut(name, ": ")
		if k, ok := kind[call]; ok {
			out[k] += n
			all += n
		}
	}
	return out, all
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
func (rec *nemRecorder) acquired(l *redlock.Lock, worker, owner string, fenced, shared bool, permits int, ttl time.Duration, s history.Span) *history.Lock {
	at := nemNow()
	u := stamp(l.Until())
	slot, isPermit := l.Permit()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl := rec.locks[l]
	if nl == nil {
		rec.ids++
		nl = &history.Lock{ID: rec.newID(), Client: worker, Proc: rec.proc, Key: l.Key(), Owner: owner, Shared: shared,
			Permits: permits, Slot: slot, Fenced: fenced, Fence: l.Fence(), Token: l.Token(), Metadata: l.Metadata()}
		if keys := l.Keys(); len(keys) > 1 {
			nl.Keys = keys // a hold of each: the checker's windows are on every one
		}
		if l.Shared() != shared {
			rec.wrong("lock #%d of %s: Shared() %v, asked %v", nl.ID, worker, l.Shared(), shared)
		}
		rec.checkPermit(fmt.Sprintf("lock #%d of %s", nl.ID, worker), permits, slot, isPermit)
		rec.locks[l] = nl
		cp := *nl
		rec.send(nemMsg{Op: "lock", Lock: &cp})
	}
	rec.send(nemMsg{Op: "acquire", ID: nl.ID, Span: s, Proof: history.Proof{From: at, Until: u}, TTL: ttl})
	return rec.byID[nl.ID]
}

// newID numbers a new Lock of this process, with rec.mu held: the
// process's number in the millions, so that no two processes' collide.
func (rec *nemRecorder) newID() int {
	n, _ := strconv.Atoi(strings.TrimPrefix(rec.proc, "p"))
	return (n+1)*10_000_000 + rec.ids
}

// checkPermit notes as wrong a Permit() of what (a Lock, a Do) that is
// not what was asked for: ok with a slot below n for a permit of n
// (permits > 0), not ok for any other Lock. With rec.mu held.
func (rec *nemRecorder) checkPermit(what string, permits, slot int, ok bool) {
	if ok != (permits > 0) || ok && (slot < 0 || slot >= permits) {
		rec.wrong("%s: Permit() %d, %v, asked Permits(%d)", what, slot, ok, permits)
	}
}

// prove records the validity l claims now. Until is read after the
// moment: an Extend that ended in between only ever lowered it, or raised
// it from a start before the moment, when the old claim still stood. A
// permit must still hold the slot it was judged in.
func (rec *nemRecorder) prove(nl *history.Lock, l *redlock.Lock) {
	at := nemNow()
	u := stamp(l.Until())
	slot, _ := l.Permit()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "proof", ID: nl.ID, Proof: history.Proof{From: at, Until: u}})
	if nl.Permits > 0 && slot != nl.Slot {
		rec.wrong("lock #%d of %s: Permit() moved from slot %d to %d", nl.ID, nl.Client, nl.Slot, slot)
	}
}

// capAt records an Extend of nl for ttl starting at start: from then on the
// lock is valid at most until the TTL less the drift (the default) from
// there, whatever the Extend's outcome.
func (rec *nemRecorder) capAt(nl *history.Lock, start time.Time, ttl time.Duration) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "cap", ID: nl.ID, Proof: history.Proof{From: start, Until: start.Add(ttl - ttl/100 - 2*time.Millisecond)}, TTL: ttl})
}

// releasing records the start of a Release of nl, before it is called.
func (rec *nemRecorder) releasing(nl *history.Lock) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "releasing", ID: nl.ID, At: nemNow()})
	return len(rec.byID[nl.ID].Releases) - 1
}

// releasedWithin records a Release of nl made within s, by a call of
// another name: a Proclaim releases the Lock it replaced.
func (rec *nemRecorder) releasedWithin(nl *history.Lock, s history.Span) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "releasing", ID: nl.ID, At: s.Start})
	rec.send(nemMsg{Op: "released", ID: nl.ID, N: len(rec.byID[nl.ID].Releases) - 1, At: s.End, OK: true})
}

func (rec *nemRecorder) released(nl *history.Lock, i int, err error) {
	end := nemNow()
	rec.mu.Lock()
	rec.send(nemMsg{Op: "released", ID: nl.ID, N: i, At: end, OK: err == nil})
	rec.mu.Unlock()
	rec.op(opName("release", nl), err)
}

// look records one look at a KeepAlive context of l and reports whether it
// was live.
func (rec *nemRecorder) look(nl *history.Lock, l *redlock.Lock, kctx context.Context) bool {
	before := stamp(l.Until())
	at := nemNow()
	live := kctx.Err() == nil
	after := stamp(l.Until())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "lease", Lease: &history.LeaseObs{LockID: nl.ID, Key: nl.Key, At: at, Live: live, Before: before, After: after}})
	return live
}

// observed records an observer's report.
func (rec *nemRecorder) observed(o history.Observation) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "observed", Obs: &o})
}

// elected marks nl a leadership (history.Lock.Election).
func (rec *nemRecorder) elected(nl *history.Lock) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.send(nemMsg{Op: "elected", ID: nl.ID})
}

// do records a Do call whose function ran. gotShared is what its Lock's
// Shared() said, gotPermit whether its Permit() said ok (its slot is in
// d.Slot).
func (rec *nemRecorder) do(d *history.Lock, gotShared, gotPermit bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.ids++
	d.ID, d.Proc = rec.newID(), rec.proc
	rec.send(nemMsg{Op: "do", Lock: d})
	if gotShared != d.Shared {
		rec.wrong("Do #%d of %s: Shared() %v, asked %v", d.ID, d.Client, gotShared, d.Shared)
	}
	rec.checkPermit(fmt.Sprintf("Do #%d of %s", d.ID, d.Client), d.Permits, d.Slot, gotPermit)
}

// holding reports whether a Lock of process proc that writes to the
// fenced store holds now, as far as its records say: acquired, not
// released, its validity not ended.
func (rec *nemRecorder) holding(proc string) bool {
	now := nemNow()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := len(rec.all) - 1; i >= 0; i-- {
		l := rec.all[i]
		if l.Proc == proc && l.Fenced && !l.Shared && l.Permits == 0 && !l.Do && len(l.Releases) == 0 &&
			len(l.Proofs) > 0 && l.Proofs[len(l.Proofs)-1].Until.After(now) {
			return true
		}
	}
	return false
}

// wrongs returns what the library got wrong that the checker does not
// judge.
func (rec *nemRecorder) wrongList() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.wrongs)
}

// record returns a copy of the history for the checker, of the Locks whose
// first Acquire returned before horizon (zero: all of them): records of
// different processes arrive each at its own pace, and a Lock's Release
// may not have arrived yet when a later Lock's Acquire has, but it has
// long before the horizon (a permits control stopped at a finding of a
// record a second old that the whole record did not hold, under -race on
// loaded cores).
func (rec *nemRecorder) record(horizon time.Time) *history.Record {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := &history.Record{Leases: slices.Clone(rec.leases)}
	for _, o := range rec.observations {
		if horizon.IsZero() || o.Span.End.Before(horizon) {
			r.Observations = append(r.Observations, o)
		}
	}
	// A call still running at the horizon: a reader's is not judged yet,
	// a writer's waits until then.
	for _, id := range rec.waitIDs {
		w := *rec.waits[id]
		if !horizon.IsZero() && (!w.Start.Before(horizon) || w.Shared && (w.End.IsZero() || w.End.After(horizon))) {
			continue
		}
		if !horizon.IsZero() && (w.End.IsZero() || w.End.After(horizon)) {
			w.End = horizon
		}
		r.Waits = append(r.Waits, w)
	}
	for _, l := range rec.all {
		if len(l.Acquires) == 0 || !horizon.IsZero() && !l.Acquires[0].End.Before(horizon) {
			continue
		}
		cp := *l
		cp.Acquires, cp.Releases, cp.Proofs, cp.Caps = slices.Clone(l.Acquires), slices.Clone(l.Releases), slices.Clone(l.Proofs), slices.Clone(l.Caps)
		cp.Keys = slices.Clone(l.Keys)
		// A Release still in progress started all the same.
		r.Locks = append(r.Locks, &cp)
	}
	return r
}

// write writes to the fenced store on behalf of nl, an exclusive Lock of
// a fenced Client (whatever its fence), to each of its keys: the store
// refuses a fence lower than the highest it accepted for the key. A shared
// Lock or a permit, which has no fence, writes nothing.
func (wl *nemWorkload) write(nl *history.Lock) {
	if !nl.Fenced || nl.Shared || nl.Permits > 0 {
		return
	}
	for _, key := range nl.AllKeys() {
		wl.store.write(key, nl.Fence, nl.ID)
	}
}

// worker runs operations until stop. Its choices come from the seed, each
// round's from a source of its own, so that a replay makes the same choices
// in the same round whatever the outcomes before it; their timing varies.
//
// w numbers the worker in the run, i in its process.
func (wl *nemWorkload) worker(i, w int, stop <-chan struct{}) {
	slot := wl.slots[nemSlotOf(i)]
	name := fmt.Sprintf("w%d@%s", w, slot.name)
	for round := uint64(0); ; round++ {
		select {
		case <-stop:
			return
		default:
		}
		r := rand.New(rand.NewPCG(wl.seed, uint64(w)<<40|round))
		c := slot.c.Load()
		key := wl.keys[r.IntN(len(wl.keys))]
		ttl := logDur(r, nemMinTTL, nemMaxTTL)
		if wl.cfg.LongHolds {
			ttl = logDur(r, nemMaxTTL/2, nemMaxTTL)
		}
		p := r.IntN(100)
		stalled := p >= 35 && p < 45
		if wl.permits && (wl.permitsOnly || !stalled && r.IntN(4) == 0) {
			// A permit of a semaphore key, through the same Client: a
			// quarter of the rounds but the stalled holder's, which stay
			// as many as without permits, as their stale fenced writes
			// are rare. Not more: the lock keys' rarest activity
			// (readers together) must still show in a 20 s run.
			sem := wl.sems[r.IntN(len(wl.sems))]
			switch p := r.IntN(100); {
			case p < 20:
				wl.doRun(r, c, name, sem.Key, ttl, sem.N)
			case p < 45:
				wl.keepAliveRun(r, slot, c, name, sem.Key, ttl, sem.N)
			default:
				wl.plainRun(r, slot, c, name, sem.Key, ttl, sem.N)
			}
			sleepUpTo(r, 20*time.Millisecond)
			continue
		}
		// Seldom: a burst on the pool's first key, taken and released
		// over and over with no work between, from every worker that
		// draws it: a hot key, where many Locks' deletes meet between a
		// write's sending and its landing (docs/late-writes.md: nothing
		// a node keeps per key may be pushed out by them).
		if r.IntN(20) == 0 {
			wl.hotRun(r, slot, c, name)
			sleepUpTo(r, 20*time.Millisecond)
			continue
		}
		// Seldom: a waiter round takes seconds of its worker's time,
		// which the other keys would miss (a killed holder's key must be
		// taken again within seconds, the lockout rule).
		if wl.shared && wl.cfg.WaitKey != "" && r.IntN(24) == 0 {
			wl.waiterRun(r, slot, c, name)
			sleepUpTo(r, 20*time.Millisecond)
			continue
		}
		switch {
		case p < 15:
			wl.doRun(r, c, name, key, ttl, 0)
		case p < 35:
			wl.keepAliveRun(r, slot, c, name, key, ttl, 0)
		case stalled:
			wl.pausedRun(r, name, key, ttl)
		case p >= 90:
			wl.electRun(r, c, name, wl.electionKey(r), ttl)
		case p >= 80:
			wl.observeRun(r, c, wl.electionKey(r), ttl)
		default:
			wl.plainRun(r, slot, c, name, key, ttl, 0)
		}
		sleepUpTo(r, 20*time.Millisecond)
	}
}

// hotRun takes the pool's first key (wl.hotKey) 10 to 30 times in a row,
// each time releasing it at once: a TryAcquire a third of the time, an
// Acquire with a deadline of 200 ms otherwise, with a TTL of 2 s.
func (wl *nemWorkload) hotRun(r *rand.Rand, slot *nemSlot, c *redlock.Client, name string) {
	for range 10 + r.IntN(21) {
		l, nl := wl.acquire(r, slot, c, name, wl.hotKey(), 2*time.Second, false, false, 0)
		if l == nil {
			continue
		}
		wl.write(nl)
		wl.release(l, nl)
	}
}

// hotKey is the key hotRun takes: the pool's first.
func (wl *nemWorkload) hotKey() string { return wl.keys[0] }

// logDur is uniform on a log scale: as many TTLs near 50 ms as near 2 s, so
// that short holds (many handovers) and long ones (renewals, faults within
// one hold) both come often.
func logDur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return time.Duration(float64(lo) * math.Pow(float64(hi)/float64(lo), r.Float64()))
}

func sleepUpTo(r *rand.Rand, d time.Duration) { time.Sleep(randDur(r, 0, d)) }

// readerKey returns the key of a shared Lock: one of the pool's first
// three, so that readers meet each other (and writers) as often on a
// pool of many keys as on a small one.
func (wl *nemWorkload) readerKey(r *rand.Rand) string {
	return wl.keys[r.IntN(min(3, len(wl.keys)))]
}

// nemMultiKeys returns key and one or two other keys of the pool, in a
// random order (AcquireAll sorts them): a set of two or three that overlaps
// the other sets and the single keys, as the pool is small.
func (wl *nemWorkload) nemMultiKeys(r *rand.Rand, key string) []string {
	others := slices.DeleteFunc(slices.Clone(wl.keys), func(k string) bool { return k == key })
	r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	keys := append([]string{key}, others[:min(len(others), 1+r.IntN(2))]...)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// acquire makes an Acquire or a TryAcquire with a random deadline (some end
// mid-round): with permits, one of the n permits of key, a semaphore key
// (one key, no owner); otherwise, with shareable, a third of the time
// (wl.shared) of key shared, which has one key and no owner; otherwise,
// with multi, a quarter of the time an AcquireAll or TryAcquireAll of key
// and one or two other keys of the pool, otherwise of key alone under an
// owner of a small pool a third of the time, so that re-entry and takeover
// from another Client happen (an owner's Lock has one key). Readers and
// writers of one key, single or several, thus contend, and permits of one
// semaphore key.
func (wl *nemWorkload) acquire(r *rand.Rand, slot *nemSlot, c *redlock.Client, name, key string, ttl time.Duration, multi, shareable bool, permits int) (*redlock.Lock, *history.Lock) {
	var opts []redlock.AcquireOption
	if permits > 0 {
		opts = append(opts, redlock.Permits(permits))
		multi, shareable = false, false
	}
	shared := shareable && wl.shared && r.IntN(wl.cfg.SharedEvery) == 0
	if shared {
		opts = append(opts, redlock.Shared())
		key = wl.readerKey(r)
	}
	var keys []string
	if !shared && multi && r.IntN(4) == 0 {
		keys = wl.nemMultiKeys(r, key)
	}
	owner := ""
	if permits == 0 && !shared && keys == nil && r.IntN(3) == 0 && wl.owners {
		owner = fmt.Sprintf("req-%d", r.IntN(3))
		opts = append(opts, redlock.WithOwner(owner))
	}
	md := ""
	if r.IntN(2) == 0 { // holder metadata, which the values carry (history.checkMetadata)
		md = name
		opts = append(opts, redlock.WithMetadata(md))
	}
	try := r.IntN(3) == 0
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, 2*time.Second))
	defer cancel()
	wid := -1
	if permits == 0 && !(shared && try) {
		wid = wl.rec.waiting(orKey(keys, key), shared, ttl)
	}
	start := nemNow()
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
	end := nemNow()
	if wid >= 0 {
		wl.rec.waited(wid, err == nil)
	}
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
	wl.rec.op(op, err)
	if err != nil {
		wl.rec.event(end, evKeys, "%s %s(%s, ttl %v) from %s: %v", name, op, what, ttl, start.Format("15:04:05.000000"), err)
		return nil, nil
	}
	nl := wl.rec.acquired(l, name, owner, slot.fenced, shared, permits, ttl, history.Span{Start: start, End: end})
	if l.Metadata() != md && owner == "" {
		wl.rec.mu.Lock()
		wl.rec.wrong("lock #%d of %s: Metadata() %q, stored %q", nl.ID, name, l.Metadata(), md)
		wl.rec.mu.Unlock()
	}
	held := fmt.Sprintf("fence %d", l.Fence())
	if permits > 0 {
		held = fmt.Sprintf("slot %d", nl.Slot)
	}
	wl.rec.event(end, nl.AllKeys(), "%s %s(%s, ttl %v) from %s: lock #%d (token %s, %s, until %s)", name, op, what, ttl,
		start.Format("15:04:05.000000"), nl.ID, l.Token(), held, stamp(l.Until()).Format("15:04:05.000000"))
	return l, nl
}

// plainRun holds a lock, exclusive or shared, or a permit of key (with
// permits, its n), for a random time (sometimes past its TTL), writes to
// the fenced store while it believes it holds the lock (and sometimes
// after) if it is exclusive, may extend it, and releases it: once, twice,
// twice at once, or racing an Extend.
func (wl *nemWorkload) plainRun(r *rand.Rand, slot *nemSlot, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	l, nl := wl.acquire(r, slot, c, name, key, ttl, true, true, permits)
	if l == nil {
		return
	}
	// Short holds, for many handovers, and one in three long, past the
	// TTL at times, for renewals and for a worker process stopped while
	// it holds.
	work := logDur(r, 5*time.Millisecond, ttl/2)
	if r.IntN(3) == 0 {
		work = randDur(r, 0, ttl*3/2)
	}
	if wl.cfg.LongHolds {
		work = randDur(r, ttl/2, ttl*3/2)
	}
	extendAt := time.Duration(-1)
	if r.IntN(2) == 0 {
		extendAt = randDur(r, 0, work+1)
	}
	stale := r.IntN(4) == 0 // writes after Until too: the store must refuse them when superseded
	if time.Now().Before(l.Until()) {
		wl.write(nl) // a holder's first write, which supersedes its predecessors'
	}
	start := time.Now()
	for last := false; !last; {
		step := randDur(r, 5*time.Millisecond, 50*time.Millisecond)
		if rest := work - time.Since(start); step >= rest {
			step, last = max(rest, 0), true
		}
		// The write's work comes between the look at the validity and
		// the write, and the hold ends with a write: a process stopped
		// while it holds writes late, as a holder paused by its garbage
		// collector does, and the store must refuse the write once a
		// newer holder has written.
		valid := time.Now().Before(l.Until())
		time.Sleep(step)
		if extendAt >= 0 && time.Since(start) >= extendAt {
			extendAt = -1
			wl.extend(r, l, nl)
		}
		if stale || valid {
			wl.write(nl)
		}
	}
	switch r.IntN(10) {
	case 0: // twice
		wl.release(l, nl)
		wl.release(l, nl)
	case 1: // twice at once
		var wg sync.WaitGroup
		wg.Go(func() { wl.release(l, nl) })
		wg.Go(func() { wl.release(l, nl) })
		wg.Wait()
	case 2: // racing an Extend
		var wg sync.WaitGroup
		er := rand.New(rand.NewPCG(r.Uint64(), 0))
		wg.Go(func() { wl.extend(er, l, nl) })
		wg.Go(func() { wl.release(l, nl) })
		wg.Wait()
	default:
		wl.release(l, nl)
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
func (wl *nemWorkload) pausedRun(r *rand.Rand, name, key string, ttl time.Duration) {
	slot := wl.slots[0]
	c := slot.c.Load()
	worker, _, _ := strings.Cut(name, "@")
	name = worker + "@" + slot.name
	a, na := wl.acquire(r, slot, c, name, key, ttl, true, false, 0)
	if a == nil {
		return
	}
	if time.Now().Before(a.Until()) {
		wl.write(na)
	}
	time.Sleep(time.Until(a.Until()) + randDur(r, 0, ttl/2))
	if b, nb := wl.acquire(r, slot, c, name, key, logDur(r, nemMinTTL, nemMaxTTL), false, false, 0); b != nil {
		wl.write(nb)
		wl.write(na)
		wl.release(b, nb)
	}
	wl.release(a, na)
}

// orKey returns keys, or key alone when keys is nil.
func orKey(keys []string, key string) []string {
	if keys != nil {
		return keys
	}
	return []string{key}
}

// waiterRun contends for the waiters' key (nemWorkerConfig.WaitKey), which
// no other round uses, with long deadlines: a reader holds it for a while,
// or waits for it; a writer waits for it behind the readers, holds it
// briefly and releases it. The nemesis stops and kills the processes
// whose writers wait (nemRun.nemesis), and the starved rule judges how long
// their announcements hold the readers back once they stopped.
func (wl *nemWorkload) waiterRun(r *rand.Rand, slot *nemSlot, c *redlock.Client, name string) {
	key := wl.cfg.WaitKey
	// Readers two times in three: a writer waits for them now and then,
	// and mostly no live writer waits, so that a stopped one's
	// announcement is what would keep the readers out. Writers come often
	// enough that one takes the key within seconds of a killed reader's
	// share expiring (the lockout rule).
	shared := r.IntN(3) != 0
	ttl := logDur(r, 200*time.Millisecond, nemMaxTTL)
	hold := randDur(r, 5*time.Millisecond, 30*time.Millisecond)
	var opts []redlock.AcquireOption
	if shared {
		ttl, hold = nemMaxTTL, randDur(r, 300*time.Millisecond, 1200*time.Millisecond)
		opts = append(opts, redlock.Shared())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	wid := wl.rec.waiting([]string{key}, shared, ttl)
	start := nemNow()
	l, err := c.Acquire(ctx, key, ttl, opts...)
	end := nemNow()
	wl.rec.waited(wid, err == nil)
	op := "acquire-waiter"
	if shared {
		op = "acquire-shared-waiter"
	}
	wl.rec.op(op, err)
	if err != nil {
		wl.rec.event(end, []string{key}, "%s waiter %s(ttl %v) from %s: %v", name, op, ttl, start.Format("15:04:05.000000"), err)
		return
	}
	nl := wl.rec.acquired(l, name, "", slot.fenced, shared, 0, ttl, history.Span{Start: start, End: end})
	wl.rec.event(end, []string{key}, "%s waiter %s(ttl %v) from %s: lock #%d (token %s, until %s)", name, op, ttl,
		start.Format("15:04:05.000000"), nl.ID, l.Token(), stamp(l.Until()).Format("15:04:05.000000"))
	time.Sleep(min(hold, time.Until(l.Until())))
	wl.release(l, nl)
}

func (wl *nemWorkload) extend(r *rand.Rand, l *redlock.Lock, nl *history.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, time.Second))
	defer cancel()
	ttl := logDur(r, nemMinTTL, nemMaxTTL)
	start := nemNow()
	wl.rec.capAt(nl, start, ttl)
	err := l.Extend(ctx, ttl)
	wl.rec.op(opName("extend", nl), err)
	wl.rec.event(nemNow(), nl.AllKeys(), "extend of lock #%d from %s: %v (until %s)", nl.ID, start.Format("15:04:05.000000"), err,
		stamp(l.Until()).Format("15:04:05.000000"))
	if err == nil {
		wl.rec.prove(nl, l)
	}
}

func (wl *nemWorkload) release(l *redlock.Lock, nl *history.Lock) {
	i := wl.rec.releasing(nl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := nemNow()
	err := l.Release(ctx)
	wl.rec.released(nl, i, err)
	wl.rec.event(nemNow(), nl.AllKeys(), "release of lock #%d from %s: %v", nl.ID, start.Format("15:04:05.000000"), err)
}

// keepAliveRun holds a lock, exclusive or shared, or a permit of key
// (with permits, its n), under KeepAlive for up to three TTLs, looking at
// the context and Until every few milliseconds and, if it is exclusive,
// writing to the fenced store while the context is live.
func (wl *nemWorkload) keepAliveRun(r *rand.Rand, slot *nemSlot, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	l, nl := wl.acquire(r, slot, c, name, key, ttl, true, true, permits)
	if l == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	kctx := l.KeepAlive(ctx)
	wl.rec.op(opName("keep-alive", nl), nil)
	work := logDur(r, 5*time.Millisecond, 3*ttl)
	start := time.Now()
	for time.Since(start) < work {
		if !wl.rec.look(nl, l, kctx) {
			break
		}
		wl.rec.prove(nl, l)
		time.Sleep(randDur(r, 2*time.Millisecond, 30*time.Millisecond)) // the write's work, as in plainRun
		wl.write(nl)
	}
	cancel()
	wl.rec.event(nemNow(), nl.AllKeys(), "keep-alive of lock #%d ends: %v", nl.ID, context.Cause(kctx))
	wl.release(l, nl)
}

// electRun campaigns for key's leadership with a random deadline (some
// end the campaign mid-round), then leads as keepAliveRun holds: it looks
// at the leadership's context and writes to the fenced store with its term
// while the context is live, for up to three TTLs, and resigns. Leaderships
// are fenced whatever the Client's fencing, and compete with every other
// Lock of the key: the exclusion, fencing and lease rules judge them as
// Locks, and the terms rule their terms' order.
func (wl *nemWorkload) electRun(r *rand.Rand, c *redlock.Client, name, key string, ttl time.Duration) {
	el, err := c.Election(key, ttl)
	if err != nil {
		wl.rec.mu.Lock()
		wl.rec.wrong("Election(%q, %v) of %s: %v", key, ttl, name, err)
		wl.rec.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, 2*time.Second))
	defer cancel()
	wid := wl.rec.waiting([]string{key}, false, ttl)
	start := nemNow()
	ld, err := el.Campaign(ctx, name)
	end := nemNow()
	if err != nil {
		wl.rec.waited(wid, false)
		wl.rec.op("campaign", err)
		wl.rec.event(end, []string{key}, "%s campaign(ttl %v) from %s: %v", name, ttl, start.Format("15:04:05.000000"), err)
		return
	}
	// Recorded before the campaign's wait ends: a process killed between
	// them leaves the wait open, which excuses an observer's report of
	// its term (history.checkObserved).
	// Its Locks share an owner (a Proclaim takes the key over from the
	// one before), whose token stands for the owner's id.
	l := redlock.LeadershipLock(ld)
	owner := l.Token()
	nl := wl.rec.acquired(l, name, owner, true, false, 0, ttl, history.Span{Start: start, End: end})
	wl.rec.elected(nl)
	wl.rec.waited(wid, true)
	wl.rec.op("campaign", nil)
	if ld.Term() != l.Fence() || ld.Value() != name {
		wl.rec.mu.Lock()
		wl.rec.wrong("leadership #%d of %s: Term() %d (fence %d), Value() %q", nl.ID, name, ld.Term(), l.Fence(), ld.Value())
		wl.rec.mu.Unlock()
	}
	wl.rec.event(end, []string{key}, "%s campaign(ttl %v) from %s: lock #%d (token %s, term %d, until %s)", name, ttl,
		start.Format("15:04:05.000000"), nl.ID, l.Token(), ld.Term(), stamp(ld.Until()).Format("15:04:05.000000"))
	work := logDur(r, 5*time.Millisecond, 3*ttl)
	proclaimAt := time.Duration(-1)
	if r.IntN(3) == 0 {
		proclaimAt = randDur(r, 0, work+1)
	}
	began := time.Now()
	for time.Since(began) < work {
		if !wl.rec.look(nl, l, ld.Context()) {
			break
		}
		wl.rec.prove(nl, l)
		time.Sleep(randDur(r, 2*time.Millisecond, 30*time.Millisecond)) // the write's work, as in plainRun
		wl.write(nl)
		if proclaimAt >= 0 && time.Since(began) >= proclaimAt {
			proclaimAt = -1
			if l2, nl2 := wl.proclaim(r, ld, nl, name, owner, key, ttl); l2 != nil {
				l, nl = l2, nl2
				wl.write(nl)
			}
		}
	}
	wl.rec.event(nemNow(), []string{key}, "leadership #%d ends: %v", nl.ID, context.Cause(ld.Context()))
	i := wl.rec.releasing(nl)
	rstart := nemNow()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = ld.Resign(ctx)
	wl.rec.released(nl, i, err)
	wl.rec.event(nemNow(), []string{key}, "resign of lock #%d from %s: %v", nl.ID, rstart.Format("15:04:05.000000"), err)
}

// proclaim proclaims a new value for leadership ld, whose Lock is the
// owner's: on success its new Lock, of a new term, took the key over from
// the last, and is recorded as a new leadership of the owner (the checker
// ends the last one's windows where the takeover began), and the replaced
// one as released within the call.
func (wl *nemWorkload) proclaim(r *rand.Rand, ld *redlock.Leadership, replaced *history.Lock, name, owner, key string, ttl time.Duration) (*redlock.Lock, *history.Lock) {
	value := name + "'"
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, time.Second))
	defer cancel()
	wid := wl.rec.waiting([]string{key}, false, ttl)
	start := nemNow()
	err := ld.Proclaim(ctx, value)
	end := nemNow()
	if err != nil {
		wl.rec.waited(wid, false)
		wl.rec.op("proclaim", err)
		wl.rec.event(end, []string{key}, "%s proclaim from %s: %v", name, start.Format("15:04:05.000000"), err)
		return nil, nil
	}
	l := redlock.LeadershipLock(ld)
	nl := wl.rec.acquired(l, name, owner, true, false, 0, ttl, history.Span{Start: start, End: end})
	wl.rec.elected(nl)
	wl.rec.releasedWithin(replaced, history.Span{Start: start, End: end})
	wl.rec.waited(wid, true)
	wl.rec.op("proclaim", nil)
	if ld.Value() != value || l.Metadata() != value || ld.Term() != l.Fence() {
		wl.rec.mu.Lock()
		wl.rec.wrong("leadership #%d of %s after Proclaim: Value() %q, Term() %d, fence %d", nl.ID, name, ld.Value(), ld.Term(), l.Fence())
		wl.rec.mu.Unlock()
	}
	wl.rec.event(end, []string{key}, "%s proclaim from %s: lock #%d (token %s, term %d)", name, start.Format("15:04:05.000000"), nl.ID, l.Token(), ld.Term())
	return l, nl
}

// electionKey is one of the pool's first two keys: campaigns meet, and
// observers find leaders, as often on a pool of many keys as on a small
// one. Other Locks take them too.
func (wl *nemWorkload) electionKey(r *rand.Rand) string { return wl.keys[r.IntN(min(2, len(wl.keys)))] }

// observeRun observes key's leaders: one Election.Leader, then Observe's
// reports for the rest of a random deadline. Each report is recorded with
// the window in which its read was made: Leader's call, or for Observe
// from its start or its previous report (it reads after each send) to
// this one's arrival (history.checkObserved).
func (wl *nemWorkload) observeRun(r *rand.Rand, c *redlock.Client, key string, ttl time.Duration) {
	el, err := c.Election(key, ttl)
	if err != nil {
		wl.rec.mu.Lock()
		wl.rec.wrong("Election(%q, %v): %v", key, ttl, err)
		wl.rec.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 50*time.Millisecond, 2*time.Second))
	defer cancel()
	start := nemNow()
	ld, err := el.Leader(ctx)
	end := nemNow()
	wl.rec.op("leader", err)
	switch {
	case err == nil:
		wl.rec.observed(history.Observation{Key: key, Span: history.Span{Start: start, End: end}, Term: ld.Term, Value: ld.Value})
	case errors.Is(err, redlock.ErrNoLeader):
		wl.rec.observed(history.Observation{Key: key, Span: history.Span{Start: start, End: end}, None: true})
	}
	from := nemNow()
	for ld := range el.Observe(ctx) {
		now := nemNow()
		wl.rec.observed(history.Observation{Key: key, Span: history.Span{Start: from, End: now}, Term: ld.Term, Value: ld.Value})
		from = now
	}
}

// doRun runs Do (with permits, on one of the n permits of key; otherwise
// a third of the time shared, with wl.shared; otherwise a quarter of the
// time DoAll over key and one or two other keys) with work that sometimes
// outlives the TTL and a deadline that sometimes ends the work; the
// function notes when its context was last seen live.
func (wl *nemWorkload) doRun(r *rand.Rand, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	shared := permits == 0 && wl.shared && r.IntN(wl.cfg.SharedEvery) == 0
	if shared {
		key = wl.readerKey(r)
	}
	var keys []string
	if permits == 0 && !shared && r.IntN(4) == 0 {
		keys = wl.nemMultiKeys(r, key)
	}
	work := logDur(r, 2*time.Millisecond, 2*ttl)
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
	wid := -1
	if permits == 0 {
		wid = wl.rec.waiting(orKey(keys, key), shared, ttl)
	}
	start := nemNow()
	fn := func(kctx context.Context, l *redlock.Lock) error {
		if wid >= 0 {
			wl.rec.waited(wid, true) // the Do's acquire returned
			wid = -1
		}
		if ks := l.Keys(); len(ks) > 1 {
			d.Key, d.Keys = l.Key(), ks
		}
		gotShared = l.Shared()
		d.Slot, gotPermit = l.Permit()
		d.FnStart = nemNow()
		live := d.FnStart
		for _, s := range steps {
			at := nemNow()
			if kctx.Err() != nil {
				break
			}
			live = at
			time.Sleep(s)
		}
		d.FnEnd = nemNow()
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
	end := nemNow()
	wl.rec.op(op, err)
	if wid >= 0 {
		wl.rec.waited(wid, false)
	}
	if d.FnStart.IsZero() {
		return
	}
	d.Acquires = []history.Span{{Start: start, End: d.FnStart}}
	d.Releases = []history.Span{{Start: d.FnEnd, End: end}}
	d.DoNil = err == nil
	wl.rec.do(d, gotShared, gotPermit)
	held := ""
	if permits > 0 {
		held = fmt.Sprintf(" (slot %d of %d)", d.Slot, permits)
	}
	wl.rec.event(end, d.AllKeys(), "%s %s(keys %v, ttl %v) from %s: lock #%d%s, fn %s..%s, live until %s: %v", name, op, d.AllKeys(), ttl, start.Format("15:04:05.000000"),
		d.ID, held, d.FnStart.Format("15:04:05.000000"), d.FnEnd.Format("15:04:05.000000"), d.Proofs[0].Until.Format("15:04:05.000000"), err)
}
