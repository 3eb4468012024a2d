package main

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/benchkit"
)

// Targets for redlock's rows, from the fast-path issue; floors are the bare
// floor (pingfloor.Bare).
const (
	targetFloor    = 1.2 // uncontended p50 ÷ bare floor, N ≥ 3 and with one slow or silent node
	targetFailFast = 0.9 // uncontended p50 ÷ redsync WithFailFast's, N ≥ 3
	targetAllocs5  = 100 // allocations per Acquire+Release at N = 5
	targetManyKeys = 0.9 // many keys: locks/s ÷ the bare floor's pairs/s
)

// Targets for several keys: AcquireAll's uncontended p50 ÷
// Acquire's, both redlock's defaults, in the same interleaved rounds.
const (
	targetAll1 = 1.05 // one key: within noise of Acquire
	targetAll8 = 1.3  // eight keys: one script per node, not a round trip per key
)

// Targets of throughput, for redlock's rows.
const (
	targetKeysVsRedsync = 3.0  // many keys, 64 goroutines: locks/s ÷ redsync's
	targetKeysVsBare    = 2.0  // many keys, 64 goroutines: locks/s ÷ the bare (unbatched) floor's
	targetKeysVsBatched = 0.5  // many keys, 64 goroutines: locks/s ÷ the batched minimal deadline lock's
	targetKeysWorkers   = 64   // the many-keys scenarios those three apply to
	targetVsMutex       = 0.9  // 16 goroutines on one key: locks/s ÷ the local mutex's
	targetWaitVsMutex   = 1.25 // 16 goroutines on one key: wait p99 ÷ the local mutex's
)

// Targets of waiting, for redlock's rows.
const (
	targetWaitP99     = 20 * time.Millisecond // 16 goroutines: each acquirer's wait, p99
	targetVsRedsync   = 2.0                   // 16 goroutines: locks/s ÷ redsync's defaults
	targetFairShare   = 0.5                   // multi-process: the lowest process's share ÷ a fair share
	targetCmdsGrowth  = 1.25                  // N=5: commands per acquisition, 64 waiters ÷ 16 waiters
	targetScriptsPerN = 4                     // N=5: script calls per acquisition ≤ 4 × N (an acquire and a release are 2 × N)
)

// goal is one target for redlock's row in a scenario, and whether it was met.
type goal struct {
	text     string
	measured string
	met      bool
	info     bool // no target: figures beside the peers'
}

func (g goal) metText() string {
	if g.info {
		return "(figures)"
	}
	return yesNo(g.met)
}

// goals are the targets for redlock's row in an uncontended scenario; none
// when the scenario has none.
func goals(r *result, st stats) []goal {
	bare, okB := statsOf(r.get(nameBare))
	var out []goal
	vsBare := func(what string) {
		if okB {
			x := ratio(st.p50, bare.p50)
			out = append(out, goal{fmt.Sprintf("p50 ≤ %.1f × bare floor%s", targetFloor, what),
				fmt.Sprintf("%s µs = %.2f × %s µs", us(st.p50), x, us(bare.p50)), x <= targetFloor, false})
		}
	}
	switch {
	case r.sc.slow > 0:
		if r.sc.faultTarget {
			vsBare(" of the fast nodes")
		}
		return out
	case r.sc.nodes == 1:
		if rl, ok := statsOf(r.get(nameRedislock)); ok {
			out = append(out,
				goal{"p50 ≤ redislock's", fmt.Sprintf("%s µs vs %s µs", us(st.p50), us(rl.p50)), st.p50 <= rl.p50, false},
				goal{"allocs ≤ redislock's", fmt.Sprintf("%.1f vs %.1f", st.allocs, rl.allocs), st.allocs <= rl.allocs, false})
		}
		return out
	}
	vsBare("")
	if ff, ok := statsOf(r.get(nameRedsyncFF)); ok {
		x := ratio(st.p50, ff.p50)
		out = append(out, goal{fmt.Sprintf("p50 ≤ %.1f × redsync-failfast", targetFailFast),
			fmt.Sprintf("%.2f × %s µs", x, us(ff.p50)), x <= targetFailFast, false})
	}
	if r.sc.nodes == 5 {
		out = append(out, goal{fmt.Sprintf("allocs ≤ %d", targetAllocs5), fmt.Sprintf("%.1f", st.allocs), st.allocs <= targetAllocs5, false})
	}
	return out
}

// stats are the figures derived from one sample.
type stats struct {
	n        int
	p50, p99 time.Duration
	allocs   float64 // per op; uncontended only
	rate     float64 // ops per second of busy time
}

func statsOf(s *sample) (st stats, ok bool) {
	if s == nil || len(s.lat) == 0 {
		return stats{}, false
	}
	d := slices.Clone(s.lat)
	st = stats{n: len(d), p50: benchkit.Percentile(d, 50), p99: benchkit.Percentile(d, 99)}
	if s.allocOps > 0 {
		st.allocs = float64(s.mallocs) / float64(s.allocOps)
	}
	if s.ops > 0 {
		if s.busy > 0 {
			st.rate = float64(s.ops) / s.busy.Seconds()
		}
	}
	return st, true
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// report writes the markdown: the setup, one table per kind of workload, and
// the targets.
func report(w io.Writer, cfg config, results []*result, took time.Duration) {
	fmt.Fprintf(w, "# redlock vs redsync vs redislock\n\n")
	writeSetup(w, cfg, took)
	writeUncontended(w, results)
	writeNetwork(w, cfg, results)
	writeContention(w, results)
	writeMultiProc(w, results)
	writeManyKeys(w, results)
	writeNodes(w, results)
	writeTargets(w, results)
}

func writeSetup(w io.Writer, cfg config, took time.Duration) {
	fmt.Fprintf(w, "%s; %s %s/%s, GOMAXPROCS=%d, %d CPUs; %s; run took %v.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.GOMAXPROCS(0), runtime.NumCPU(), redisVersion(), took.Round(time.Second))
	fmt.Fprintf(w, "Modules: %s.\n\n", moduleVersions())
	fmt.Fprintf(w, "Every library gets its own go-redis clients with the same options "+
		"(defaults, ContextTimeoutEnabled=%v), TTL %v, its default settings otherwise; "+
		"redsync through its goredis/v9 pool adapter, one Mutex per lock. "+
		"%d rounds per scenario; uncontended: up to %d iterations per round (or %v per library), each iteration one "+
		"Acquire+Release of every library in a fresh random order, allocations counted afterwards in a batch per library; "+
		"contention and many keys: %v per library and round, the order rotating each round; "+
		"at most %v per library and scenario (rounds skipped after that are marked †).\n\n",
		cfg.ctxTimeout, ttl, cfg.rounds, cfg.ops, cfg.roundTime, cfg.sliceTime, cfg.budget)
	fmt.Fprintf(w, "Two floors, each two PING fan-outs in a row that return when a quorum has answered "+
		"(one round trip for acquire, one for release), measured in the same loop on the same nodes. "+
		"**floor-bare**: one fresh goroutine per node and a channel, nothing else; with slow nodes it runs on the fast "+
		"ones only (with the quorum of all). The targets use it. **floor-ctx**: the previous floor, which adds a "+
		"context with the 50 ms node deadline and a WaitGroup per fan-out. "+
		"min-setnx-del, min-setnx-script and min-script-script are minimal locks written in the harness the same way "+
		"as the bare floor: SET NX PX (or a GET-then-SET script like redlock's) to acquire, and DEL (not a correct "+
		"release) or a token-checked delete script to release. min-deadline is the least a lock sends that refuses "+
		"every late copy of its writes by a deadline on the node's clock: its acquire carries the deadline and reads its "+
		"own refusal key with the key (TIME, MGET, SET), its release deletes its value and, within the deadline, leaves "+
		"that refusal until it (GET, DEL, TIME, SET PXAT). "+
		"Faulted nodes sit behind an in-process TCP proxy, the others are direct.\n\n")
}

func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server (version unknown)"
	}
	f := strings.Fields(string(out))
	for _, s := range f {
		if v, ok := strings.CutPrefix(s, "v="); ok {
			return "redis-server " + v
		}
	}
	return strings.TrimSpace(string(out))
}

func moduleVersions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	want := []string{"github.com/redis/go-redis/v9", "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock"}
	var parts []string
	for _, m := range bi.Deps {
		if slices.Contains(want, m.Path) {
			parts = append(parts, m.Path+" "+m.Version)
		}
	}
	parts = append(parts, "github.com/redlock-go/redlock (this tree)")
	return strings.Join(parts, ", ")
}

func mark(s *sample) string {
	if s.stopped {
		return " †"
	}
	return ""
}

// ofKind returns the results of the scenarios of one kind, in order.
func ofKind(results []*result, k kind) []*result {
	var rows []*result
	for _, r := range results {
		if r.sc.kind == k {
			rows = append(rows, r)
		}
	}
	return rows
}

func writeUncontended(w io.Writer, results []*result) {
	rows := ofKind(results, uncontended)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Uncontended Acquire+Release\n\n")
	fmt.Fprintf(w, "| scenario | library | ops | p50 µs | p99 µs | p50 ÷ bare floor | p50 ÷ floor-ctx | p99 ÷ bare floor | p50 ÷ redsync-failfast | allocs/op | target (redlock) | met |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|---|\n")
	for _, r := range rows {
		bare, _ := statsOf(r.get(nameBare))
		floor, _ := statsOf(r.get(nameFloor))
		ff, hasFF := statsOf(r.get(nameRedsyncFF))
		for _, s := range r.samples {
			st, ok := statsOf(s)
			if !ok {
				fmt.Fprintf(w, "| %s | %s | 0 | – | – | – | – | – | – | – | | failed: %v |\n", r.sc.name, s.lib, s.firstErr)
				continue
			}
			vsFF := "–"
			if hasFF {
				vsFF = fmt.Sprintf("%.2f", ratio(st.p50, ff.p50))
			}
			var texts, mets []string
			if s.lib == nameRedlock || s.lib == nameRedlockCtx {
				for _, g := range goals(r, st) {
					texts = append(texts, g.text)
					mets = append(mets, yesNo(g.met))
				}
			}
			goal, met := strings.Join(texts, "; "), strings.Join(mets, "; ")
			fmt.Fprintf(w, "| %s | %s | %d%s | %s | %s | %.2f | %.2f | %.2f | %s | %.1f | %s | %s |\n",
				r.sc.name, s.lib, st.n, mark(s), us(st.p50), us(st.p99),
				ratio(st.p50, bare.p50), ratio(st.p50, floor.p50), ratio(st.p99, bare.p50), vsFF, st.allocs, goal, met)
		}
	}
	fmt.Fprintf(w, "\nallocs/op counts every heap allocation in the process during a batch of one library's "+
		"Acquire+Release run after the interleaved rounds, including its background goroutines and go-redis; "+
		"the lowest of three batches.\n\n")
	writeFailures(w, rows)
}

func writeNetwork(w io.Writer, cfg config, results []*result) {
	rows := ofKind(results, network)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Network: every node behind a link with latency\n\n")
	fmt.Fprintf(w, "Uncontended Acquire+Release as above, but every node is reached through the in-process proxy, which "+
		"delays each request by its link's latency and a uniform draw of up to a tenth more (jitter); replies are not "+
		"delayed, so a round trip takes from the link's latency to 1.1 × it longer: `+10ms` is 10-11 ms a round trip. "+
		"`+1/1/10/60/60ms` gives each of the five nodes its own link: two masters in the client's region, one in a "+
		"neighbouring region, two across a continent. The links are in place before the warm-up (%d operations or "+
		"%v per library), so that the libraries that learn a node's latency have learned it. Every library with its "+
		"defaults: redlock learns each node's deadline; redsync gives each attempt %v (5%% of the TTL). The minimal correct "+
		"locks run too. floor-bare has no deadline; floor-ctx's node deadline and min-deadline's window are "+
		"%v plus the slowest link's round trip with its jitter, as a lock that knew its network would set them "+
		"(at %v, over a 60ms link, they would fail every time). No allocation batches: latency alone. "+
		"**failures**: failed Acquire+Release of all tried; a library that failed every warm-up operation is "+
		"measured no further and shows them all.\n\n",
		cfg.warmup, warmupTime, ttl/20, floorTimeout, floorTimeout)
	fmt.Fprintf(w, "| scenario | library | ops | p50 µs | p99 µs | p50 − bare floor µs | p50 ÷ bare floor | p99 ÷ bare floor | p50 ÷ redsync-failfast | failures |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		bare, hasBare := statsOf(r.get(nameBare))
		ff, hasFF := statsOf(r.get(nameRedsyncFF))
		for _, s := range r.samples {
			failed := fmt.Sprintf("%d of %d", s.failures, s.failures+s.ops)
			st, ok := statsOf(s)
			if !ok {
				fmt.Fprintf(w, "| %s | %s | 0%s | – | – | – | – | – | – | %s |\n", r.sc.name, s.lib, mark(s), failed)
				continue
			}
			over, vsBare, vsBare99, vsFF := "–", "–", "–", "–"
			if hasBare {
				over = us(st.p50 - bare.p50)
				vsBare = fmt.Sprintf("%.2f", ratio(st.p50, bare.p50))
				vsBare99 = fmt.Sprintf("%.2f", ratio(st.p99, bare.p50))
			}
			if hasFF {
				vsFF = fmt.Sprintf("%.2f", ratio(st.p50, ff.p50))
			}
			fmt.Fprintf(w, "| %s | %s | %d%s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.sc.name, s.lib, st.n, mark(s), us(st.p50), us(st.p99), over, vsBare, vsBare99, vsFF, failed)
		}
	}
	fmt.Fprintln(w)
	writeFailures(w, rows)
}

func writeFailures(w io.Writer, rows []*result) {
	for _, r := range rows {
		for _, s := range r.samples {
			if s.failures > 0 {
				fmt.Fprintf(w, "- %s, %s: %d failed operations; first: %v\n", r.sc.name, s.lib, s.failures, s.firstErr)
			}
		}
	}
	fmt.Fprintln(w)
}

// uncontendedFloor is the floor measured uncontended at n nodes in this run.
func uncontendedFloor(results []*result, n int) (time.Duration, bool) {
	for _, r := range results {
		if r.sc.kind == uncontended && r.sc.slow == 0 && r.sc.nodes == n {
			if st, ok := statsOf(r.get(nameBare)); ok {
				return st.p50, true
			}
		}
	}
	return 0, false
}

// waitStats are the p50 and p99 of the acquirers' waits.
func waitStats(s *sample) (p50, p99 time.Duration, ok bool) {
	if s == nil || len(s.wait) == 0 {
		return 0, 0, false
	}
	d := slices.Clone(s.wait)
	return benchkit.Percentile(d, 50), benchkit.Percentile(d, 99), true
}

// contendedRate is acquisitions per second of the library's slices.
func contendedRate(s *sample) float64 {
	if s == nil || s.busy <= 0 {
		return 0
	}
	return float64(s.ops) / s.busy.Seconds()
}

// scriptCmds are the commands that run a script: one attempt, release or
// extension on one node.
var scriptCmds = []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"}

// cmdsPerAcq returns the commands the nodes executed per acquisition, all of
// them and the script calls alone; ok is false without a count.
func cmdsPerAcq(s *sample) (all, scripts float64, ok bool) {
	if s == nil || s.cmds == nil || s.nodeOps == 0 {
		return 0, 0, false
	}
	var n, sc int64
	for k, v := range s.cmds {
		n += v
		if slices.Contains(scriptCmds, k) {
			sc += v
		}
	}
	return float64(n) / float64(s.nodeOps), float64(sc) / float64(s.nodeOps), true
}

// cpuPerOp is the nodes' CPU time per acquisition, summed over the nodes.
func cpuPerOp(s *sample) (time.Duration, bool) {
	if s == nil || s.cmds == nil || s.nodeOps == 0 {
		return 0, false
	}
	return s.nodeCPU / time.Duration(s.nodeOps), true
}

func fmtCmds(s *sample) string {
	if all, _, ok := cmdsPerAcq(s); ok {
		return fmt.Sprintf("%.1f", all)
	}
	return "–"
}

// cmdBreakdown lists the commands per acquisition, most first.
func cmdBreakdown(s *sample) string {
	type kv struct {
		k string
		v int64
	}
	var l []kv
	for k, v := range s.cmds {
		l = append(l, kv{k, v})
	}
	slices.SortFunc(l, func(a, b kv) int {
		if a.v != b.v {
			return int(b.v - a.v)
		}
		return strings.Compare(a.k, b.k)
	})
	var parts []string
	for _, x := range l {
		if per := float64(x.v) / float64(s.nodeOps); per >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", x.k, per))
		}
	}
	return strings.Join(parts, ", ")
}

// vsRedsync is a's rate ÷ redsync's (defaults) in the same scenario.
func vsRedsync(r *result, s *sample) string {
	rs := r.get(nameRedsync)
	if rs == nil || contendedRate(rs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", contendedRate(s)/contendedRate(rs))
}

func durs(s *sample) (wait50, wait99, ho50, ho99 string) {
	wait50, wait99, ho50, ho99 = "–", "–", "–", "–"
	if p50, p99, ok := waitStats(s); ok {
		wait50, wait99 = us(p50), us(p99)
	}
	if st, ok := statsOf(s); ok {
		ho50, ho99 = us(st.p50), us(st.p99)
	}
	return
}

func writeContention(w io.Writer, results []*result) {
	rows := ofKind(results, contention)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Contention: many goroutines, one key\n\n")
	fmt.Fprintf(w, "Each goroutine takes the lock, holds it for %v (spinning), releases it and goes again. "+
		"**Wait**: each acquirer's, from calling Acquire to getting the lock; a wait still open when the "+
		"slice ended counts, as long as it had lasted, so that a starved acquirer is not left out. "+
		"**Handoff**: from the moment a holder starts to release to the moment the next holder's acquire returns; "+
		"its floor is the uncontended bare floor at the same N. Each library waits its default way "+
		"(redlock: woken by release hints, a FIFO queue per key in a Client, fallback at the holder's TTL capped by its "+
		"jittered exponential 5–200 ms backoff; redsync: polls 50–250 ms apart, 32 tries; "+
		"redislock has no default retry and gets exponential 5–200 ms). "+
		"**cmds/acq**: commands the nodes executed during the library's slices per acquisition (INFO commandstats "+
		"deltas summed over the nodes, commands run inside scripts included; see the commands table).\n\n", rows[0].sc.hold)
	fmt.Fprintf(w, "| scenario | library | acquisitions | locks/s | ÷ redsync | wait p50 µs | wait p99 µs | handoff p50 µs | handoff p99 µs | handoff p50 ÷ floor | cmds/acq | failures | overlaps |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		floor, hasFloor := uncontendedFloor(results, r.sc.nodes)
		for _, s := range r.samples {
			st, _ := statsOf(s)
			vsFloor := "–"
			if hasFloor && st.n > 0 {
				vsFloor = fmt.Sprintf("%.1f", ratio(st.p50, floor))
			}
			w50, w99, h50, h99 := durs(s)
			fmt.Fprintf(w, "| %s | %s | %d%s | %.0f | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n",
				r.sc.name, s.lib, s.ops, mark(s), contendedRate(s), vsRedsync(r, s), w50, w99, h50, h99, vsFloor,
				fmtCmds(s), s.failures, s.overlaps)
		}
	}
	fmt.Fprintln(w)
	writeFailures(w, rows)
	writeVsMutex(w, rows)
}

// cycle is the time per acquisition in a contention scenario: the hold and
// the handoff after it.
func cycle(s *sample) (time.Duration, bool) {
	if s == nil || s.ops == 0 {
		return 0, false
	}
	return s.busy / time.Duration(s.ops), true
}

// writeVsMutex sets each library's contention rows against the local mutex
// of the same scenario (ceiling-mutex).
func writeVsMutex(w io.Writer, rows []*result) {
	fmt.Fprintf(w, "### Against a local mutex\n\n")
	fmt.Fprintf(w, "**ceiling-mutex** is a sync.Mutex in the harness with the same critical section, so no lock across "+
		"nodes can beat its rate or its wait. **cycle**: the library's time per acquisition (its slices ÷ its "+
		"acquisitions), the hold and the handoff after it; **beyond mutex**: its cycle minus the mutex's, what the "+
		"library's handoff costs over a handoff in memory.\n\n")
	fmt.Fprintf(w, "| scenario | library | locks/s | ÷ mutex | wait p99 µs | ÷ mutex's wait p99 | cycle µs | beyond mutex µs | handoff p50 µs |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		m := r.get(nameMutex)
		mc, hasM := cycle(m)
		_, m99, hasW := waitStats(m)
		for _, s := range r.samples {
			vsRate, vsWait, beyond := "–", "–", "–"
			if hasM && contendedRate(m) > 0 {
				vsRate = fmt.Sprintf("%.2f", contendedRate(s)/contendedRate(m))
			}
			_, p99, ok := waitStats(s)
			if ok && hasW {
				vsWait = fmt.Sprintf("%.2f", ratio(p99, m99))
			}
			c, hasC := cycle(s)
			if hasC && hasM {
				beyond = us(c - mc)
			}
			cyc := "–"
			if hasC {
				cyc = us(c)
			}
			_, w99, h50, _ := durs(s)
			fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n",
				r.sc.name, s.lib, contendedRate(s), vsRate, w99, vsWait, cyc, beyond, h50)
		}
	}
	fmt.Fprintln(w)
}

// shares formats each process's share of the acquisitions, and returns the
// lowest share ÷ a fair one.
func shares(s *sample) (string, float64) {
	if s.ops == 0 || len(s.shares) == 0 {
		return "–", 0
	}
	parts := make([]string, len(s.shares))
	lowest := 1.0
	for i, n := range s.shares {
		f := float64(n) / float64(s.ops)
		parts[i] = fmt.Sprintf("%.1f", 100*f)
		lowest = min(lowest, f*float64(len(s.shares)))
	}
	return strings.Join(parts, " / ") + " %", lowest
}

func writeMultiProc(w io.Writer, results []*result) {
	rows := ofKind(results, multiProc)
	if len(rows) == 0 {
		return
	}
	sc := rows[0].sc
	fmt.Fprintf(w, "## Contention across processes: %d processes × %d goroutines, one key\n\n", sc.procs, sc.goroutines)
	fmt.Fprintf(w, "The harness starts %d copies of itself as workers, each with every library on go-redis clients of its own; "+
		"for each round and library all workers run the contention loop (hold %v) on the same key from the same instant "+
		"and report their acquisitions, waits and held spans as JSON on stdout. Handoffs come from the spans of all "+
		"processes merged in time order (a span starting before the previous one ended counts as an overlap). "+
		"**shares**: each process's share of the acquisitions; a fair share is %.0f %%.\n\n",
		sc.procs, sc.hold, 100/float64(sc.procs))
	fmt.Fprintf(w, "| scenario | library | acquisitions | locks/s | ÷ redsync | wait p50 µs | wait p99 µs | handoff p50 µs | handoff p99 µs | shares per process | lowest ÷ fair | cmds/acq | failures | overlaps |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|\n")
	for _, r := range rows {
		for _, s := range r.samples {
			w50, w99, h50, h99 := durs(s)
			sh, low := shares(s)
			fmt.Fprintf(w, "| %s | %s | %d%s | %.0f | %s | %s | %s | %s | %s | %s | %.2f | %s | %d | %d |\n",
				r.sc.name, s.lib, s.ops, mark(s), contendedRate(s), vsRedsync(r, s), w50, w99, h50, h99, sh, low,
				fmtCmds(s), s.failures, s.overlaps)
		}
	}
	fmt.Fprintln(w)
	writeFailures(w, rows)
}

func writeNodes(w io.Writer, results []*result) {
	// The network group has no batches to read the nodes around: latency
	// alone.
	results = slices.DeleteFunc(slices.Clone(results), func(r *result) bool { return r.sc.kind == network })
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "## The nodes' CPU and commands per lock\n\n")
	fmt.Fprintf(w, "INFO commandstats and INFO cpu on every node before and after each of a library's slices "+
		"(uncontended: its allocation batches; the after %v later, so that its late work lands), summed over the nodes "+
		"and divided by its acquisitions. **CPU µs/lock**: used_cpu_user + used_cpu_sys of the redis-server processes, "+
		"less their idle CPU (cron ticks and the harness's INFO calls, measured for %v per scenario before the "+
		"libraries start) over the same time. Commands run by a "+
		"script are counted besides the script call (redlock's release script runs GET, DEL and PUBLISH). "+
		"**scripts/lock** counts EVALSHA/EVAL alone: an acquire and a release cost 2 × N of them at least "+
		"(redsync acquires with SET NX instead).\n\n", settle, idleWindow)
	fmt.Fprintf(w, "| scenario | library | locks | CPU µs/lock | cmds/lock | scripts/lock | per lock, by command |\n|---|---|--:|--:|--:|--:|---|\n")
	for _, r := range results {
		for _, s := range r.samples {
			all, sc, ok := cmdsPerAcq(s)
			cpu, _ := cpuPerOp(s)
			if !ok {
				fmt.Fprintf(w, "| %s | %s | 0 | – | – | – | |\n", r.sc.name, s.lib)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %d | %.1f | %.1f | %.1f | %s |\n", r.sc.name, s.lib, s.nodeOps,
				float64(cpu)/float64(time.Microsecond), all, sc, cmdBreakdown(s))
		}
	}
	fmt.Fprintln(w)
}

func writeManyKeys(w io.Writer, results []*result) {
	rows := ofKind(results, manyKeys)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Many keys: goroutines with a key each\n\n")
	fmt.Fprintf(w, "Each goroutine takes and releases a key of its own, over and over. A floor's rate is PING fan-out "+
		"pairs per second under the same concurrency. **÷ bare floor** divides by floor-bare's, whose fan-outs each "+
		"send their own PINGs; **÷ pipelined** by floor-pipelined's, where each node's PINGs waiting at the same "+
		"moment go out as one pipeline (one pipeline per node per round): the ceiling of a lock that batches. "+
		"**÷ batched scripts** by ceiling-batched-scripts', min-deadline's scripts sent the same way: what a lock with "+
		"the late-write property reaches with perfect batching and nothing else.\n\n")
	fmt.Fprintf(w, "| scenario | library | ops | locks/s | ÷ bare floor | ÷ pipelined | ÷ batched scripts | ÷ redsync | p50 µs | p99 µs |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		for _, s := range r.samples {
			st, ok := statsOf(s)
			if !ok {
				fmt.Fprintf(w, "| %s | %s | 0 | – | – | – | – | – | – | – |\n", r.sc.name, s.lib)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %d%s | %.0f | %s | %s | %s | %s | %s | %s |\n",
				r.sc.name, s.lib, s.ops, mark(s), st.rate, rateVs(r, nameBare, st), rateVs(r, namePipe, st),
				rateVs(r, nameBatched, st), rateVs(r, nameRedsync, st), us(st.p50), us(st.p99))
		}
	}
	fmt.Fprintln(w)
	writeFailures(w, rows)
}

// rateVs is st's rate ÷ lib's in the same scenario, formatted; "–" without
// lib's.
func rateVs(r *result, lib string, st stats) string {
	if x, ok := rateRatio(r, lib, st); ok {
		return fmt.Sprintf("%.2f", x)
	}
	return "–"
}

func rateRatio(r *result, lib string, st stats) (float64, bool) {
	o, ok := statsOf(r.get(lib))
	if !ok || o.rate <= 0 {
		return 0, false
	}
	return st.rate / o.rate, true
}

func writeTargets(w io.Writer, results []*result) {
	type line struct{ target, measured, met string }
	var lines []line
	add := func(target, measured string, ok bool) {
		lines = append(lines, line{target, measured, yesNo(ok)})
	}
	for _, lib := range []string{nameRedlock, nameRedlockCtx} {
		for _, r := range ofKind(results, uncontended) {
			rl, ok := statsOf(r.get(lib))
			if !ok {
				continue
			}
			for _, g := range goals(r, rl) {
				add(lib+", "+r.sc.name+": "+g.text, g.measured, g.met)
			}
		}
		if lib == nameRedlock {
			for _, r := range ofKind(results, uncontended) {
				one, ok := statsOf(r.get(lib))
				if !ok || r.sc.slow > 0 {
					continue
				}
				for _, k := range []struct {
					n   int
					max float64
				}{{1, targetAll1}, {8, targetAll8}} {
					all, ok := statsOf(r.get(fmt.Sprintf(nameRedlockAll, k.n)))
					if !ok {
						continue
					}
					x := ratio(all.p50, one.p50)
					add(fmt.Sprintf("AcquireAll of %d key(s), %s: p50 ≤ %.2f × Acquire's", k.n, r.sc.name, k.max),
						fmt.Sprintf("%s µs = %.2f × %s µs", us(all.p50), x, us(one.p50)), x <= k.max)
				}
			}
		}
		for _, r := range ofKind(results, manyKeys) {
			rl, ok1 := statsOf(r.get(lib))
			bare, ok2 := statsOf(r.get(nameBare))
			if ok1 && ok2 && bare.rate > 0 {
				x := rl.rate / bare.rate
				add(fmt.Sprintf("%s, %s: locks/s ≥ %.1f × bare floor's", lib, r.sc.name, targetManyKeys),
					fmt.Sprintf("%.0f/s = %.2f × bare floor (%.0f/s)", rl.rate, x, bare.rate), x >= targetManyKeys)
			}
		}
		for _, g := range append(waitingGoals(results, lib), throughputGoals(results, lib)...) {
			lines = append(lines, line{g.text, g.measured, g.metText()})
		}
		for _, r := range results {
			if s := r.get(lib); s != nil && (r.sc.kind == contention || r.sc.kind == multiProc) {
				add(lib+", "+r.sc.name+": "+noOverlaps, fmt.Sprintf("%d overlaps in %d acquisitions", s.overlaps, s.ops),
					s.overlaps == 0)
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "## Targets\n\n| target | measured | met |\n|---|---|---|\n")
	for _, l := range lines {
		fmt.Fprintf(w, "| %s | %s | %s |\n", l.target, l.measured, l.met)
	}
	fmt.Fprintln(w)
}

// noOverlaps is the target that no acquisition under contention was made
// while another holder held the lock: with healthy nodes and a 10 s TTL an
// overlap is a broken lock, not a slow one.
const noOverlaps = "no overlapping holders"

// waitingGoals are the waiting issue's targets for lib's rows: wait p99 and
// throughput with 16 goroutines, handoff p99 with 64, fairness across
// processes, and bounded commands per acquisition as waiters grow.
func waitingGoals(results []*result, lib string) []goal {
	var out []goal
	peers := []string{nameRedsync, nameRedsyncFF, nameRedislock}
	cmds := map[int]*sample{} // N=5 contention row by goroutines
	for _, r := range ofKind(results, contention) {
		s := r.get(lib)
		if s == nil || s.ops == 0 {
			continue
		}
		name := lib + ", " + r.sc.name
		st, _ := statsOf(s)
		if r.sc.nodes == 5 {
			cmds[r.sc.goroutines] = s
		}
		switch r.sc.goroutines {
		case 16:
			if _, p99, ok := waitStats(s); ok {
				out = append(out, goal{text: fmt.Sprintf("%s: wait p99 ≤ %v", name, targetWaitP99),
					measured: fmt.Sprintf("%s µs (redsync %s µs)", us(p99), waitP99(r.get(nameRedsync))), met: p99 <= targetWaitP99})
			}
			// The throughput targets: 2 × redsync's on 5 nodes,
			// redislock's where it applies (one node).
			if rs := r.get(nameRedsync); r.sc.nodes == 5 && rs != nil && contendedRate(rs) > 0 {
				x := contendedRate(s) / contendedRate(rs)
				out = append(out, goal{text: fmt.Sprintf("%s: locks/s ≥ %.0f × redsync's", name, targetVsRedsync),
					measured: fmt.Sprintf("%.0f/s = %.2f × %.0f/s", contendedRate(s), x, contendedRate(rs)), met: x >= targetVsRedsync})
			}
			if rl := r.get(nameRedislock); r.sc.nodes == 1 && rl != nil && contendedRate(rl) > 0 {
				out = append(out, goal{text: name + ": locks/s ≥ redislock's",
					measured: fmt.Sprintf("%.0f/s vs %.0f/s", contendedRate(s), contendedRate(rl)), met: contendedRate(s) >= contendedRate(rl)})
			}
		case 64:
			best, bestLib := time.Duration(0), ""
			for _, p := range peers {
				if ps, ok := statsOf(r.get(p)); ok && (bestLib == "" || ps.p99 < best) {
					best, bestLib = ps.p99, p
				}
			}
			if bestLib != "" && st.n > 0 {
				out = append(out, goal{text: name + ": handoff p99 ≤ the best peer's",
					measured: fmt.Sprintf("%s µs vs %s µs (%s)", us(st.p99), us(best), bestLib), met: st.p99 <= best})
			}
		}
	}
	if s16, s64 := cmds[16], cmds[64]; s16 != nil && s64 != nil {
		a16, sc16, ok16 := cmdsPerAcq(s16)
		a64, sc64, ok64 := cmdsPerAcq(s64)
		if ok16 && ok64 {
			x := a64 / a16
			out = append(out, goal{text: fmt.Sprintf("%s, N=5: commands per acquisition, 64 ÷ 16 goroutines ≤ %.2f", lib, targetCmdsGrowth),
				measured: fmt.Sprintf("%.1f vs %.1f = %.2f", a64, a16, x), met: x <= targetCmdsGrowth})
			limit := float64(targetScriptsPerN * 5)
			out = append(out, goal{text: fmt.Sprintf("%s, N=5: script calls per acquisition ≤ %.0f (16 and 64 goroutines)", lib, limit),
				measured: fmt.Sprintf("%.1f and %.1f", sc16, sc64), met: sc16 <= limit && sc64 <= limit})
		}
	}
	for _, r := range ofKind(results, multiProc) {
		s := r.get(lib)
		if s == nil || s.ops == 0 {
			continue
		}
		name := lib + ", " + r.sc.name
		_, low := shares(s)
		out = append(out, goal{text: fmt.Sprintf("%s: every process ≥ %.1f × its fair share", name, targetFairShare),
			measured: fmt.Sprintf("lowest %.2f", low), met: low >= targetFairShare})
		rs := r.get(nameRedsync)
		if rs != nil && contendedRate(rs) > 0 {
			out = append(out, goal{text: name + ": locks/s and wait p99 beside redsync's", info: true,
				measured: fmt.Sprintf("%.0f/s = %.2f × %.0f/s; wait p99 %s µs vs %s µs", contendedRate(s),
					contendedRate(s)/contendedRate(rs), contendedRate(rs), waitP99(s), waitP99(rs))})
		}
	}
	return out
}

// throughputGoals are the throughput issue's targets for lib's rows:
// uncontended p50 against redsync WithFailFast and the minimal correct
// scripted lock, many keys against redsync and the floors, one key against
// the local mutex.
func throughputGoals(results []*result, lib string) []goal {
	var out []goal
	for _, r := range ofKind(results, uncontended) {
		st, ok := statsOf(r.get(lib))
		if !ok || r.sc.slow > 0 {
			continue
		}
		for _, peer := range []string{nameRedsyncFF, nameMinScript} {
			if p, ok := statsOf(r.get(peer)); ok {
				out = append(out, goal{text: fmt.Sprintf("%s, %s: p50 ≤ %s's", lib, r.sc.name, peer),
					measured: fmt.Sprintf("%s µs vs %s µs", us(st.p50), us(p.p50)), met: st.p50 <= p.p50})
			}
		}
	}
	for _, r := range ofKind(results, manyKeys) {
		st, ok := statsOf(r.get(lib))
		if !ok {
			continue
		}
		name := lib + ", " + r.sc.name
		if r.sc.goroutines == targetKeysWorkers {
			if x, ok := rateRatio(r, nameRedsync, st); ok {
				out = append(out, goal{text: fmt.Sprintf("%s: locks/s ≥ %.0f × redsync's", name, targetKeysVsRedsync),
					measured: fmt.Sprintf("%.0f/s = %.2f × redsync", st.rate, x), met: x >= targetKeysVsRedsync})
			}
			if x, ok := rateRatio(r, nameBare, st); ok {
				out = append(out, goal{text: fmt.Sprintf("%s: locks/s ≥ %.0f × bare floor's", name, targetKeysVsBare),
					measured: fmt.Sprintf("%.0f/s = %.2f × bare floor", st.rate, x), met: x >= targetKeysVsBare})
			}
			if x, ok := rateRatio(r, nameBatched, st); ok {
				out = append(out, goal{text: fmt.Sprintf("%s: locks/s ≥ %.1f × the batched scripts' ceiling", name, targetKeysVsBatched),
					measured: fmt.Sprintf("%.0f/s = %.2f × %s", st.rate, x, nameBatched), met: x >= targetKeysVsBatched})
			}
		}
		if x, ok := rateRatio(r, namePipe, st); ok {
			out = append(out, goal{text: name + ": fraction of the pipelined floor", info: true,
				measured: fmt.Sprintf("%.0f/s = %.2f × floor-pipelined", st.rate, x)})
		}
	}
	for _, r := range ofKind(results, contention) {
		s, m := r.get(lib), r.get(nameMutex)
		if r.sc.goroutines != 16 || s == nil || s.ops == 0 || m == nil || contendedRate(m) == 0 {
			continue
		}
		name := lib + ", " + r.sc.name
		x := contendedRate(s) / contendedRate(m)
		out = append(out, goal{text: fmt.Sprintf("%s: locks/s ≥ %.1f × the local mutex's", name, targetVsMutex),
			measured: fmt.Sprintf("%.0f/s = %.2f × %.0f/s", contendedRate(s), x, contendedRate(m)), met: x >= targetVsMutex})
		_, p99, ok1 := waitStats(s)
		_, m99, ok2 := waitStats(m)
		if ok1 && ok2 {
			y := ratio(p99, m99)
			out = append(out, goal{text: fmt.Sprintf("%s: wait p99 ≤ %.2f × the local mutex's", name, targetWaitVsMutex),
				measured: fmt.Sprintf("%s µs = %.2f × %s µs", us(p99), y, us(m99)), met: y <= targetWaitVsMutex})
		}
	}
	return out
}

func waitP99(s *sample) string {
	if _, p99, ok := waitStats(s); ok {
		return us(p99)
	}
	return "–"
}
