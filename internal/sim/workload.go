package sim

import (
	"bytes"
	"context"
	"encoding/base32"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
	"github.com/redlock-go/redlock/internal/leadership"
	"github.com/redlock-go/redlock/internal/script"
)

// The workload is the nemesis's (the root package's
// nemesis_workload_test.go), in the bubble: workers run a random mix of
// every primitive on a small pool of keys, through a few Clients that
// they share, and record what they did and saw; internal/history judges
// it. Each worker's choices in a round come from a source of their own
// (the seed, the worker and the round), so that a replay makes the same
// choices in the same round whatever the outcomes before it.

// TTLs: as many near MinTTL as near ShortTTL (log-uniform), and one Lock in
// LongEvery from ShortTTL to MaxTTL, whose values outlive the residue
// rule's bound: a value a late write left is seen before it expires.
const (
	MinTTL    = 50 * time.Millisecond
	ShortTTL  = 2 * time.Second
	MaxTTL    = 12 * time.Second
	LongEvery = 4
)

// ExpiryBound is how long after now a value written until now may live:
// the longest TTL, and its drift.
const ExpiryBound = MaxTTL + 2*time.Duration(float64(MaxTTL)*redlock.DefaultDriftFactor)

// Slot is one Client, shared by the workers that use it; the workload
// replaces it with a new one (a new process: go-redis clients and links of
// its own) when it closes it.
type Slot struct {
	name   string
	fenced bool
	c      atomic.Pointer[redlock.Client]
}

// Client returns the slot's Client now.
func (s *Slot) Client() *redlock.Client { return s.c.Load() }

// Workload is what the workers share.
type Workload struct {
	Seed    uint64
	Keys    []string
	Sems    []Sem // permits' keys: a key that permits hold refuses every other acquire
	Owners  bool
	Shared  bool
	Permits bool
	Multi   bool
	Stalled bool // the stalled-holder round (a holder sleeping past its validity, then writing)
	Long    bool // one Lock in LongEvery with a long TTL
	// Elections: a tenth of the rounds campaign for a key's leadership
	// (electRun).
	Elections bool
	// Hot: one round in 20 takes the pool's first key over and over,
	// releasing it at once (hotRun).
	Hot bool
	// Quick: one round in 8 takes Locks of a long TTL and releases each
	// at once (quickRun), for FaultHoldQuick.
	Quick bool
	Think time.Duration
	Slots []*Slot
	Rec   *Recorder
	Store *Store
	Trace *Trace
	// Closed reports whether a Client was closed (its go-redis clients
	// with it): a Lock of it whose Release ends after that may have left
	// its values on the nodes, to expire with their TTL.
	Closed   func(*redlock.Client) bool
	stopping atomic.Bool
	// Schedule, when set, names the workers' rounds to run (nil: all);
	// Began is when the workload started, which their times count from.
	Schedule *Schedule
	Began    time.Time
	mu       sync.Mutex
	started  map[int][]Round // per worker, the rounds it started
}

// Sem is a semaphore key and the n of its permits.
type Sem struct {
	Key string
	N   int
}

// Run runs worker w until stop, on slot slots[w % len]: its rounds one
// after the other, or those its Schedule lists, each at its time.
func (wl *Workload) Run(w int, stop <-chan struct{}) {
	slot := wl.Slots[w%len(wl.Slots)]
	name := fmt.Sprintf("w%d@%s", w, slot.name)
	if rounds, ok := wl.Schedule.rounds(w); ok {
		for _, rd := range rounds {
			if !sleep(stop, time.Until(wl.Began.Add(rd.At))) {
				return
			}
			wl.round(w, uint64(rd.N), slot, name)
		}
		return
	}
	for round := uint64(0); ; round++ {
		select {
		case <-stop:
			return
		default:
		}
		r := wl.round(w, round, slot, name)
		if !sleep(stop, randDur(r, 0, wl.Think)) {
			return
		}
	}
}

// Started returns, per worker, the rounds it started and when.
func (wl *Workload) Started() map[int][]Round {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	out := make(map[int][]Round, len(wl.started))
	for w, rs := range wl.started {
		out[w] = slices.Clone(rs)
	}
	return out
}

// round runs worker w's round, whose choices come from a source of its
// own, and returns that source for what the worker draws after it.
func (wl *Workload) round(w int, round uint64, slot *Slot, name string) *rand.Rand {
	wl.mu.Lock()
	if wl.started == nil {
		wl.started = make(map[int][]Round)
	}
	wl.started[w] = append(wl.started[w], Round{N: int(round), At: time.Since(wl.Began)})
	wl.mu.Unlock()
	r := rand.New(rand.NewPCG(wl.Seed, uint64(w)<<40|round))
	c := slot.Client()
	key := wl.Keys[r.IntN(len(wl.Keys))]
	if wl.Hot && r.IntN(20) == 0 {
		wl.hotRun(r, slot, c, name)
		return r
	}
	if wl.Quick && r.IntN(8) == 0 {
		wl.quickRun(r, slot, c, name)
		return r
	}
	ttl := wl.ttl(r)
	p := r.IntN(100)
	stalled := wl.Stalled && p >= 35 && p < 45
	switch {
	case wl.Permits && len(wl.Sems) > 0 && !stalled && r.IntN(4) == 0:
		sem := wl.Sems[r.IntN(len(wl.Sems))]
		switch p := r.IntN(100); {
		case p < 20:
			wl.doRun(r, c, name, sem.Key, ttl, sem.N)
		case p < 45:
			wl.keepAliveRun(r, slot, c, name, sem.Key, ttl, sem.N)
		default:
			wl.plainRun(r, slot, c, name, sem.Key, ttl, sem.N)
		}
	case p < 15:
		wl.doRun(r, c, name, key, ttl, 0)
	case p < 35:
		wl.keepAliveRun(r, slot, c, name, key, ttl, 0)
	case stalled:
		wl.pausedRun(r, name, key, min(ttl, ShortTTL))
	case wl.Elections && p >= 90:
		wl.electRun(r, c, name, wl.electionKey(r), ttl)
	case wl.Elections && p >= 80:
		wl.observeRun(r, c, wl.electionKey(r), ttl)
	default:
		wl.plainRun(r, slot, c, name, key, ttl, 0)
	}
	return r
}

// sleep sleeps d, or until stop; it reports whether it slept the whole d.
func sleep(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

func (wl *Workload) ttl(r *rand.Rand) time.Duration {
	if wl.Long && r.IntN(LongEvery) == 0 {
		return logDur(r, ShortTTL, MaxTTL).Truncate(time.Millisecond)
	}
	return logDur(r, MinTTL, ShortTTL).Truncate(time.Millisecond)
}

// work caps how long a round holds: at most a few seconds, however long
// its TTL (a long TTL is for the values it leaves, not for long holds),
// and no longer once the run stops.
func (wl *Workload) work(d time.Duration) time.Duration {
	d = min(d, 3*time.Second)
	if wl.stopping.Load() {
		d = min(d, 10*time.Millisecond)
	}
	return d
}

// logDur is uniform on a log scale between lo and hi.
func logDur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return time.Duration(float64(lo) * math.Pow(float64(hi)/float64(lo), r.Float64()))
}

// randDur is uniform in [lo, hi].
func randDur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// readerKey is a shared Lock's key: one of the pool's first three, so
// that readers meet each other and writers.
func (wl *Workload) readerKey(r *rand.Rand) string {
	return wl.Keys[r.IntN(min(3, len(wl.Keys)))]
}

// multiKeys returns key and one or two other keys of the pool, in a random
// order.
func (wl *Workload) multiKeys(r *rand.Rand, key string) []string {
	others := slices.DeleteFunc(slices.Clone(wl.Keys), func(k string) bool { return k == key })
	r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	keys := append([]string{key}, others[:min(len(others), 1+r.IntN(2))]...)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// acquire makes an Acquire or TryAcquire (or their All forms) with a
// random deadline: with permits, one of the n permits of key; otherwise a
// third of the time shared (wl.Shared), a quarter of the rest of several
// keys (multi), a third of the rest under an owner of a small pool.
func (wl *Workload) acquire(r *rand.Rand, slot *Slot, c *redlock.Client, name, key string, ttl time.Duration, multi, shareable bool, permits int) (*redlock.Lock, *history.Lock) {
	return wl.acquireAs(r, slot, c, name, key, ttl, multi, shareable, permits, "")
}

// acquireAs is acquire with holder metadata mark, when not "" (otherwise
// half the time the worker's name); a Lock with a mark is taken by a
// TryAcquire (one attempt, no wait behind a holder) and without an owner.
func (wl *Workload) acquireAs(r *rand.Rand, slot *Slot, c *redlock.Client, name, key string, ttl time.Duration, multi, shareable bool, permits int, mark string) (*redlock.Lock, *history.Lock) {
	var opts []redlock.AcquireOption
	if permits > 0 {
		opts = append(opts, redlock.Permits(permits))
		multi, shareable = false, false
	}
	shared := shareable && wl.Shared && r.IntN(3) == 0
	if shared {
		opts = append(opts, redlock.Shared())
		key = wl.readerKey(r)
	}
	var keys []string
	if !shared && multi && wl.Multi && r.IntN(4) == 0 {
		keys = wl.multiKeys(r, key)
	}
	owner := ""
	if permits == 0 && !shared && keys == nil && wl.Owners && mark == "" && r.IntN(3) == 0 {
		owner = fmt.Sprintf("req-%d", r.IntN(3))
		opts = append(opts, redlock.WithOwner(owner))
	}
	md := ""
	if r.IntN(2) == 0 { // holder metadata, which the values carry
		md = name
	}
	if mark != "" {
		md = mark
	}
	if md != "" {
		opts = append(opts, redlock.WithMetadata(md))
	}
	try := r.IntN(3) == 0 || mark != ""
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, 2*time.Second))
	defer cancel()
	evKeys := []string{key}
	if keys != nil {
		evKeys = keys
	}
	start := wl.Rec.Now()
	wl.Rec.acquireStart(evKeys)
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
	end := wl.Rec.Now()
	op := map[bool]string{true: "try-acquire", false: "acquire"}[try]
	what := fmt.Sprintf("owner %q", owner)
	switch {
	case keys != nil:
		op += "-all"
		what = fmt.Sprintf("keys %v", keys)
	case shared:
		op += "-shared"
		what = "shared"
	case permits > 0:
		op += "-permit"
		what = fmt.Sprintf("permit of %d", permits)
	}
	wl.Rec.op(op, err)
	wl.Rec.latencyRefused(c, ttl, start, end, err)
	if err != nil {
		wl.Rec.acquireEnd(evKeys)
		wl.Trace.AddKeys("op", -1, evKeys, "%s %s(%s, ttl %v) from %s: %v", name, op, what, ttl, Since(wl.Trace.start, start), err)
		return nil, nil
	}
	nl := wl.Rec.acquired(l, name, owner, slot.fenced, shared, permits, ttl, history.Span{Start: start, End: end})
	if l.Metadata() != md && owner == "" {
		wl.Rec.wrong("lock #%d of %s: Metadata() %q, stored %q", nl.ID, name, l.Metadata(), md)
	}
	wl.Rec.setProc(nl.ID, c)
	wl.Rec.acquireEnd(evKeys)
	held := fmt.Sprintf("fence %d", l.Fence())
	if permits > 0 {
		held = fmt.Sprintf("slot %d", nl.Slot)
	}
	wl.Trace.AddKeys("op", -1, nl.AllKeys(), "%s %s(%s, ttl %v) from %s: lock #%d (token %s, %s, until %s)", name, op, what, ttl,
		Since(wl.Trace.start, start), nl.ID, l.Token(), held, Since(wl.Trace.start, l.Until()))
	return l, nl
}

// write writes to the fenced store on behalf of nl, an exclusive Lock of
// a fenced Client, to each of its keys.
func (wl *Workload) write(nl *history.Lock) {
	if !nl.Fenced || nl.Shared || nl.Permits > 0 {
		return
	}
	for _, key := range nl.AllKeys() {
		wl.Store.Write(key, nl.Fence, nl.ID)
	}
}

// plainRun holds a Lock for a random time (sometimes past its TTL),
// writes to the fenced store while it believes it holds it (and sometimes
// after), may extend it, and releases it: once, twice, twice at once, or
// racing an Extend.
func (wl *Workload) plainRun(r *rand.Rand, slot *Slot, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	l, nl := wl.acquire(r, slot, c, name, key, ttl, true, true, permits)
	if l == nil {
		return
	}
	work := logDur(r, 5*time.Millisecond, ttl/2)
	if r.IntN(3) == 0 {
		work = randDur(r, 0, ttl*3/2)
	}
	extendAt := time.Duration(-1)
	if r.IntN(2) == 0 {
		extendAt = randDur(r, 0, work+1)
	}
	stale := r.IntN(4) == 0
	if time.Now().Before(l.Until()) {
		wl.write(nl)
	}
	start := time.Now()
	for last := false; !last; {
		step := randDur(r, 5*time.Millisecond, 50*time.Millisecond)
		if rest := wl.work(work) - time.Since(start); step >= rest {
			step, last = max(rest, 0), true
		}
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
	case 0:
		wl.release(c, l, nl)
		wl.release(c, l, nl)
	case 1:
		var wg sync.WaitGroup
		wg.Go(func() { wl.release(c, l, nl) })
		wg.Go(func() { wl.release(c, l, nl) })
		wg.Wait()
	case 2:
		var wg sync.WaitGroup
		er := rand.New(rand.NewPCG(r.Uint64(), 0))
		wg.Go(func() { wl.extend(er, l, nl) })
		wg.Go(func() { wl.release(c, l, nl) })
		wg.Wait()
	default:
		wl.release(c, l, nl)
	}
}

// hotRun takes the pool's first key 10 to 30 times in a row, each time
// releasing it at once, with a TTL of ShortTTL: a hot key, where many
// Locks' deletes meet between a write's sending and its landing
// (docs/late-writes.md: nothing a node keeps per key may be pushed out by
// them).
func (wl *Workload) hotRun(r *rand.Rand, slot *Slot, c *redlock.Client, name string) {
	for range 10 + r.IntN(21) {
		l, nl := wl.acquire(r, slot, c, name, wl.Keys[0], ShortTTL, false, false, 0)
		if l == nil {
			continue
		}
		wl.write(nl)
		wl.release(c, l, nl)
	}
}

// QuickMark is the holder metadata of quickRun's Locks, which their values
// carry: what FaultHoldQuick finds their writes by (QuickWrite).
const QuickMark = "quick release"

// quickMeta is QuickMark as a Lock's prefix holds it, and ends with: the
// metadata mark, the metadata in base32 (internal/script.NewPrefixes), and
// the prefix's ".".
var quickMeta = []byte(script.MetaMark + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(QuickMark)) + ".")

// QuickWrite reports whether chunk b, as a client writes it to a node,
// holds a write of a quickRun Lock: a value of its, the prefix followed by
// the write's generation. A delete names the prefix alone, followed by
// the end of its argument.
func QuickWrite(b []byte) bool {
	for {
		i := bytes.Index(b, quickMeta)
		if i < 0 {
			return false
		}
		b = b[i+len(quickMeta):]
		if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
			return true
		}
	}
}

// QuickTTL is the shortest TTL of quickRun's Locks. From 10 s a Lock's
// node timeout, and so its writes' deadline, is the longest, 50 ms
// (DefaultNodeTimeoutMax), which most of FaultHoldQuick's holds are
// within; and a value a late copy leaves stays through the fault's end
// (200 ms after the copy landed) and the residue rule's bound, 2 s, of
// quiet after it, with seconds to spare for other faults on the node or
// the link.
const QuickTTL = 10 * time.Second

// quickRun takes 3 to 6 Locks in a row, each of a random key, with a TTL
// from QuickTTL to MaxTTL (a node timeout of 50 ms: a write's deadline),
// and releases each at once: the Release's deletes follow its
// acquire's writes by a millisecond or two. A copy of one of those writes
// that lands after the delete on its node, and before its deadline
// (FaultHoldQuick holds one), is stopped by the refusal the delete left
// alone; nothing else refuses it, and the value it writes would hold the
// key for nobody for the rest of its TTL (docs/late-writes.md).
func (wl *Workload) quickRun(r *rand.Rand, slot *Slot, c *redlock.Client, name string) {
	for range 3 + r.IntN(4) {
		key := wl.Keys[r.IntN(len(wl.Keys))]
		ttl := logDur(r, QuickTTL, MaxTTL).Truncate(time.Millisecond)
		l, nl := wl.acquireAs(r, slot, c, name, key, ttl, false, false, 0, QuickMark)
		if l == nil {
			continue
		}
		wl.write(nl)
		wl.release(c, l, nl)
	}
}

// pausedRun is the stalled holder, through the first slot's Client, which
// fences: A takes the key and writes, sleeps past its validity, B takes
// the key and writes, then A writes again, which the store must refuse.
func (wl *Workload) pausedRun(r *rand.Rand, name, key string, ttl time.Duration) {
	slot := wl.Slots[0]
	c := slot.Client()
	a, na := wl.acquire(r, slot, c, name, key, ttl, true, false, 0)
	if a == nil {
		return
	}
	if time.Now().Before(a.Until()) {
		wl.write(na)
	}
	time.Sleep(time.Until(a.Until()) + randDur(r, 0, ttl/2))
	if b, nb := wl.acquire(r, slot, c, name, key, logDur(r, MinTTL, ShortTTL), false, false, 0); b != nil {
		wl.write(nb)
		wl.write(na)
		wl.release(c, b, nb)
	}
	wl.release(c, a, na)
}

func (wl *Workload) extend(r *rand.Rand, l *redlock.Lock, nl *history.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, time.Second))
	defer cancel()
	ttl := wl.ttl(r)
	start := wl.Rec.Now()
	wl.Rec.capAt(nl, start, ttl)
	err := l.Extend(ctx, ttl)
	wl.Rec.op(opName("extend", nl), err)
	wl.Trace.AddKeys("op", -1, nl.AllKeys(), "extend of lock #%d for %v from %s: %v (until %s)", nl.ID, ttl, Since(wl.Trace.start, start), err,
		Since(wl.Trace.start, l.Until()))
	if err == nil {
		wl.Rec.prove(nl, l)
	}
}

func (wl *Workload) release(c *redlock.Client, l *redlock.Lock, nl *history.Lock) {
	i := wl.Rec.releasing(nl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := l.Release(ctx)
	wl.Rec.released(nl, i, err)
	wl.Rec.op(opName("release", nl), err)
	end := wl.Rec.Now()
	if outcome(err) == redlock.ErrClosed.Error() || wl.Closed != nil && wl.Closed(c) {
		// Its Client closed under it: its values stay until they expire.
		end = end.Add(ExpiryBound)
	}
	wl.Rec.ended(nl.ID, end)
	wl.Trace.AddKeys("op", -1, nl.AllKeys(), "release of lock #%d from %s: %v", nl.ID, Since(wl.Trace.start, start), err)
}

// opName names a call on a shared Lock with "-shared", on a permit with
// "-permit".
func opName(op string, nl *history.Lock) string {
	switch {
	case nl.Shared:
		return op + "-shared"
	case nl.Permits > 0:
		return op + "-permit"
	}
	return op
}

// keepAliveRun holds a Lock under KeepAlive for up to three TTLs, looking
// at the context and Until every few milliseconds and writing to the
// fenced store while the context is live.
func (wl *Workload) keepAliveRun(r *rand.Rand, slot *Slot, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	l, nl := wl.acquire(r, slot, c, name, key, ttl, true, true, permits)
	if l == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	kctx := l.KeepAlive(ctx)
	wl.Rec.op(opName("keep-alive", nl), nil)
	work := logDur(r, 5*time.Millisecond, 3*ttl)
	start := time.Now()
	for time.Since(start) < wl.work(work) {
		if !wl.Rec.look(nl, l, kctx) {
			break
		}
		wl.Rec.prove(nl, l)
		time.Sleep(randDur(r, 2*time.Millisecond, 30*time.Millisecond))
		wl.write(nl)
	}
	cancel()
	wl.Trace.AddKeys("op", -1, nl.AllKeys(), "keep-alive of lock #%d ends: %v", nl.ID, context.Cause(kctx))
	wl.release(c, l, nl)
}

// electRun campaigns for key's leadership with a random deadline, leads
// as keepAliveRun holds (looking at the leadership's context, writing to
// the fenced store with its term while it is live), and resigns. The
// checker judges a leadership as the fenced Lock it is, and by the terms
// rule (history.Lock.Election).
func (wl *Workload) electRun(r *rand.Rand, c *redlock.Client, name, key string, ttl time.Duration) {
	el, err := c.Election(key, ttl)
	if err != nil {
		wl.Rec.wrong("Election(%q, %v) of %s: %v", key, ttl, name, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, 2*time.Second))
	defer cancel()
	start := wl.Rec.Now()
	wl.Rec.acquireStart([]string{key})
	ld, err := el.Campaign(ctx, name)
	end := wl.Rec.Now()
	wl.Rec.op("campaign", err)
	if err != nil {
		wl.Rec.acquireEnd([]string{key})
		wl.Trace.AddKeys("op", -1, []string{key}, "%s campaign(ttl %v) from %s: %v", name, ttl, Since(wl.Trace.start, start), err)
		return
	}
	// Its Locks share an owner (a Proclaim takes the key over from the
	// one before), whose token stands for the owner's id.
	l := leadership.Lock(ld).(*redlock.Lock)
	owner := l.Token()
	nl := wl.Rec.acquired(l, name, owner, true, false, 0, ttl, history.Span{Start: start, End: end})
	wl.Rec.elected(nl)
	wl.Rec.setProc(nl.ID, c)
	wl.Rec.acquireEnd([]string{key})
	if ld.Term() != l.Fence() || ld.Value() != name {
		wl.Rec.wrong("leadership #%d of %s: Term() %d (fence %d), Value() %q", nl.ID, name, ld.Term(), l.Fence(), ld.Value())
	}
	wl.Trace.AddKeys("op", -1, []string{key}, "%s campaign(ttl %v) from %s: lock #%d (token %s, term %d, until %s)", name, ttl,
		Since(wl.Trace.start, start), nl.ID, l.Token(), ld.Term(), Since(wl.Trace.start, ld.Until()))
	work := logDur(r, 5*time.Millisecond, 3*ttl)
	proclaimAt := time.Duration(-1)
	if r.IntN(3) == 0 {
		proclaimAt = randDur(r, 0, work+1)
	}
	began := time.Now()
	for time.Since(began) < wl.work(work) {
		if !wl.Rec.look(nl, l, ld.Context()) {
			break
		}
		wl.Rec.prove(nl, l)
		time.Sleep(randDur(r, 2*time.Millisecond, 30*time.Millisecond))
		wl.write(nl)
		if proclaimAt >= 0 && time.Since(began) >= wl.work(proclaimAt) {
			proclaimAt = -1
			if l2, nl2 := wl.proclaim(r, c, ld, nl, name, owner, key, ttl); l2 != nil {
				l, nl = l2, nl2
				wl.write(nl)
			}
		}
	}
	wl.Trace.AddKeys("op", -1, []string{key}, "leadership #%d ends: %v", nl.ID, context.Cause(ld.Context()))
	wl.release(c, l, nl) // Resign releases the leadership's Lock
}

// proclaim proclaims a new value for leadership ld: on success its new
// Lock, of a new term, took the key over from the last, replaced, which
// it released, and is recorded as a new leadership of the owner.
func (wl *Workload) proclaim(r *rand.Rand, c *redlock.Client, ld *redlock.Leadership, replaced *history.Lock, name, owner, key string, ttl time.Duration) (*redlock.Lock, *history.Lock) {
	value := name + "'"
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, time.Second))
	defer cancel()
	start := wl.Rec.Now()
	wl.Rec.acquireStart([]string{key})
	i := wl.Rec.releasing(replaced) // within the call, if it succeeds
	err := ld.Proclaim(ctx, value)
	end := wl.Rec.Now()
	wl.Rec.op("proclaim", err)
	if err != nil {
		wl.Rec.unreleasing(replaced, i)
		wl.Rec.acquireEnd([]string{key})
		wl.Trace.AddKeys("op", -1, []string{key}, "%s proclaim from %s: %v", name, Since(wl.Trace.start, start), err)
		return nil, nil
	}
	l := leadership.Lock(ld).(*redlock.Lock)
	nl := wl.Rec.acquired(l, name, owner, true, false, 0, ttl, history.Span{Start: start, End: end})
	wl.Rec.elected(nl)
	wl.Rec.setProc(nl.ID, c)
	wl.Rec.released(replaced, i, nil)
	wl.Rec.ended(replaced.ID, end)
	wl.Rec.acquireEnd([]string{key})
	if ld.Value() != value || l.Metadata() != value || ld.Term() != l.Fence() {
		wl.Rec.wrong("leadership #%d of %s after Proclaim: Value() %q, Term() %d, fence %d", nl.ID, name, ld.Value(), ld.Term(), l.Fence())
	}
	wl.Trace.AddKeys("op", -1, []string{key}, "%s proclaim from %s: lock #%d (token %s, term %d)", name, Since(wl.Trace.start, start), nl.ID, l.Token(), ld.Term())
	return l, nl
}

// electionKey is one of the pool's first two keys: campaigns meet, and
// observers find leaders, as often on a pool of many keys as on a small
// one. Other Locks take them too.
func (wl *Workload) electionKey(r *rand.Rand) string { return wl.Keys[r.IntN(min(2, len(wl.Keys)))] }

// observeRun observes key's leaders: one Election.Leader, then Observe's
// reports for the rest of a random deadline, each recorded with the window
// in which its read was made (history.checkObserved).
func (wl *Workload) observeRun(r *rand.Rand, c *redlock.Client, key string, ttl time.Duration) {
	el, err := c.Election(key, ttl)
	if err != nil {
		wl.Rec.wrong("Election(%q, %v): %v", key, ttl, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 50*time.Millisecond, 2*time.Second))
	defer cancel()
	start := wl.Rec.Now()
	ld, err := el.Leader(ctx)
	end := wl.Rec.Now()
	wl.Rec.op("leader", err)
	switch {
	case err == nil:
		wl.Rec.observed(history.Observation{Key: key, Span: history.Span{Start: start, End: end}, Term: ld.Term, Value: ld.Value})
	case errors.Is(err, redlock.ErrNoLeader):
		wl.Rec.observed(history.Observation{Key: key, Span: history.Span{Start: start, End: end}, None: true})
	}
	from := wl.Rec.Now()
	for ld := range el.Observe(ctx) {
		now := wl.Rec.Now()
		wl.Rec.observed(history.Observation{Key: key, Span: history.Span{Start: from, End: now}, Term: ld.Term, Value: ld.Value})
		wl.Trace.AddKeys("op", -1, []string{key}, "observed term %d (%q) from %s", ld.Term, ld.Value, Since(wl.Trace.start, from))
		from = now
	}
}

// doRun runs Do (on a permit, shared, or DoAll) with work that sometimes
// outlives the TTL and a deadline that sometimes ends it; the function
// notes when its context was last seen live.
func (wl *Workload) doRun(r *rand.Rand, c *redlock.Client, name, key string, ttl time.Duration, permits int) {
	shared := permits == 0 && wl.Shared && r.IntN(3) == 0
	if shared {
		key = wl.readerKey(r)
	}
	var keys []string
	if permits == 0 && !shared && wl.Multi && r.IntN(4) == 0 {
		keys = wl.multiKeys(r, key)
	}
	work := logDur(r, 2*time.Millisecond, 2*ttl)
	ctx, cancel := context.WithTimeout(context.Background(), randDur(r, 5*time.Millisecond, 2*time.Second)+randDur(r, 0, 2*work))
	defer cancel()
	steps := make([]time.Duration, 0, 16)
	for total := time.Duration(0); total < wl.work(work); {
		s := randDur(r, 2*time.Millisecond, 30*time.Millisecond)
		steps = append(steps, s)
		total += s
	}
	evKeys := []string{key}
	if keys != nil {
		evKeys = keys
	}
	// d is the Do's Lock as the checker reads it, recorded once fn
	// starts (its values then hold its token); fd is what fn and the
	// call see, copied into d when Do returns.
	d := &history.Lock{Client: name, Key: key, Do: true, Shared: shared, Permits: permits}
	fd := *d
	var gotShared, gotPermit bool
	var token string
	start := wl.Rec.Now()
	wl.Rec.acquireStart(evKeys)
	acquiring := true
	fn := func(kctx context.Context, l *redlock.Lock) error {
		token = l.Token()
		if ks := l.Keys(); len(ks) > 1 {
			d.Keys = ks // before doStarted, which files d under its keys
		}
		wl.Rec.doStarted(d, token)
		wl.Rec.setProc(d.ID, c)
		wl.Rec.acquireEnd(evKeys)
		acquiring = false
		if ks := l.Keys(); len(ks) > 1 {
			fd.Key, fd.Keys = l.Key(), ks
		}
		gotShared = l.Shared()
		fd.Slot, gotPermit = l.Permit()
		fd.FnStart = wl.Rec.Now()
		live := fd.FnStart
		for _, s := range steps {
			at := wl.Rec.Now()
			if kctx.Err() != nil {
				break
			}
			live = at
			time.Sleep(s)
		}
		fd.FnEnd = wl.Rec.Now()
		fd.Proofs = []history.Proof{{From: fd.FnStart, Until: live}}
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
	end := wl.Rec.Now()
	if acquiring {
		wl.Rec.acquireEnd(evKeys)
	}
	wl.Rec.op(op, err)
	wl.Rec.latencyRefused(c, ttl, start, end, err)
	if fd.FnStart.IsZero() {
		wl.Trace.AddKeys("op", -1, evKeys, "%s %s(keys %v, ttl %v) from %s: %v", name, op, evKeys, ttl, Since(wl.Trace.start, start), err)
		return
	}
	fd.Acquires = []history.Span{{Start: start, End: fd.FnStart}}
	fd.Releases = []history.Span{{Start: fd.FnEnd, End: end}}
	fd.DoNil = err == nil
	wl.Rec.doEnded(d, fd, gotShared, gotPermit)
	if outcome(err) == redlock.ErrClosed.Error() || wl.Closed != nil && wl.Closed(c) {
		end = end.Add(ExpiryBound)
	}
	wl.Rec.ended(d.ID, end)
	held := ""
	if permits > 0 {
		held = fmt.Sprintf(" (slot %d of %d)", fd.Slot, permits)
	}
	wl.Trace.AddKeys("op", -1, fd.AllKeys(), "%s %s(keys %v, ttl %v) from %s: lock #%d (token %s)%s, fn %s..%s, live until %s: %v", name, op, fd.AllKeys(), ttl,
		Since(wl.Trace.start, start), d.ID, token, held, Since(wl.Trace.start, fd.FnStart), Since(wl.Trace.start, fd.FnEnd), Since(wl.Trace.start, fd.Proofs[0].Until), err)
}
