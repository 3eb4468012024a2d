package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
)

// Config is one run of the simulator.
type Config struct {
	Seed     uint64
	Duration time.Duration // simulated time of the workload and the faults
	Nodes    int
	Slots    int // library Clients in use at once, each a process with go-redis clients and links of its own
	Workers  int
	Keys     int
	Latency  time.Duration // a chunk's one-way delay to a near node without faults
	// Far, when set, is the longest base latency of a node away from the
	// clients: each node's is drawn from the seed (NodeLatencies), a
	// quorum near in most runs, the others from a millisecond to Far (0:
	// every node near).
	Far time.Duration
	// Skew: each node's clock starts up to this far ahead of the
	// bubble's or behind it (drawn per node), so that a node's clock
	// reading, a fence's clock part, is often above every other's and
	// its counters above the clocks of a quorum without it.
	Skew time.Duration
	// Guard is the restart guard (WithRestartGuard), 0 for none.
	Guard time.Duration
	// Unfenced: no Client fences (WithFencing), where all but one do.
	// With no guard either, a Release hands its key to a waiter of its
	// Client (docs/waiting.md), which neither fences nor guards.
	Unfenced bool
	// Faults are the kinds the nemesis draws from, one every FaultEvery
	// or so.
	Faults     []string
	FaultEvery time.Duration
	// Think bounds a worker's pause between rounds.
	Think time.Duration
	// MaxRetries is go-redis's option for every node client (0: its
	// default, 3 retries).
	MaxRetries int
	// The workload's mix (Workload).
	Owners, Shared, Permits, Multi, Stalled, Long, Elections, Hot, Quick bool
	// Handover picks what FaultHoldHandover holds (nil: that fault is
	// not made).
	Handover *HandoverFault
	// ReplaceEvery: about this often a slot's Client is closed and a new
	// one takes its place (0: never).
	ReplaceEvery time.Duration
	// ResidueBound is how long a value may outlive its writers on a quiet
	// node (history.Residue).
	ResidueBound time.Duration
	// Stop, when set, is asked every simulated second whether the findings
	// so far are enough (a control stops at the first it must make).
	Stop func(*history.Verdict) bool
	// Progress, when set, is stored the bubble's time every tick of the
	// monitor: a watchdog outside the bubble reads it.
	Progress *atomic.Int64
	// Schedule, when set, leaves out of the run the workers, rounds and
	// faults it does not name (a shrunk run: schedule.go).
	Schedule *Schedule
}

// Result is what a run found and did.
type Result struct {
	Verdict   *history.Verdict
	Record    *history.Record
	Ops       map[string]int
	OpTotal   int
	Faults    map[string]int
	Wrongs    []string
	Trace     *Trace
	Simulated time.Duration // the workload's simulated time
	Outcomes  string
	Stopped   bool // a Stop asked to end early
	// Rounds are the rounds each worker started, and Acted the
	// nemesis's faults that acted, by their place among its draws: what
	// a shrink leaves out (Schedule).
	Rounds map[int][]Round
	Acted  []Fault
	Began  time.Time // when the workload started
}

// Violations counts the findings.
func (r *Result) Violations() int { return len(r.Verdict.Found) }

// Run runs cfg inside the calling synctest bubble and judges it.
func Run(cfg Config) *Result {
	trace := NewTrace()
	w := NewWorld(cfg, trace)
	defer w.Close()
	rec := NewRecorder(trace)
	rec.procOf = w.ProcOf
	w.Net.OnWrite = rec.sent
	w.onAbandon = rec.abandoned
	store := NewStore(rec.Now)
	res := &Result{Trace: trace}

	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("sim:k%d", i)
	}
	wl := &Workload{Seed: cfg.Seed, Keys: keys, Owners: cfg.Owners, Shared: cfg.Shared, Permits: cfg.Permits,
		Multi: cfg.Multi, Stalled: cfg.Stalled, Long: cfg.Long, Elections: cfg.Elections, Hot: cfg.Hot, Quick: cfg.Quick, Think: cfg.Think, Rec: rec, Store: store, Trace: trace, Closed: w.Closed}
	if cfg.Permits {
		wl.Sems = []Sem{{"sim:sem0", 2}, {"sim:sem1", 3}}
	}
	lockKeys := slices.Clone(keys)
	for _, s := range wl.Sems {
		lockKeys = append(lockKeys, s.Key)
	}
	opts := func(slot int) []redlock.Option {
		var o []redlock.Option
		if cfg.Guard > 0 {
			o = append(o, redlock.WithRestartGuard(cfg.Guard))
		}
		if slot0Fenced(slot, cfg) {
			o = append(o, redlock.WithFencing()) // all but one, so that stale writes meet the store
		}
		h := traceHooks(trace, slot)
		traced := h.CleanupAbandoned
		h.CleanupAbandoned = func(e redlock.Event) {
			traced(e)
			w.abandoned(slot, e.Key)
		}
		return append(o, redlock.WithHooks(h))
	}
	for s := range cfg.Slots {
		c, proc, err := w.NewClient(s, opts(s)...)
		if err != nil {
			panic("sim: New: " + err.Error())
		}
		slot := &Slot{name: fmt.Sprintf("c%d", proc), fenced: slot0Fenced(s, cfg)}
		slot.c.Store(c)
		wl.Slots = append(wl.Slots, slot)
	}
	warm(wl.Slots[0].Client(), cfg.Guard)
	trace.Add("check", -1, "warm: every node past its guard; the workload starts")

	nm := NewNemesis(w, cfg.Seed, cfg.Faults, cfg.FaultEvery, cfg.Guard)
	nm.handover = cfg.Handover
	nm.Schedule = cfg.Schedule
	stop := make(chan struct{})
	var bg sync.WaitGroup
	began := time.Now()

	mon := &monitor{w: w, nm: nm, rec: rec, keys: lockKeys, bound: cfg.ResidueBound, seen: make(map[string]*finding), since: make(map[string]time.Time), progress: cfg.Progress}
	monStop := make(chan struct{})
	var monDone sync.WaitGroup
	monDone.Go(func() { mon.run(monStop) })

	var nemDone sync.WaitGroup
	if len(cfg.Faults) > 0 {
		nemDone.Go(func() { nm.Run(stop) })
	}
	wl.Schedule, wl.Began = cfg.Schedule, began
	for i := range cfg.Workers {
		if cfg.Schedule.runs(i) {
			bg.Go(func() { wl.Run(i, stop) })
		}
	}
	if cfg.ReplaceEvery > 0 {
		bg.Go(func() { replace(w, wl, cfg, opts, stop) })
	}

	deadline := began.Add(cfg.Duration)
	for time.Now().Before(deadline) {
		time.Sleep(min(time.Second, time.Until(deadline)))
		if cfg.Stop != nil {
			r := record(rec, store, cfg)
			r.Seen, r.Down = mon.seenValues(), nm.Down()
			r.Busy = nm.Busy()
			v := history.Check(r)
			v.Found = append(v.Found, mon.found()...)
			if cfg.Stop(v) {
				res.Stopped = true
				break
			}
		}
	}
	res.Simulated, res.Began = time.Since(began), began
	wl.stopping.Store(true)
	trace.Add("check", -1, "the workload stops; the faults heal")
	close(stop)
	nemDone.Wait()
	bg.Wait()
	healed := time.Now()
	trace.Add("check", -1, "every fault healed, every worker stopped")

	r := record(rec, store, cfg)
	if !res.Stopped {
		// Held chunks land within 5 s, and the monitor looks on, until
		// the probes, whose values it would not know; then every key
		// must be free at once: every Lock was released and a node
		// restarted at the heal votes after its guard.
		time.Sleep(5*time.Second + cfg.ResidueBound + monitorTick)
	}
	close(monStop)
	monDone.Wait()
	if !res.Stopped {
		r.Bound = cfg.Guard + 3*time.Second
		r.Probes = probes(wl.Slots[0].Client(), keys, wl.Sems, cfg.Shared, r.Bound)
		trace.Add("check", -1, "probes done, %v after the heal", time.Since(healed).Round(time.Millisecond))
	}
	for _, p := range w.Procs() {
		if err := w.CloseProc(p, time.Minute); err != nil {
			rec.wrong("Close of c%d: %v", p, err)
		}
	}
	if !res.Stopped {
		// Refusals live until their writes' deadlines, waiting rooms a
		// second: anything else left after two is a leftover.
		time.Sleep(2*time.Second + 100*time.Millisecond)
		r.Leftovers = leftovers(w, lockKeys)
	}
	r.Seen, r.Down = mon.seenValues(), nm.Down()
	r.Busy = nm.Busy()
	v := history.Check(r)
	v.Found = append(v.Found, mon.found()...)
	res.Verdict, res.Record = v, r
	res.Ops, res.OpTotal = rec.OpCounts()
	res.Faults = nm.Counts()
	res.Rounds, res.Acted = wl.Started(), nm.Acted(began)
	res.Wrongs = rec.Wrongs()
	res.Outcomes = rec.Outcomes()
	return res
}

func slot0Fenced(s int, cfg Config) bool {
	return !cfg.Unfenced && (s < cfg.Slots-1 || cfg.Slots == 1)
}

// record is the history so far, with the store's decisions.
func record(rec *Recorder, store *Store, cfg Config) *history.Record {
	r := rec.Record()
	r.Writes = store.Writes()
	r.Slack = time.Millisecond // the bubble's timers fire on time: what a late signal may take is its recording's
	r.Drift = Drift
	// A node's round trip without faults is two one-way delays, each up
	// to its base latency; a refusal for latency is judged once a quorum
	// of near nodes has been quiet for LatencyQuiet.
	bases := NodeLatencies(cfg)
	for i := range cfg.Nodes {
		b := cfg.Latency
		if i < len(bases) {
			b = bases[i]
		}
		r.RoundTrips = append(r.RoundTrips, 2*b)
	}
	r.LatencyQuiet = LatencyQuiet
	return r
}

// LatencyQuiet is how long a quorum of near nodes must have been free of
// faults for a Client's refusal of a TTL as too short for the nodes'
// latency to be a finding (the latency rule): time for its estimates to
// come back down after a node was far, or stopped and answered late.
const LatencyQuiet = 3 * time.Second

// warm waits until a guarded acquire holds on every node: a node the guard
// has not seen votes only a guard after the first guarded acquire reached
// it, as at any deployment.
func warm(c *redlock.Client, guard time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), guard+time.Minute)
	defer cancel()
	if err := c.Warm(ctx); err != nil {
		panic("sim: Warm: " + err.Error())
	}
	l, err := c.Acquire(ctx, "sim:warm", time.Second)
	if err != nil {
		panic("sim: warm acquire: " + err.Error())
	}
	_ = l.Release(ctx)
	time.Sleep(guard) // every node's guard passed, the others' too
}

// replace closes a slot's Client about every cfg.ReplaceEvery, and puts a
// new one (a new process) in its place at once; the workers that used it
// see ErrClosed from their calls in flight.
func replace(w *World, wl *Workload, cfg Config, opts func(int) []redlock.Option, stop <-chan struct{}) {
	for i := 0; ; i++ {
		if !sleep(stop, cfg.ReplaceEvery) {
			return
		}
		s := i % len(wl.Slots)
		slot := wl.Slots[s]
		old := slot.Client()
		c, proc, err := w.NewClient(s, opts(s)...)
		if err != nil {
			panic("sim: New: " + err.Error())
		}
		slot.c.Store(c)
		for _, p := range w.Procs() {
			w.mu.Lock()
			mine := w.libs[p] == old
			w.mu.Unlock()
			if mine {
				w.Trace.Add("op", -1, "close c%d, c%d in its place", p, proc)
				err := w.CloseProc(p, time.Minute)
				w.Trace.Add("op", -1, "close of c%d: %v", p, err)
			}
		}
	}
}

// probes acquires every key once the faults are healed: exclusive, then
// shared (the first three keys), and all n permits of each semaphore key
// at once; each must succeed within bound.
func probes(c *redlock.Client, keys []string, sems []Sem, shared bool, bound time.Duration) []history.Probe {
	var out []history.Probe
	one := func(key string, opts ...redlock.AcquireOption) (*redlock.Lock, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), bound+time.Second)
		defer cancel()
		start := time.Now()
		l, err := c.Acquire(ctx, key, time.Second, opts...)
		return l, time.Since(start), err
	}
	release := func(l *redlock.Lock) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Release(ctx)
	}
	for i, key := range keys {
		l, took, err := one(key)
		out = append(out, history.Probe{Key: key, Took: took, Err: err})
		if l != nil {
			release(l)
		}
		if shared && i < 3 {
			l, took, err := one(key, redlock.Shared())
			out = append(out, history.Probe{Key: key, Shared: true, Took: took, Err: err})
			if l != nil {
				release(l)
			}
		}
	}
	for _, s := range sems {
		p := history.Probe{Key: s.Key, Permits: s.N}
		var held []*redlock.Lock
		for range s.N {
			l, took, err := one(s.Key, redlock.Permits(s.N))
			p.Took = max(p.Took, took)
			if err != nil && p.Err == nil {
				p.Err = err
			}
			if l != nil {
				held = append(held, l)
			}
		}
		for _, l := range held {
			release(l)
		}
		out = append(out, p)
	}
	return out
}

// leftovers lists the lock keys a node still holds after every Client
// closed and the refusals' life passed.
func leftovers(w *World, lockKeys []string) []history.NodeKey {
	var out []history.NodeKey
	for _, n := range w.Nodes {
		for _, kv := range n.Keys("sim:") {
			if !slices.Contains(lockKeys, kv.Key) {
				continue
			}
			if !history.IsHolder(kv.Value) && kv.TTL <= 2*time.Second {
				continue
			}
			out = append(out, history.NodeKey{Node: n.ID, Key: kv.Key, Value: kv.Value, Raw: kv.Value, TTL: kv.TTL})
		}
	}
	return out
}

// monitor looks at every node's lock keys every tick while the run goes
// on, and judges each value by the residue rule on nodes that have been
// quiet: no fault acting on them or their links, no held chunk on its way.
type monitor struct {
	w        *World
	nm       *Nemesis
	rec      *Recorder
	keys     []string
	bound    time.Duration
	progress *atomic.Int64

	since map[string]time.Time // node/key/value: when the monitor first saw it
	looks int                  // looks so far
	mu    sync.Mutex
	seen2 []history.NodeKey   // the values seen, for the nemesis's late-write rule (history.Record.Seen): each when it appears, then every second
	seen  map[string]*finding // node/key/value reported
	finds []*finding
}

// finding is a residue finding, followed until the value is gone.
type finding struct {
	v        history.Violation
	last     time.Time     // the last look that saw the value
	lastTTL  time.Duration // its TTL then
	gone     bool
	goneSeen time.Time // the first look that did not see it
}

const monitorTick = 250 * time.Millisecond

func (m *monitor) run(stop <-chan struct{}) {
	for {
		if m.progress != nil {
			m.progress.Store(time.Now().UnixNano())
		}
		if !sleep(stop, monitorTick) {
			return
		}
		m.look()
	}
}

func (m *monitor) look() {
	now := time.Now()
	m.looks++
	for i, n := range m.w.Nodes {
		kvs := n.Keys("sim:")
		// A shared or permits entry past its deadline on the node's clock
		// holds nothing, as the scripts read it.
		nodeNow := n.Now()
		for j := range kvs {
			kvs[j].Value = history.LiveValue(kvs[j].Value, nodeNow)
		}
		kvs = slices.DeleteFunc(kvs, func(kv KeyValue) bool { return kv.Value == "" })
		present := make(map[string]bool, len(kvs))
		holders := make([][]history.Writer, len(kvs))
		for j, kv := range kvs {
			if !slices.Contains(m.keys, kv.Key) {
				continue
			}
			holders[j] = history.Holding(kv.Value, m.rec.Writers(kv.Key))
			id := valueID(i, kv, holders[j])
			present[id] = true
			_, known := m.since[id]
			if !known {
				m.since[id] = now
			}
			if !known || m.looks%int(time.Second/monitorTick) == 0 {
				m.mu.Lock()
				m.seen2 = append(m.seen2, history.NodeKey{Node: i, Key: kv.Key, Value: kv.Value, Raw: kv.Value, TTL: kv.TTL, At: now})
				m.mu.Unlock()
			}
		}
		prefix := fmt.Sprintf("%d/", i)
		for id := range m.since {
			if strings.HasPrefix(id, prefix) && !present[id] {
				delete(m.since, id)
			}
		}
		m.mu.Lock()
		for j, kv := range kvs {
			if f := m.seen[valueID(i, kv, holders[j])]; f != nil && !f.gone {
				f.last, f.lastTTL = now, kv.TTL
			}
		}
		for id, f := range m.seen {
			if strings.HasPrefix(id, prefix) && !present[id] && !f.gone {
				f.gone, f.goneSeen = true, now
			}
		}
		m.mu.Unlock()
		if !n.Up() {
			continue
		}
		for j, kv := range kvs {
			if !slices.Contains(m.keys, kv.Key) {
				continue
			}
			quiet, ok := m.quiet(i, holders[j])
			if !ok || now.Sub(quiet) <= m.bound {
				continue
			}
			s := history.Sighting{Node: i, Key: kv.Key, Value: kv.Value, TTL: kv.TTL, At: now, Quiet: quiet}
			v, bad := history.Residue(s, m.rec.Writers(kv.Key), m.rec.Acquiring(kv.Key), m.bound)
			if !bad {
				continue
			}
			id := valueID(i, kv, holders[j])
			v.Detail += fmt.Sprintf("; on the node since %s at least", Since(m.w.Trace.start, m.since[id]))
			m.mu.Lock()
			if m.seen[id] == nil {
				f := &finding{v: v, last: now, lastTTL: kv.TTL}
				m.seen[id] = f
				m.finds = append(m.finds, f)
				m.w.Trace.AddKeys("check", i, []string{kv.Key}, "residue: %s", v.Detail)
			}
			m.mu.Unlock()
		}
	}
}

// valueID names a node's value of a key by the Locks whose tokens it
// holds, or by itself when it holds none known: a shared or permits'
// value that changes as other Locks come and go is one value to follow
// while it holds the same Locks' entries.
func valueID(node int, kv KeyValue, holders []history.Writer) string {
	if len(holders) == 0 {
		return fmt.Sprintf("%d/%s/%s", node, kv.Key, kv.Value)
	}
	ids := make([]string, len(holders))
	for i, w := range holders {
		ids[i] = w.Token
	}
	slices.Sort(ids)
	return fmt.Sprintf("%d/%s/%s", node, kv.Key, strings.Join(slices.Compact(ids), ","))
}

// quiet says since when what may delay the deletes of a value's writers
// on node i has been quiet, and whether it is now: the faults on the links
// of their processes to the node and on the node, and the chunks held back
// on those links; for a value no known Lock wrote (a failed attempt's),
// or one of several processes' Locks, every link to the node.
func (m *monitor) quiet(i int, holders []history.Writer) (time.Time, bool) {
	proc := -1
	for j, w := range holders {
		p := m.rec.Proc(w.ID)
		if p < 0 || j > 0 && p != proc {
			proc = -1
			break
		}
		proc = p
	}
	if proc < 0 {
		q, ok := m.nm.Quiet(i)
		return history.Latest(q, m.w.Net.Landed(i)), ok && m.w.Net.Pending(i) == 0
	}
	q, ok := m.nm.QuietLink(proc, i)
	pending, landed := m.w.Net.LinkPending(proc, i)
	return history.Latest(q, landed), ok && pending == 0
}

// seenValues returns the values seen, for history.Record.Seen.
func (m *monitor) seenValues() []history.NodeKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen2)
}

func (m *monitor) found() []history.Violation {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]history.Violation, 0, len(m.finds))
	for _, f := range m.finds {
		v := f.v
		switch {
		case !f.gone:
			v.Detail += fmt.Sprintf("; still there at %s (ttl %v)", Since(m.w.Trace.start, f.last), f.lastTTL)
		case f.goneSeen.Sub(f.last) > monitorTick+time.Millisecond:
			v.Detail += fmt.Sprintf("; last seen at %s (ttl %v), gone by %s (the node was down or the run ended)", Since(m.w.Trace.start, f.last), f.lastTTL, Since(m.w.Trace.start, f.goneSeen))
		case f.lastTTL <= monitorTick:
			v.Detail += fmt.Sprintf("; there until it expired at %s", Since(m.w.Trace.start, f.last.Add(f.lastTTL)))
		default:
			// A delete came late, or (shared Locks, permits) the entry
			// expired on its own in a key that lives longer.
			v.Detail += fmt.Sprintf("; gone between %s and %s, the key's ttl then %v", Since(m.w.Trace.start, f.last), Since(m.w.Trace.start, f.goneSeen), f.lastTTL.Round(time.Millisecond))
		}
		out = append(out, v)
	}
	return out
}

// faultLine and opLine name the counts of a summary line in a fixed
// order.
func countsLine(counts map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// Summary is the run's line.
func (r *Result) Summary(cfg Config) string {
	faults := 0
	for _, n := range r.Faults {
		faults += n
	}
	var ops []string
	for _, k := range opKinds {
		ops = append(ops, fmt.Sprintf("%s %d", k.name, r.Ops[k.name]))
	}
	return fmt.Sprintf("sim: seed %d, %d nodes, %d clients, %d workers, %v simulated, %d ops (%s), %d faults (%s), %d violations (%s), stale writes refused %d (within the writer's claim %d), accepted %d, TTLs refused for latency %d, history %s",
		cfg.Seed, cfg.Nodes, cfg.Slots, cfg.Workers, r.Simulated.Round(time.Second), r.OpTotal, strings.Join(ops, ", "),
		faults, countsLine(r.Faults), r.Violations(), r.Verdict.Counts(), r.Verdict.StaleRefused, r.Verdict.OverlapRefused, r.Verdict.StaleAccepted, r.Verdict.LatencyRefusals, r.Hash())
}

// Report describes the findings, each with the trace around it.
func (r *Result) Report(max int) string {
	var b strings.Builder
	for i, f := range r.Verdict.Found {
		if i == max {
			fmt.Fprintf(&b, "... and %d more findings\n", len(r.Verdict.Found)-max)
			break
		}
		fmt.Fprintf(&b, "%s: %s\n", f.Kind, f.Detail)
		if !f.At.IsZero() {
			fmt.Fprintf(&b, "trace of %q around it:\n%s\n", f.Key, r.Trace.Around(f.Key, f.At, MaxTTL, time.Second, 150))
		}
	}
	for _, s := range r.Wrongs {
		fmt.Fprintf(&b, "wrong: %s\n", s)
	}
	return b.String()
}

// traceHooks puts what a Client does in the background into the trace: its
// deletes parked for another try and those Close gave up; with
// TraceCommandsOf set, also every node error of a delete. A value left on a
// node is explained by them.
func traceHooks(trace *Trace, slot int) redlock.Hooks {
	h := redlock.Hooks{
		CleanupRetry: func(e redlock.Event) {
			trace.AddKeys("lib", e.Node, []string{e.Key}, "slot %d: delete of %q on n%d parked after try %d for %v", slot, e.Key, e.Node, e.Attempt, e.Wait)
		},
		CleanupAbandoned: func(e redlock.Event) {
			trace.AddKeys("lib", e.Node, []string{e.Key}, "slot %d: delete of %q on n%d given up after %d tries: %v", slot, e.Key, e.Node, e.Attempt, e.Err)
		},
	}
	if TraceCommandsOf != "" {
		h.NodeError = func(e redlock.Event) {
			if e.Op == "delete" {
				trace.AddKeys("lib", e.Node, []string{e.Key}, "slot %d: delete of %q on n%d: %v", slot, e.Key, e.Node, e.Err)
			}
		}
	}
	return h
}
