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

// goal is one target for redlock's row in a scenario, and whether it was met.
type goal struct {
	text     string
	measured string
	met      bool
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
				fmt.Sprintf("%s µs = %.2f × %s µs", us(st.p50), x, us(bare.p50)), x <= targetFloor})
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
				goal{"p50 ≤ redislock's", fmt.Sprintf("%s µs vs %s µs", us(st.p50), us(rl.p50)), st.p50 <= rl.p50},
				goal{"allocs ≤ redislock's", fmt.Sprintf("%.1f vs %.1f", st.allocs, rl.allocs), st.allocs <= rl.allocs})
		}
		return out
	}
	vsBare("")
	if ff, ok := statsOf(r.get(nameRedsyncFF)); ok {
		x := ratio(st.p50, ff.p50)
		out = append(out, goal{fmt.Sprintf("p50 ≤ %.1f × redsync-failfast", targetFailFast),
			fmt.Sprintf("%.2f × %s µs", x, us(ff.p50)), x <= targetFailFast})
	}
	if r.sc.nodes == 5 {
		out = append(out, goal{fmt.Sprintf("allocs ≤ %d", targetAllocs5), fmt.Sprintf("%.1f", st.allocs), st.allocs <= targetAllocs5})
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
	writeContention(w, results)
	writeManyKeys(w, results)
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
		"release) or a token-checked delete script to release. "+
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

func writeContention(w io.Writer, results []*result) {
	rows := ofKind(results, contention)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Contention: many goroutines, one key\n\n")
	fmt.Fprintf(w, "Handoff: from the moment a holder starts to release to the moment the next holder's acquire returns; "+
		"its floor is the uncontended bare floor at the same N. Each library retries its default way "+
		"(redlock: jittered exponential 5–200 ms; redsync: 50–250 ms, 32 tries; "+
		"redislock has no default retry and gets exponential 5–200 ms).\n\n")
	fmt.Fprintf(w, "| scenario | library | acquisitions | locks/s | handoff p50 µs | handoff p99 µs | handoff p50 ÷ floor | failures | overlaps |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		floor, hasFloor := uncontendedFloor(results, r.sc.nodes)
		for _, s := range r.samples {
			st, _ := statsOf(s)
			vsFloor := "–"
			if hasFloor && st.n > 0 {
				vsFloor = fmt.Sprintf("%.1f", ratio(st.p50, floor))
			}
			rate := 0.0
			if s.busy > 0 {
				rate = float64(s.ops) / s.busy.Seconds()
			}
			p50, p99 := "–", "–"
			if st.n > 0 {
				p50, p99 = us(st.p50), us(st.p99)
			}
			fmt.Fprintf(w, "| %s | %s | %d%s | %.0f | %s | %s | %s | %d | %d |\n",
				r.sc.name, s.lib, s.ops, mark(s), rate, p50, p99, vsFloor, s.failures, s.overlaps)
		}
	}
	fmt.Fprintln(w)
	writeFailures(w, rows)
}

func writeManyKeys(w io.Writer, results []*result) {
	rows := ofKind(results, manyKeys)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Many keys: 64 goroutines, a key each\n\n")
	fmt.Fprintf(w, "A floor's rate is PING fan-out pairs per second under the same concurrency; ÷ floor divides by the bare floor's.\n\n")
	fmt.Fprintf(w, "| scenario | library | ops | locks/s | ÷ floor | ÷ redsync | p50 µs | p99 µs |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		floor, _ := statsOf(r.get(nameBare))
		rs, hasRS := statsOf(r.get(nameRedsync))
		for _, s := range r.samples {
			st, ok := statsOf(s)
			if !ok {
				fmt.Fprintf(w, "| %s | %s | 0 | – | – | – | – | – |\n", r.sc.name, s.lib)
				continue
			}
			vsRS := "–"
			if hasRS && rs.rate > 0 {
				vsRS = fmt.Sprintf("%.2f", st.rate/rs.rate)
			}
			vsFloor := "–"
			if floor.rate > 0 {
				vsFloor = fmt.Sprintf("%.2f", st.rate/floor.rate)
			}
			fmt.Fprintf(w, "| %s | %s | %d%s | %.0f | %s | %s | %s | %s |\n",
				r.sc.name, s.lib, s.ops, mark(s), st.rate, vsFloor, vsRS, us(st.p50), us(st.p99))
		}
	}
	fmt.Fprintln(w)
	writeFailures(w, rows)
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
		for _, r := range ofKind(results, manyKeys) {
			rl, ok1 := statsOf(r.get(lib))
			bare, ok2 := statsOf(r.get(nameBare))
			if ok1 && ok2 && bare.rate > 0 {
				x := rl.rate / bare.rate
				add(fmt.Sprintf("%s, %s: locks/s ≥ %.1f × bare floor's", lib, r.sc.name, targetManyKeys),
					fmt.Sprintf("%.0f/s = %.2f × bare floor (%.0f/s)", rl.rate, x, bare.rate), x >= targetManyKeys)
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
