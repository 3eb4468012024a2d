package redlock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/testbed"
)

// The nemesis: clients running a random mix of every feature on a few keys
// while a seeded random source injects faults within the documented
// assumptions; the checker (internal/history.Check) then reads the whole
// history. A run ends with one line (go test -v shows it):
//
//	nemesis: seed 555006, 5 nodes, 6 clients, 7,131 ops (1,373 on shared Locks, 1,854 on permits), 1,523 faults, 0 violations (exclusion 0, permits 0, ...)
//
// A long run: go test -v -run TestNemesis -nemesis.duration=30m -timeout 40m .
// A replay: -nemesis.seed=S runs the same schedule of faults and operations
// (their timing still varies).
var (
	nemSeed     = flag.Uint64("nemesis.seed", 0, "seed of the nemesis's schedule (0: a new one)")
	nemDuration = flag.Duration("nemesis.duration", 20*time.Second, "how long the nemesis runs")
	nemNodes    = flag.Int("nemesis.nodes", 5, "redis-server nodes")
	nemClients  = flag.Int("nemesis.clients", 6, "workers; the first four share a Client two by two")
	nemOwners   = flag.Bool("nemesis.owners", true, "use WithOwner in a third of the acquires")
	nemShared   = flag.Bool("nemesis.shared", true, "take a third of the Locks (Acquire, TryAcquire, Do) shared")
	nemPermits  = flag.Bool("nemesis.permits", true, "spend a quarter of the rounds (not the stalled holder's) on permits (Acquire, TryAcquire, Do with Permits) of semaphore keys of their own")
	nemMajority = flag.Bool("nemesis.majority", false, "fault a majority too (liveness is then not expected during the run)")
)

const (
	nemMinTTL = 50 * time.Millisecond
	nemMaxTTL = 2 * time.Second
	// nemGuard is the restart guard of the guarded run: at least the
	// longest TTL in use, as documented.
	nemGuard = nemMaxTTL
	// nemSlack is how late a lease signal may come before it counts: the
	// bound of docs/lease.md for a timer on a starved CPU (the tests share
	// two cores under -race).
	nemSlack = leaseLate
)

// TestNemesis runs the nemesis with the restart guard on, so every fault it
// injects is within the documented assumptions and the checker must find
// nothing; then without the guard, restarting nodes empty, where the checker
// must find two holders, with shared Locks a reader beside a writer, and
// with permits n+1 holders of a semaphore key: proof that a green run means
// something.
func TestNemesis(t *testing.T) {
	seed := *nemSeed
	if seed == 0 {
		seed = rand.Uint64()%1_000_000 + 1
	}
	t.Run("guarded", func(t *testing.T) {
		kinds := []string{"blackhole", "delay", "drop-replies", "hold", "pause", "crash", "restart-empty", "flushall"}
		run := newNemRun(t, seed, true, kinds)
		run.owners = *nemOwners
		run.shared = *nemShared
		run.permits = *nemPermits
		run.enough = func(r *history.Record, v *history.Verdict) []string { return run.shortfall(r, v, *nemDuration) }
		v, r := run.run(t, *nemDuration, nil)
		if len(v.Found) > 0 {
			t.Errorf("seed %d: %d violations (replay: -run TestNemesis/guarded -nemesis.seed=%d):\n%s",
				seed, len(v.Found), seed, v.Describe(30))
		}
		for _, w := range run.rec.wrong() {
			t.Errorf("seed %d: %s", seed, w)
		}
		run.requireActivity(t, r, v, *nemDuration)
	})
	t.Run("unguarded-restart-empty", func(t *testing.T) {
		// The hazard of the Redlock spec: a node that restarts empty at
		// once forgets the holder's key; once a majority did within one
		// hold, a second client gets a quorum. Only that fault, often,
		// and no owners, shared Locks nor permits, so that nothing else
		// can make the finding.
		run := newNemRun(t, seed, false, []string{"restart-empty"})
		run.gap = [2]time.Duration{10 * time.Millisecond, 80 * time.Millisecond}
		run.down = [2]time.Duration{0, 50 * time.Millisecond}
		const bound = 60 * time.Second
		v, _ := run.run(t, bound, func(v *history.Verdict) bool { return v.Count("exclusion") > 0 })
		require.Positive(t, v.Count("exclusion"), "seed %d: no two holders within %v of restarts without the guard", seed, bound)
		t.Logf("first finding: %s", v.Found[0].Detail)
	})
	t.Run("unguarded-restart-empty-shared", func(t *testing.T) {
		if !*nemShared {
			t.Skip("-nemesis.shared=false")
		}
		// The same hazard, with shared Locks: the checker must find a
		// shared Lock and an exclusive one holding a key together, as
		// it finds two exclusive ones.
		run := newNemRun(t, seed, false, []string{"restart-empty"})
		run.gap = [2]time.Duration{10 * time.Millisecond, 80 * time.Millisecond}
		run.down = [2]time.Duration{0, 50 * time.Millisecond}
		run.shared = true
		readerBesideWriter := func(v *history.Verdict) *history.Violation {
			for i, f := range v.Found {
				if f.Kind == "shared" {
					return &v.Found[i]
				}
			}
			return nil
		}
		const bound = 60 * time.Second
		v, _ := run.run(t, bound, func(v *history.Verdict) bool { return readerBesideWriter(v) != nil })
		f := readerBesideWriter(v)
		require.NotNil(t, f, "seed %d: no reader beside a writer within %v of restarts without the guard", seed, bound)
		t.Logf("first finding: %s", f.Detail)
	})
	t.Run("unguarded-restart-empty-permits", func(t *testing.T) {
		if !*nemPermits {
			t.Skip("-nemesis.permits=false")
		}
		// The same hazard, with permits alone: a node that restarts
		// empty forgets the permits it gave, and once a majority did
		// within one hold, a slot is given twice. The checker must find
		// more than n holders of a semaphore key, not only two in one
		// slot.
		run := newNemRun(t, seed, false, []string{"restart-empty"})
		run.gap = [2]time.Duration{10 * time.Millisecond, 80 * time.Millisecond}
		run.down = [2]time.Duration{0, 50 * time.Millisecond}
		run.permits, run.permitsOnly = true, true
		const bound = 60 * time.Second
		v, _ := run.run(t, bound, func(v *history.Verdict) bool { return moreThanN(v) != nil })
		f := moreThanN(v)
		require.NotNil(t, f, "seed %d: no n+1 holders of a semaphore key within %v of restarts without the guard (%d in one slot)",
			seed, bound, len(v.Found))
		t.Logf("first finding: %s", f.Detail)
	})
}

// moreThanN returns the first finding of v that names more permits
// holding a key at once than their n, nil if none.
func moreThanN(v *history.Verdict) *history.Violation {
	for i, f := range v.Found {
		if len(f.Holds) > 0 && f.Holds[0].Permits > 0 && len(f.Holds) > f.Holds[0].Permits {
			return &v.Found[i]
		}
	}
	return nil
}

// nemRun is one run: the nodes, the Clients, the workers and the nemesis.
type nemRun struct {
	seed    uint64
	guarded bool
	kinds   []string         // the faults the nemesis picks from
	gap     [2]time.Duration // between the nemesis's decisions
	down    [2]time.Duration // how long a fault lasts
	keys    []string
	owners  bool // a third of the acquires WithOwner
	shared  bool // a third of the Acquires, TryAcquires and Dos Shared
	// permits: a quarter of the rounds (all with permitsOnly) take a
	// permit of one of sems. Permits have keys of their own: a key that
	// permits hold refuses every other acquire, and one that another
	// Lock holds refuses permits, with ErrInvalidArgument.
	permits     bool
	permitsOnly bool
	sems        []nemSem

	bed    *testbed.Bed
	slots  []*nemSlot
	rec    *nemRecorder
	faults atomic.Int64
	byKind map[string]*atomic.Int64 // faults injected, by kind
	// enough, if set, lists what the history so far shows less of than a
	// run must: a run goes on past its duration, up to three times it,
	// until it lists nothing.
	enough  func(*history.Record, *history.Verdict) []string
	closing sync.WaitGroup // Closes of Clients replaced mid-run
}

// nemSem is a semaphore key and the n of its permits.
type nemSem struct {
	key string
	n   int
}

// nemSlot is one Client, shared by the workers that use it; it is replaced
// by a new one when the nemesis closes it mid-run.
type nemSlot struct {
	name   string
	fenced bool // its Clients fence
	c      atomic.Pointer[redlock.Client]
	make   func() *redlock.Client
	mu     sync.Mutex
	every  []*redlock.Client // every Client the slot had, for the final Close
}

func newNemRun(t *testing.T, seed uint64, guarded bool, kinds []string) *nemRun {
	t.Helper()
	n := *nemNodes
	run := &nemRun{seed: seed, guarded: guarded, kinds: kinds, rec: newNemRecorder(), byKind: make(map[string]*atomic.Int64),
		gap:  [2]time.Duration{20 * time.Millisecond, 200 * time.Millisecond},
		down: [2]time.Duration{50 * time.Millisecond, 1500 * time.Millisecond}}
	for i := range 3 {
		run.keys = append(run.keys, fmt.Sprintf("nem:%d:{k%d}", seed, i))
	}
	for i, n := range []int{2, 3} {
		run.sems = append(run.sems, nemSem{fmt.Sprintf("nem:%d:{s%d}", seed, i), n})
	}
	for _, k := range kinds {
		run.byKind[k] = new(atomic.Int64)
	}
	// Persistence that keeps every acknowledged write: a crash is then
	// within the assumptions; a restart empty is made by flushing.
	run.bed = testbed.Start(t, n, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	run.bed.LoadScripts()

	r := rand.New(rand.NewPCG(seed, 7))
	for i := range nemSlotCount(*nemClients) {
		// The first Client fences with context timeouts, the second
		// neither, the others at random.
		fenced, timeouts := i == 0, i == 0
		if i > 1 {
			fenced, timeouts = r.IntN(2) == 0, r.IntN(2) == 0
		}
		nodeTimeout := time.Duration(0)
		if r.IntN(2) == 0 {
			nodeTimeout = 100 * time.Millisecond
		}
		slot := &nemSlot{name: fmt.Sprintf("C%d", i), fenced: fenced}
		slot.make = func() *redlock.Client {
			nodes := run.bed.Clients(func(o *redis.Options) { o.ContextTimeoutEnabled = timeouts })
			var opts []redlock.Option
			if fenced {
				opts = append(opts, redlock.WithFencing())
			}
			if nodeTimeout > 0 {
				opts = append(opts, redlock.WithNodeTimeout(nodeTimeout))
			}
			if guarded {
				opts = append(opts, redlock.WithRestartGuard(nemGuard))
			}
			c, err := redlock.New(nodes, opts...)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Warm(ctx) // under faults (a replacement mid-run) it may not finish
			slot.mu.Lock()
			slot.every = append(slot.every, c)
			slot.mu.Unlock()
			return c
		}
		slot.c.Store(slot.make())
		run.slots = append(run.slots, slot)
	}
	t.Cleanup(func() { run.closeAll(t) })
	if guarded {
		// Nodes the guard has never seen vote only nemGuard after the
		// first guarded acquire that reached them.
		c := run.slots[0].c.Load()
		key := fmt.Sprintf("nem:%d:warm", seed)
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			l, err := c.TryAcquire(ctx, key, time.Second)
			if err != nil {
				return false
			}
			_ = l.Release(ctx)
			return true
		}, nemGuard+15*time.Second, 50*time.Millisecond, "the guard did not let the fresh nodes vote")
	}
	return run
}

// nemSlotCount is how many Clients k workers use: the first four share two.
func nemSlotCount(k int) int {
	if k <= 4 {
		return (k + 1) / 2
	}
	return 2 + k - 4
}

func nemSlotOf(worker int) int {
	if worker < 4 {
		return worker / 2
	}
	return worker - 2
}

// closeAll closes every Client the run made, waiting for their background
// work.
func (run *nemRun) closeAll(t *testing.T) {
	t.Helper()
	run.closing.Wait()
	for _, s := range run.slots {
		s.mu.Lock()
		every := s.every
		s.every = nil
		s.mu.Unlock()
		for _, c := range every {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := c.Close(ctx)
			cancel()
			if err != nil && !errors.Is(err, redlock.ErrClosed) {
				t.Errorf("closing a Client: %v", err)
			}
		}
	}
}

// run runs the workers and the nemesis for d (or until done says so, checked
// every second on the history so far), heals, checks for lockout and
// leftovers, and reports. It returns the verdict and the record judged.
func (run *nemRun) run(t *testing.T, d time.Duration, done func(*history.Verdict) bool) (*history.Verdict, *history.Record) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range *nemClients {
		wg.Go(func() { run.worker(w, stop) })
	}
	nemStopped := make(chan struct{})
	go func() {
		defer close(nemStopped)
		run.nemesis(t, stop, d)
	}()
	begun := time.Now()
	deadline := begun.Add(d)
	for time.Now().Before(deadline) {
		time.Sleep(min(time.Second, time.Until(deadline)))
		if done != nil && done(history.Check(run.rec.record())) {
			break
		}
	}
	if run.enough != nil {
		var short []string // at the end of d
		for bound := begun.Add(3 * d); time.Now().Before(bound); time.Sleep(time.Second) {
			r := run.rec.record()
			s := run.enough(r, history.Check(r))
			if short == nil {
				short = s
			}
			if len(s) == 0 {
				break
			}
		}
		if took := time.Since(begun); took > d+time.Second {
			t.Logf("ran %v: the activity a run must show needed more than %v (%s)", took.Round(time.Second), d, strings.Join(short, "; "))
		}
	}
	close(stop)
	<-nemStopped // every fault healed
	healed := time.Now()
	waitOrFail(t, &wg, time.Minute, "workers did not stop")

	r := run.rec.record()
	r.Slack = nemSlack
	if done == nil { // a run within the assumptions: liveness and cleanliness too
		r.Bound = nemMaxTTL + time.Second
		if *nemMajority {
			r.Bound += nemGuard
		}
		r.Probes = run.probes(r.Bound)
		run.closeAll(t)
		r.Leftovers = run.leftovers(t)
	}
	v := history.Check(r)
	causes := make(map[string]int)
	for _, f := range v.Found {
		causes[f.Kind+": "+ownerHint(r, f, true)]++
	}
	if len(causes) > 0 {
		t.Logf("findings by owner involvement: %v", causes)
	}
	for i, f := range v.Found {
		if i == 5 || f.At.IsZero() || done != nil { // a run made to find something: no timelines
			break
		}
		t.Logf("timeline of %s finding %d (%s; %s):\n%s", f.Kind, i+1, f.Detail, ownerHint(r, f, false),
			run.rec.timeline(f.Key, f.At, 3*time.Second, 500*time.Millisecond, 150))
	}
	ops, shared, permits := run.rec.opCount()
	line := fmt.Sprintf("nemesis: seed %d, %d nodes, %d clients, %s ops (%s on shared Locks, %s on permits), %s faults, %s violations (%s)",
		run.seed, len(run.bed.Servers), *nemClients, commas(ops), commas(shared), commas(permits), commas(int(run.faults.Load())),
		commas(len(v.Found)), v.Counts())
	t.Log(line)
	t.Logf("outcomes: %s; healed to probes %v", run.rec.outcomes(), time.Since(healed).Round(time.Millisecond))
	return v, r
}

// nemMinRates are the least of each activity a guarded run must show, per
// second of its duration (at least one of each): about a quarter of the
// fewest that 20 s runs showed on two cores shared with other test binaries
// (load average 5 to 10), where a run may go on to three times its
// duration to reach them. A run with less did too little for its "0
// violations" to mean anything, whatever the cause: a workload that stopped
// acquiring, a fencing regression, a nemesis that stopped.
var nemMinRates = []nemRate{
	{"acquires", 0.4, ""},              // 24 to 119 in the runs measured
	{"multi-key acquires", 0.05, ""},   // AcquireAll and TryAcquireAll of two or three keys
	{"extends", 0.1, ""},               // 4 to 17
	{"do", 0.1, ""},                    // 4 to 29
	{"keep-alive looks", 2, ""},        // 181 to 1,105
	{"fenced locks", 0.2, ""},          // 10 to 43
	{"fenced writes", 1.5, ""},         // 65 to 811
	{"stale writes refused", 0.05, ""}, // 2 to 6
	{"faults", 0.5, ""},                // 27 to 163
	// Shared Locks, in 20 s runs on two cores at load average 2: the
	// quarter of the fewest, rounded up, allows for a heavier load. A
	// shared Do that returned nil (0 to 2 in 20 s) is too rare to
	// require.
	{"shared acquires", 0.05, "shared"},  // 3 to 17
	{"readers together", 0.02, "shared"}, // 1 to 16: pairs of shared Locks whose windows on a key overlap
	// Permits, in six 20 s runs on two cores at load average 0.2 to 1.8:
	// a quarter of the fewest, as for shared Locks (at least one each).
	{"permit acquires", 0.2, "permits"},   // 18 to 29
	{"permit extends", 0.025, "permits"},  // 2 to 7
	{"permit do", 0.025, "permits"},       // 2 to 8: a permit's Do that returned nil
	{"permits together", 0.05, "permits"}, // 5 to 13: pairs of permits whose windows on a key overlap
	{"permits full", 0.025, "permits"},    // 2 to 7: times a key's n permits all came to hold at once
}

// nemRate is the least of an activity per second; with needs ("shared",
// "permits"), only in a run with shared Locks, or with permits.
type nemRate struct {
	name   string
	perSec float64
	needs  string
}

// minRates are the nemMinRates that apply to run.
func (run *nemRun) minRates() []nemRate {
	return slices.DeleteFunc(slices.Clone(nemMinRates), func(m nemRate) bool {
		return m.needs == "shared" && !run.shared || m.needs == "permits" && !run.permits
	})
}

// activity counts what the run did that the checker judged: the Locks
// acquired (and re-entered), those of several keys, those shared, the
// Extends and Do calls that succeeded (and the shared Dos), the pairs of
// shared Locks that held a key together, the KeepAlive contexts seen live,
// the exclusive Locks of fenced Clients, the fenced writes accepted and the stale
// ones refused, and the faults injected, in all and by kind; and apart,
// the permits acquired, their Extends and Do calls that succeeded, their
// pairs that held a key together and the times a key's permits were all
// held.
func (run *nemRun) activity(r *history.Record, v *history.Verdict) map[string]int {
	a := map[string]int{
		"extends":              run.rec.result("extend", nil) + run.rec.result("extend-shared", nil),
		"stale writes refused": v.StaleRefused,
		"readers together":     v.SharedTogether,
		"permit extends":       run.rec.result("extend-permit", nil),
		"permits together":     v.PermitsTogether,
		"permits full":         v.PermitsFull,
		"faults":               int(run.faults.Load()),
	}
	for _, l := range r.Locks {
		switch {
		case l.Do && l.DoNil && l.Permits > 0:
			a["permit do"]++
		case l.Do && l.DoNil:
			a["do"]++
			if l.Shared {
				a["shared do"]++
			}
		case !l.Do && l.Permits > 0:
			a["permit acquires"] += len(l.Acquires)
		case !l.Do:
			a["acquires"] += len(l.Acquires)
			if len(l.Keys) > 1 {
				a["multi-key acquires"] += len(l.Acquires)
			}
			if l.Shared {
				a["shared acquires"] += len(l.Acquires)
			}
			if l.Fenced && !l.Shared {
				a["fenced locks"]++ // a shared one has no fence
			}
		}
	}
	for _, o := range r.Leases {
		if o.Live {
			a["keep-alive looks"]++
		}
	}
	for _, w := range r.Writes {
		if w.Accepted {
			a["fenced writes"]++
		}
	}
	for _, k := range run.kinds {
		a["fault: "+k] = int(run.byKind[k].Load())
	}
	return a
}

// shortfall lists what the run did less of than it must for its duration
// d: the minimum of each activity (nemMinRates), and every kind of fault at
// least once per round of kinds that its faults allowed.
func (run *nemRun) shortfall(r *history.Record, v *history.Verdict, d time.Duration) []string {
	a := run.activity(r, v)
	var out []string
	for _, m := range run.minRates() {
		if least := max(1, int(m.perSec*d.Seconds())); a[m.name] < least {
			out = append(out, fmt.Sprintf("%d %s, fewer than %d", a[m.name], m.name, least))
		}
	}
	least := max(1, a["faults"]/len(run.kinds))
	for _, k := range run.kinds {
		if a["fault: "+k] < least {
			out = append(out, fmt.Sprintf("%d faults %s of %d, fewer than %d", a["fault: "+k], k, a["faults"], least))
		}
	}
	return out
}

// requireActivity logs what the run did and fails t if it did less than
// it must for its duration d (shortfall): then it checked too little for
// its "0 violations" to mean anything.
func (run *nemRun) requireActivity(t *testing.T, r *history.Record, v *history.Verdict, d time.Duration) {
	t.Helper()
	a := run.activity(r, v)
	var parts []string
	for _, m := range run.minRates() {
		parts = append(parts, fmt.Sprintf("%s %d (≥ %d)", m.name, a[m.name], max(1, int(m.perSec*d.Seconds()))))
	}
	for _, k := range run.kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, a["fault: "+k]))
	}
	t.Logf("activity: %s", strings.Join(parts, ", "))
	for _, s := range run.shortfall(r, v, d) {
		t.Errorf("seed %d: %s in a run of %v: the run checked too little", run.seed, s, d)
	}
}

// ownerHint says what an overlap has to do with owners, to sort findings:
// a Lock of an owner whose key another Lock of the same owner (from this
// Client or another) released, or whose first Acquire ran at the same time
// as another Lock's of the same owner in the same Client.
// With short, it names the kind of involvement only.
func ownerHint(r *history.Record, f history.Violation, short bool) string {
	var hints []string
	for _, a := range f.Holds {
		if a.Owner == "" || len(a.Acquires) == 0 {
			continue
		}
		for _, o := range r.Locks {
			if o.ID == a.ID || o.Owner != a.Owner || o.Key != a.Key || len(o.Acquires) == 0 {
				continue
			}
			for _, rel := range o.Releases {
				if !rel.Start.Before(a.Acquires[0].Start) && rel.Start.Before(f.At) {
					hints = append(hints, fmt.Sprintf("lock #%d of the same owner (%s) released during lock #%d's hold", o.ID, o.Client, a.ID))
					if short {
						hints[len(hints)-1] = "another Lock of the owner released"
					}
					break
				}
			}
			same := strings.Split(o.Client, "@")[1] == strings.Split(a.Client, "@")[1]
			if same && o.Acquires[0].Start.Before(a.Acquires[0].End) && a.Acquires[0].Start.Before(o.Acquires[0].End) {
				hints = append(hints, fmt.Sprintf("lock #%d of the same owner acquired at the same time in the same Client", o.ID))
				if short {
					hints[len(hints)-1] = "concurrent Acquires of the owner in one Client"
				}
			}
		}
	}
	if len(hints) == 0 {
		for _, a := range f.Holds {
			if a.Owner != "" {
				return "an owner's Lock, no other Lock of the owner"
			}
		}
		return "no owner involved"
	}
	slices.Sort(hints)
	return strings.Join(slices.Compact(hints), "; ")
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, within time.Duration, msg string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatal(msg)
	}
}

// probes acquires every key at once, once healed and the workers stopped;
// then, in a run with shared Locks, every key shared at once, so that
// readers are not locked out either (by a writer's announcement left on a
// node, say); then, in a run with permits, every permit of every
// semaphore key at once, so that no slot is locked out (by an entry left
// on a node, say), each in a slot of its own.
func (run *nemRun) probes(bound time.Duration) []history.Probe {
	c := run.slots[0].c.Load()
	probe := func(shared bool) []history.Probe {
		var opts []redlock.AcquireOption
		if shared {
			opts = append(opts, redlock.Shared())
		}
		out := make([]history.Probe, len(run.keys))
		var wg sync.WaitGroup
		for i, key := range run.keys {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), bound+5*time.Second)
				defer cancel()
				start := time.Now()
				l, err := c.Acquire(ctx, key, time.Second, opts...)
				out[i] = history.Probe{Key: key, Shared: shared, Took: time.Since(start), Err: err}
				if err == nil {
					_ = l.Release(ctx)
				}
			})
		}
		wg.Wait()
		return out
	}
	out := probe(false)
	if run.shared {
		out = append(out, probe(true)...)
	}
	if run.permits {
		for _, sem := range run.sems {
			out = append(out, run.probePermits(c, sem, bound))
		}
	}
	return out
}

// probePermits acquires the n permits of sem at once, then releases them:
// the Probe took as long as the slowest, and failed with the first error,
// or if two permits were given one slot.
func (run *nemRun) probePermits(c *redlock.Client, sem nemSem, bound time.Duration) history.Probe {
	ctx, cancel := context.WithTimeout(context.Background(), bound+5*time.Second)
	defer cancel()
	p := history.Probe{Key: sem.key, Permits: sem.n}
	var mu sync.Mutex
	var held []*redlock.Lock
	var wg sync.WaitGroup
	for range sem.n {
		wg.Go(func() {
			start := time.Now()
			l, err := c.Acquire(ctx, sem.key, time.Second, redlock.Permits(sem.n))
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			p.Took = max(p.Took, took)
			if err != nil && p.Err == nil {
				p.Err = err
			}
			if l != nil {
				held = append(held, l)
			}
		})
	}
	wg.Wait()
	slots := make(map[int]bool)
	for _, l := range held {
		s, _ := l.Permit()
		if slots[s] && p.Err == nil {
			p.Err = fmt.Errorf("two permits in slot %d", s)
		}
		slots[s] = true
		_ = l.Release(ctx)
	}
	return p
}

// leftovers lists the lock keys of this run that a node still holds, fence
// counters and tombstones aside.
func (run *nemRun) leftovers(t *testing.T) []history.NodeKey {
	t.Helper()
	var out []history.NodeKey
	prefix := fmt.Sprintf("nem:%d:", run.seed)
	for i, d := range run.bed.Direct {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		keys, err := d.Keys(ctx, prefix+"*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			if strings.Contains(k, ":redlock:fence") || strings.HasSuffix(k, ":warm") {
				continue
			}
			v := nodetest.Get(t, ctx, d, k) // GET expires a key that is due
			if v == "" {
				continue
			}
			// A tombstone reads as an absent key and lives at most two
			// seconds (doc.go): one is no leftover, unless it lives longer.
			if strings.HasPrefix(v, "!") {
				ttl, err := d.PTTL(ctx, k).Result()
				require.NoError(t, err)
				if ttl >= 0 && ttl <= 2*time.Second {
					continue
				}
			}
			out = append(out, history.NodeKey{Node: i, Key: k, Value: v})
		}
		cancel()
	}
	return out
}

// nemesis injects faults until stop, then heals every one.
func (run *nemRun) nemesis(t *testing.T, stop <-chan struct{}, d time.Duration) {
	r := rand.New(rand.NewPCG(run.seed, 1))
	n := len(run.bed.Servers)
	limit := (n - 1) / 2
	if *nemMajority {
		limit = n
	}
	type active struct {
		kind string
		till time.Time
	}
	on := make(map[int]active)
	// The kinds come in rounds, each kind once per round in a seeded
	// order, so that a run of k rounds injects every kind k times.
	var round []string
	next := func() string {
		if len(round) == 0 {
			round = slices.Clone(run.kinds)
			r.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		k := round[0]
		round = round[1:]
		return k
	}
	closeAt := time.Now().Add(d/3 + randDur(r, 0, d/3))
	closed := false
	for {
		select {
		case <-stop:
			for i, f := range on {
				run.heal(t, i, f.kind)
			}
			return
		case <-time.After(randDur(r, run.gap[0], run.gap[1])):
		}
		now := time.Now()
		for i, f := range on {
			if now.After(f.till) {
				run.heal(t, i, f.kind)
				delete(on, i)
			}
		}
		if !closed && now.After(closeAt) && len(run.slots) > 0 && run.guarded {
			// A Client closed mid-run, its workers moved to a new one.
			closed = true
			s := run.slots[0]
			old := s.c.Load()
			s.c.Store(s.make())
			run.closing.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = old.Close(ctx)
			})
		}
		if len(on) >= limit {
			continue
		}
		var free []int
		for i := range n {
			if _, busy := on[i]; !busy {
				free = append(free, i)
			}
		}
		i := free[r.IntN(len(free))]
		kind := next()
		run.byKind[kind].Add(1)
		run.faults.Add(1)
		run.rec.event(time.Now(), nil, "fault: %s on node %d", kind, i)
		if run.inject(t, r, i, kind) {
			on[i] = active{kind, time.Now().Add(randDur(r, run.down[0], run.down[1]))}
		}
	}
}

// inject starts a fault on node i and reports whether it lasts until heal.
func (run *nemRun) inject(t *testing.T, r *rand.Rand, i int, kind string) bool {
	p, s := run.bed.Proxies[i], run.bed.Servers[i]
	switch kind {
	case "blackhole":
		p.SetBlackhole(true)
	case "delay":
		p.SetDelay(randDur(r, time.Millisecond, 300*time.Millisecond))
	case "drop-replies":
		p.SetDropReplies(true)
	case "hold":
		p.HoldNext(nil)
	case "pause":
		if err := s.Pause(); err != nil {
			t.Errorf("pause node %d: %v", i, err)
			return false
		}
	case "crash", "restart-empty":
		p.SetRefuse(true)
		if err := s.Kill(); err != nil {
			t.Errorf("kill node %d: %v", i, err)
		}
	case "flushall":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := run.bed.Direct[i].FlushAll(ctx).Err(); err != nil {
			t.Errorf("flushall node %d: %v", i, err)
		}
		return false
	default:
		panic("nemesis: unknown fault " + kind)
	}
	return true
}

// heal ends the fault on node i. A node that was killed comes back with its
// data, or empty for restart-empty, and with the scripts loaded, before its
// proxy lets clients in again.
func (run *nemRun) heal(t *testing.T, i int, kind string) {
	defer run.rec.event(time.Now(), nil, "healed: %s on node %d", kind, i)
	p, s := run.bed.Proxies[i], run.bed.Servers[i]
	switch kind {
	case "blackhole":
		p.SetBlackhole(false)
	case "delay":
		p.SetDelay(0)
	case "drop-replies":
		p.SetDropReplies(false)
	case "hold":
		p.ReleaseHeld()
	case "pause":
		if err := s.Resume(); err != nil {
			t.Errorf("resume node %d: %v", i, err)
		}
	case "crash", "restart-empty":
		if err := s.Restart(); err != nil {
			t.Errorf("restart node %d: %v", i, err)
			return
		}
		if kind == "restart-empty" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := run.bed.Direct[i].FlushAll(ctx).Err(); err != nil {
				t.Errorf("flushall node %d: %v", i, err)
			}
			cancel()
		}
		nodetest.LoadScripts(t, s.Addr())
		p.SetRefuse(false)
	}
}

func randDur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
