package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
)

// Recorder records what the workload did and saw, in the shape
// internal/history judges: the Locks with their calls and claims, the
// looks at KeepAlive contexts, the fenced store's decisions (Store), and
// what the residue rule needs: each Lock's token and when it ended, and
// the acquire calls under way per key. All times are the bubble's.
type Recorder struct {
	mu     sync.Mutex
	trace  *Trace
	ids    int
	locks  map[*redlock.Lock]*history.Lock
	all    []*history.Lock
	leases []history.LeaseObs
	// observations are the observers' reports (Election.Leader, Observe).
	observations []history.Observation
	results      map[string]int // "call: outcome" counts
	writers      map[string][]*history.Writer
	byLock       map[int]*history.Writer
	// holds counts per Lock ID the acquires (an owner's re-entries
	// included) that no Release has ended yet: the Lock ends with the
	// last.
	holds map[int]int
	// acquiring counts the acquire calls under way per key; lastAcquire
	// is when the latest one ended.
	acquiring   map[string]int
	lastAcquire map[string]time.Time
	wrongs      []string
	last        time.Time   // the latest instant Now returned
	procs       map[int]int // per Lock ID, the process of the Client that took it
	procOf      func(*redlock.Client) int
	// sends is, per token, when a client last wrote a command that
	// carries it (sent): no round of its Locks began later.
	sends map[string]time.Time
	// latency are the calls refused as too short for the nodes' latency.
	latency []history.LatencyRefusal
}

// Now is the bubble's time, made unique: a nanosecond after the last
// instant it returned when the bubble's clock has not moved since. Time
// stands still in the bubble while goroutines run, so that an Acquire's
// return and the Release its caller starts next would be one instant, and
// the checker (which, at one instant, counts a release before an acquire)
// would read a hold that never ends. Unique instants keep the order in
// which they were read, which is the order of the calls.
func (rec *Recorder) Now() time.Time {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.nowLocked()
}

func (rec *Recorder) nowLocked() time.Time {
	t := time.Now()
	if !t.After(rec.last) {
		t = rec.last.Add(time.Nanosecond)
	}
	rec.last = t
	return t
}

// NewRecorder returns an empty recorder that adds the calls to trace.
func NewRecorder(trace *Trace) *Recorder {
	return &Recorder{trace: trace, locks: make(map[*redlock.Lock]*history.Lock), results: make(map[string]int),
		writers: make(map[string][]*history.Writer), byLock: make(map[int]*history.Writer), holds: make(map[int]int),
		acquiring: make(map[string]int), lastAcquire: make(map[string]time.Time), procs: make(map[int]int),
		sends: make(map[string]time.Time)}
}

// sent notes the tokens of the Locks whose values or prefixes a command
// written to a node carries (Network.OnWrite), with the time: a round
// reads its start, then writes, so that the last such write before a
// Lock's Until is read is no earlier than the start of the round that set
// it (history.Claim).
func (rec *Recorder) sent(b []byte) {
	now := time.Now()
	var toks []string
	for _, arg := range bytes.Split(b, []byte("\r\n")) {
		if t := argToken(arg); t != "" {
			toks = append(toks, t)
		}
	}
	if len(toks) == 0 {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, t := range toks {
		rec.sends[t] = now
	}
}

// argToken is the token in a command's argument that is a Lock's value or
// prefix (its token, an owner's "~" and id, holder metadata after "m",
// then a dot and a generation), "" for any other argument.
func argToken(arg []byte) string {
	dot := bytes.IndexByte(arg, '.')
	if dot < tokenLen {
		return ""
	}
	tok := arg[:dot]
	if i := bytes.IndexAny(tok, "~m"); i >= 0 {
		tok = tok[:i]
	}
	if len(tok) != tokenLen {
		return ""
	}
	for i, c := range tok {
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7' || i == 0 && c == 'o') {
			return ""
		}
	}
	return string(tok)
}

// tokenLen is the length of a Lock's token, random or an owner's.
const tokenLen = 26

// claim records the validity until that nl claims now, for ttl: bounded
// by the last command its token went out in (sent), read after until.
// With rec.mu held.
func (rec *Recorder) claim(nl *history.Lock, until time.Time) {
	start, ok := rec.sends[nl.Token]
	if !ok || until.IsZero() {
		return
	}
	nl.Claims = append(nl.Claims, history.Claim{Start: start, TTL: slices.Max(nl.TTLs), Until: until})
}

// Drift is the library's default allowance for the nodes' clocks over ttl,
// as its validity arithmetic computes it: the bound of history.Claim.
func Drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst
}

// outcome names err for the counts: the library's sentinel it matches, or
// "other".
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, s := range []error{redlock.ErrClosed, redlock.ErrInvalidArgument, redlock.ErrLockLost, redlock.ErrUnavailable,
		redlock.ErrReleased, redlock.ErrReleaseUnconfirmed, redlock.ErrNotHeld, redlock.ErrNotAcquired} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return "context"
	}
	return "other"
}

// op counts one call and its outcome; a call that failed with
// ErrInvalidArgument is wrong, as every call of the workload is valid.
func (rec *Recorder) op(name string, err error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.results[name+": "+outcome(err)]++
	if errors.Is(err, redlock.ErrInvalidArgument) {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("%s failed with ErrInvalidArgument: %v", name, err))
	}
}

// latencyRefused records a call of Client c, from start to end, that
// failed with err: a refusal of ttl as too short for the nodes' latency,
// which the latency rule judges (history.LatencyRefusal), if err is one.
func (rec *Recorder) latencyRefused(c *redlock.Client, ttl time.Duration, start, end time.Time, err error) {
	if err == nil || !strings.Contains(err.Error(), tooShortForLatency) {
		return
	}
	proc := -1
	if rec.procOf != nil {
		proc = rec.procOf(c)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.latency = append(rec.latency, history.LatencyRefusal{Proc: ProcName(proc), TTL: ttl, Span: history.Span{Start: start, End: end}})
}

// tooShortForLatency is what the library's error for a TTL too short for
// the nodes' latency says (ErrNotAcquired: "ttl ... is too short for the
// nodes' latency: ...").
const tooShortForLatency = "is too short for the nodes' latency"

// wrong notes what the library got wrong that the checker does not judge.
func (rec *Recorder) wrong(format string, args ...any) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.wrongs = append(rec.wrongs, fmt.Sprintf(format, args...))
}

// acquireStart and acquireEnd bracket an acquire call of keys (Acquire,
// TryAcquire, their All forms, Do until its function runs): a value no
// known Lock wrote may be its attempt's until it ends.
func (rec *Recorder) acquireStart(keys []string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, k := range keys {
		rec.acquiring[k]++
	}
}

func (rec *Recorder) acquireEnd(keys []string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	now := rec.nowLocked()
	for _, k := range keys {
		rec.acquiring[k]--
		rec.lastAcquire[k] = now
	}
}

// Acquiring is the end of the latest acquire call of key, or now while one
// is under way.
func (rec *Recorder) Acquiring(key string) time.Time {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.acquiring[key] > 0 {
		return time.Now()
	}
	return rec.lastAcquire[key]
}

// Proc returns the process whose Client took Lock id, or -1.
func (rec *Recorder) Proc(id int) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if p, ok := rec.procs[id]; ok {
		return p
	}
	return -1
}

// setProc notes that Lock id was taken through c.
func (rec *Recorder) setProc(id int, c *redlock.Client) {
	if rec.procOf == nil {
		return
	}
	p := rec.procOf(c)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.procs[id] = p
}

// Writers returns the residue rule's view of the Locks that wrote key.
func (rec *Recorder) Writers(key string) []history.Writer {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make([]history.Writer, 0, len(rec.writers[key]))
	for _, w := range rec.writers[key] {
		out = append(out, *w)
	}
	return out
}

// newLock records a new Lock, with rec.mu held.
func (rec *Recorder) newLock(nl *history.Lock, token string) {
	rec.ids++
	nl.ID = rec.ids
	rec.all = append(rec.all, nl)
	w := &history.Writer{ID: nl.ID, Token: token, Owner: nl.Owner != ""}
	rec.byLock[nl.ID] = w
	for _, k := range nl.AllKeys() {
		rec.writers[k] = append(rec.writers[k], w)
	}
}

// ended records that one hold of Lock id ended at: its Release returned,
// or its values expire by then. The Lock ends with its last hold: an
// owner's Lock re-entered is still held by whoever has not released it,
// and may be renewed until then (the simulator found a Lock of three holds
// judged ended at its second Release, its value residue).
func (rec *Recorder) ended(id int, at time.Time) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.holds[id]--; rec.holds[id] > 0 {
		return
	}
	delete(rec.holds, id)
	if w := rec.byLock[id]; w != nil && (w.Ended.IsZero() || at.After(w.Ended)) {
		w.Ended = at
	}
}

// abandoned records that the Close of process proc's Client gave up a
// delete of key: the values its Locks of key left, whose Release returned
// before, may stay until they expire (docs/lease.md: Close gives up the
// deletes nodes have not confirmed within the cleanup timeout), as those
// of a Lock whose Release ends after its Client closed.
func (rec *Recorder) abandoned(proc int, key string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	at := rec.nowLocked()
	for _, w := range rec.writers[key] {
		if p, ok := rec.procs[w.ID]; ok && p == proc && !w.Ended.IsZero() && !w.Ended.After(at) {
			w.Ended = at.Add(ExpiryBound)
		}
	}
}

// acquired records that an Acquire in s returned l: a new Lock, or one
// more hold of a Lock its owner re-entered. The checker judges l by what
// was asked for (shared, permits); a Lock that says otherwise is wrong.
func (rec *Recorder) acquired(l *redlock.Lock, worker, owner string, fenced, shared bool, permits int, ttl time.Duration, s history.Span) *history.Lock {
	u := l.Until()
	slot, isPermit := l.Permit()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	at := rec.nowLocked()
	nl := rec.locks[l]
	if nl == nil {
		nl = &history.Lock{Client: worker, Key: l.Key(), Owner: owner, Shared: shared,
			Permits: permits, Slot: slot, Fenced: fenced, Fence: l.Fence(), Token: l.Token(), Metadata: l.Metadata()}
		if keys := l.Keys(); len(keys) > 1 {
			nl.Keys = keys
		}
		rec.newLock(nl, l.Token())
		if l.Shared() != shared {
			rec.wrongs = append(rec.wrongs, fmt.Sprintf("lock #%d of %s: Shared() %v, asked %v", nl.ID, worker, l.Shared(), shared))
		}
		if isPermit != (permits > 0) || isPermit && (slot < 0 || slot >= permits) {
			rec.wrongs = append(rec.wrongs, fmt.Sprintf("lock #%d of %s: Permit() %d, %v, asked Permits(%d)", nl.ID, worker, slot, isPermit, permits))
		}
		rec.locks[l] = nl
	} else if w := rec.byLock[nl.ID]; w != nil {
		w.Ended = time.Time{} // an owner's re-entry: held again
	}
	rec.holds[nl.ID]++
	nl.Acquires = append(nl.Acquires, s)
	nl.Proofs = append(nl.Proofs, history.Proof{From: at, Until: u})
	nl.TTLs = append(nl.TTLs, ttl)
	rec.claim(nl, u)
	return nl
}

// observed records an observer's report.
func (rec *Recorder) observed(o history.Observation) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.observations = append(rec.observations, o)
}

// elected marks nl a leadership (history.Lock.Election).
func (rec *Recorder) elected(nl *history.Lock) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Election = true
}

// prove records the validity l claims now; a permit must still hold the
// slot it was judged in.
func (rec *Recorder) prove(nl *history.Lock, l *redlock.Lock) {
	rec.mu.Lock()
	at := rec.nowLocked()
	rec.mu.Unlock()
	u := l.Until()
	slot, _ := l.Permit()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Proofs = append(nl.Proofs, history.Proof{From: at, Until: u})
	rec.claim(nl, u)
	if nl.Permits > 0 && slot != nl.Slot {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("lock #%d of %s: Permit() moved from slot %d to %d", nl.ID, nl.Client, nl.Slot, slot))
	}
}

// capAt records an Extend of nl for ttl from start: from then on the lock
// is valid at most until the TTL less the default drift from there.
func (rec *Recorder) capAt(nl *history.Lock, start time.Time, ttl time.Duration) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Caps = append(nl.Caps, history.Proof{From: start, Until: start.Add(ttl - time.Duration(float64(ttl)*redlock.DefaultDriftFactor) - redlock.DefaultDriftConst)})
	nl.TTLs = append(nl.TTLs, ttl)
}

// releasing records the start of a Release of nl.
func (rec *Recorder) releasing(nl *history.Lock) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Releases = append(nl.Releases, history.Span{Start: rec.nowLocked()})
	return len(nl.Releases) - 1
}

// unreleasing takes back Release i of nl, recorded before a call that
// would have released it and did not (a Proclaim that failed).
func (rec *Recorder) unreleasing(nl *history.Lock, i int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if i == len(nl.Releases)-1 {
		nl.Releases = nl.Releases[:i]
	}
}

// released records the end of Release i of nl, which returned err.
func (rec *Recorder) released(nl *history.Lock, i int, err error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	nl.Releases[i].End = rec.nowLocked()
	nl.Released = nl.Released || err == nil
}

// look records one look at a KeepAlive context of l and reports whether it
// was live.
func (rec *Recorder) look(nl *history.Lock, l *redlock.Lock, kctx context.Context) bool {
	before := l.Until()
	at := rec.Now()
	live := kctx.Err() == nil
	after := l.Until()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.leases = append(rec.leases, history.LeaseObs{LockID: nl.ID, Key: nl.Key, At: at, Live: live, Before: before, After: after})
	return live
}

// doStarted records a Do whose function starts: its Lock holds now, and
// its values hold token.
func (rec *Recorder) doStarted(d *history.Lock, token string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.newLock(d, token)
	rec.holds[d.ID]++
}

// doEnded records how a Do whose function ran went: fd holds its calls and
// claims, copied into d under the lock, as the checker may read d.
func (rec *Recorder) doEnded(d *history.Lock, fd history.Lock, gotShared, gotPermit bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	d.Key, d.Keys, d.Slot = fd.Key, fd.Keys, fd.Slot
	d.FnStart, d.FnEnd, d.DoNil = fd.FnStart, fd.FnEnd, fd.DoNil
	d.Acquires, d.Releases, d.Proofs = fd.Acquires, fd.Releases, fd.Proofs
	if gotShared != d.Shared {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("Do #%d of %s: Shared() %v, asked %v", d.ID, d.Client, gotShared, d.Shared))
	}
	if gotPermit != (d.Permits > 0) || gotPermit && (d.Slot < 0 || d.Slot >= d.Permits) {
		rec.wrongs = append(rec.wrongs, fmt.Sprintf("Do #%d of %s: Permit() %d, %v, asked Permits(%d)", d.ID, d.Client, d.Slot, gotPermit, d.Permits))
	}
}

// Record returns a copy of the history for the checker.
func (rec *Recorder) Record() *history.Record {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := &history.Record{Leases: slices.Clone(rec.leases), Observations: slices.Clone(rec.observations), LatencyRefusals: slices.Clone(rec.latency)}
	for _, l := range rec.all {
		if len(l.Acquires) == 0 {
			continue
		}
		cp := *l
		cp.Acquires, cp.Releases, cp.Proofs, cp.Caps = slices.Clone(l.Acquires), slices.Clone(l.Releases), slices.Clone(l.Proofs), slices.Clone(l.Caps)
		cp.TTLs, cp.Claims = slices.Clone(l.TTLs), slices.Clone(l.Claims)
		cp.Keys = slices.Clone(l.Keys)
		if p, ok := rec.procs[l.ID]; ok && p >= 0 {
			cp.Proc = ProcName(p) // for the link cuts of its process (Nemesis.linkCut)
		}
		r.Locks = append(r.Locks, &cp)
	}
	return r
}

// Wrongs returns what the library got wrong that the checker does not
// judge.
func (rec *Recorder) Wrongs() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.wrongs)
}

// opKinds are the kinds of operation of the summary line, and the calls
// each counts: an acquire, an Extend, a KeepAlive or a Do, whatever its
// outcome; the Releases that end the holds are not counted.
var opKinds = []struct {
	name  string
	calls []string
}{
	{"acquire", []string{"acquire", "try-acquire", "campaign"}}, // a campaign is an exclusive acquire
	{"all", []string{"acquire-all", "try-acquire-all"}},
	{"shared", []string{"acquire-shared", "try-acquire-shared"}},
	{"permits", []string{"acquire-permit", "try-acquire-permit"}},
	{"extend", []string{"extend", "extend-shared", "extend-permit"}},
	{"keepalive", []string{"keep-alive", "keep-alive-shared", "keep-alive-permit"}},
	{"do", []string{"do", "do-all", "do-shared", "do-permit"}},
}

// OpCounts returns how many operations of each of opKinds were made, and
// their sum.
func (rec *Recorder) OpCounts() (map[string]int, int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	kind := make(map[string]string)
	for _, k := range opKinds {
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

// Outcomes lists every call's outcomes.
func (rec *Recorder) Outcomes() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(rec.results)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, rec.results[k]))
	}
	return strings.Join(parts, ", ")
}

// Store is the fenced store: it takes a write of a key with a fence iff
// the fence is at least the highest it took for the key, and records each
// decision. It is outside the network, out of reach of the faults.
type Store struct {
	now    func() time.Time // the recorder's Now
	mu     sync.Mutex
	top    map[string]uint64
	writes []history.FenceWrite
}

// NewStore returns an empty store that reads the time from now.
func NewStore(now func() time.Time) *Store { return &Store{now: now, top: make(map[string]uint64)} }

// Write writes key with fence on behalf of lock id, and reports whether
// the store took it.
func (s *Store) Write(key string, fence uint64, id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := fence >= s.top[key]
	if ok {
		s.top[key] = fence
	}
	s.writes = append(s.writes, history.FenceWrite{Seq: len(s.writes), LockID: id, Key: key, Fence: fence, At: s.now(), Accepted: ok})
	return ok
}

// Writes returns the store's decisions.
func (s *Store) Writes() []history.FenceWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}
