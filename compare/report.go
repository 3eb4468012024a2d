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

// Targets for redlock's rows, from the benchmark issue.
const (
	targetFloor      = 1.15 // uncontended p50 ÷ floor
	targetDelayFloor = 1.5  // p50 ÷ floor of the fast quorum, one node delayed
	targetScale      = 2.0  // (p50 ÷ floor at N=7) ÷ (p50 ÷ floor at N=1)
)

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
	if s.ops > 0 {
		st.allocs = float64(s.mallocs) / float64(s.ops)
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
		"%d interleaved rounds per scenario, the order of the libraries rotating each round; "+
		"uncontended: up to %d ops or %v per library and round; contention and many keys: %v per library and round; "+
		"at most %v per library and scenario (rounds skipped after that are marked †).\n\n",
		cfg.ctxTimeout, ttl, cfg.rounds, cfg.ops, cfg.roundTime, cfg.sliceTime, cfg.budget)
	fmt.Fprintf(w, "The floor is two parallel PING fan-outs in a row, each returning when a quorum has answered "+
		"(one round trip for acquire, one for release), measured in the same rounds on the same nodes; "+
		"with slow nodes it is the floor of the fast quorum. Faulted nodes sit behind an in-process TCP proxy, "+
		"the others are direct.\n\n")
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
	fmt.Fprintf(w, "| scenario | library | ops | p50 µs | p99 µs | p50 ÷ floor | p99 ÷ floor | p50 ÷ redsync | allocs/op | target (redlock) | met |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|---|---|\n")
	for _, r := range rows {
		floor, _ := statsOf(r.get(nameFloor))
		rs, hasRS := statsOf(r.get(nameRedsync))
		for _, s := range r.samples {
			st, ok := statsOf(s)
			if !ok {
				fmt.Fprintf(w, "| %s | %s | 0 | – | – | – | – | – | – | | failed: %v |\n", r.sc.name, s.lib, s.firstErr)
				continue
			}
			vsRS := "–"
			if hasRS {
				vsRS = fmt.Sprintf("%.2f", ratio(st.p50, rs.p50))
			}
			target, met := "", ""
			if s.lib == nameRedlock && r.sc.target != "" {
				target = r.sc.target
				met = yesNo(rowMet(r, st, floor, rs, hasRS))
			}
			fmt.Fprintf(w, "| %s | %s | %d%s | %s | %s | %.2f | %.2f | %s | %.1f | %s | %s |\n",
				r.sc.name, s.lib, st.n, mark(s), us(st.p50), us(st.p99),
				ratio(st.p50, floor.p50), ratio(st.p99, floor.p50), vsRS, st.allocs, target, met)
		}
	}
	fmt.Fprintf(w, "\nallocs/op counts every heap allocation in the process while the library ran, "+
		"including its background goroutines and go-redis.\n\n")
	writeFailures(w, rows)
}

// rowMet checks redlock's row against its scenario's target.
func rowMet(r *result, st, floor, rs stats, hasRS bool) bool {
	if r.sc.slow > 0 {
		return ratio(st.p50, floor.p50) <= targetDelayFloor
	}
	ok := ratio(st.p50, floor.p50) <= targetFloor
	if hasRS {
		ok = ok && st.p50 <= rs.p50 && st.allocs <= rs.allocs
	}
	return ok
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
			if st, ok := statsOf(r.get(nameFloor)); ok {
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
		"its floor is the uncontended floor at the same N. Each library retries its default way "+
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
	fmt.Fprintf(w, "The floor's rate is PING fan-out pairs per second under the same concurrency.\n\n")
	fmt.Fprintf(w, "| scenario | library | ops | locks/s | ÷ floor | ÷ redsync | p50 µs | p99 µs |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		floor, _ := statsOf(r.get(nameFloor))
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

// find returns the uncontended result with n nodes and slow faulted nodes.
func find(results []*result, n, slow int, delay bool) *result {
	for _, r := range results {
		if r.sc.kind != uncontended || r.sc.nodes != n || r.sc.slow != slow {
			continue
		}
		if slow > 0 && strings.Contains(r.sc.name, "+20ms") != delay {
			continue
		}
		return r
	}
	return nil
}

func writeTargets(w io.Writer, results []*result) {
	type line struct{ target, measured, met string }
	var lines []line
	add := func(target, measured string, ok bool) {
		lines = append(lines, line{target, measured, yesNo(ok)})
	}
	if r := find(results, 5, 0, false); r != nil {
		rl, ok1 := statsOf(r.get(nameRedlock))
		fl, ok2 := statsOf(r.get(nameFloor))
		rs, ok3 := statsOf(r.get(nameRedsync))
		ff, ok4 := statsOf(r.get(nameRedsyncFF))
		if ok1 && ok2 {
			x := ratio(rl.p50, fl.p50)
			add(fmt.Sprintf("N=5 uncontended: p50 ≤ %.2f × floor", targetFloor),
				fmt.Sprintf("%s µs = %.2f × floor (%s µs)", us(rl.p50), x, us(fl.p50)), x <= targetFloor)
		}
		if ok1 && ok3 {
			m := fmt.Sprintf("redlock %s µs, redsync %s µs", us(rl.p50), us(rs.p50))
			if ok4 {
				m += fmt.Sprintf(", redsync-failfast %s µs", us(ff.p50))
			}
			add("N=5 uncontended: p50 ≤ redsync's", m, rl.p50 <= rs.p50)
			add("N=5 uncontended: allocs per Acquire+Release ≤ redsync's",
				fmt.Sprintf("redlock %.1f, redsync %.1f", rl.allocs, rs.allocs), rl.allocs <= rs.allocs)
		}
	}
	if r := find(results, 5, 1, true); r != nil {
		rl, ok1 := statsOf(r.get(nameRedlock))
		fl, ok2 := statsOf(r.get(nameFloor))
		rs, ok3 := statsOf(r.get(nameRedsync))
		if ok1 && ok2 {
			x := ratio(rl.p50, fl.p50)
			m := fmt.Sprintf("%s µs = %.2f × floor (%s µs)", us(rl.p50), x, us(fl.p50))
			if ok3 {
				m += fmt.Sprintf("; redsync %s µs", us(rs.p50))
			}
			add(fmt.Sprintf("N=5, 1 node +20 ms: p50 ≤ %.1f × floor of the fast quorum", targetDelayFloor), m, x <= targetDelayFloor)
		}
	}
	r1, r7 := find(results, 1, 0, false), find(results, 7, 0, false)
	if r1 != nil && r7 != nil {
		a1, ok1 := statsOf(r1.get(nameRedlock))
		f1, ok2 := statsOf(r1.get(nameFloor))
		a7, ok3 := statsOf(r7.get(nameRedlock))
		f7, ok4 := statsOf(r7.get(nameFloor))
		if ok1 && ok2 && ok3 && ok4 {
			x1, x7 := ratio(a1.p50, f1.p50), ratio(a7.p50, f7.p50)
			add(fmt.Sprintf("N=7 ≤ %.0f × N=1, each relative to its floor", targetScale),
				fmt.Sprintf("%.2f × floor at N=7 vs %.2f × at N=1: %.2f (absolute: %s vs %s µs, %.2f; floor %s vs %s µs)",
					x7, x1, x7/x1, us(a7.p50), us(a1.p50), ratio(a7.p50, a1.p50), us(f7.p50), us(f1.p50)),
				x7/x1 <= targetScale)
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
