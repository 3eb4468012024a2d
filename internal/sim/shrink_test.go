package sim

import (
	"flag"
	"fmt"
	"go/format"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Shrinking. A failing run is reduced, one deterministic run at a time,
// to the fewest rounds and faults that still find what it found: the run
// cut after its first finding, then its workers, its faults and the
// workers' rounds each left out while the run still fails (delta
// debugging: halves, then quarters, ... of what is left), and the run cut
// again. A round keeps the time it started at in the run the shrink began
// from, so that it meets the faults it met there; every draw is a round's
// or a fault's own (Schedule), so that what is left out moves nothing
// else. The result is printed as a test to paste into this package: a call
// of Replay, which fails while the bug is there.

var (
	simShrink    = flag.Bool("sim.shrink", false, "shrink each failing seed's run to the fewest rounds and faults that still fail, and print it as a test (needs -sim.exec=wasm)")
	simShrinkFor = flag.Duration("sim.shrinkfor", time.Hour, "the most wall time a shrink takes; it prints what it has then")
	simJobs      = flag.Int("sim.jobs", runtime.NumCPU(), "how many wasm runs are made at once: TestSim's seeds, a shrink's candidates")
)

// shrinker reduces a failing schedule.
type shrinker struct {
	t        *testing.T
	run      func(Schedule) (runResult, error) // one deterministic run
	kinds    []string                          // a run fails as the first did if it finds one of these (none: a wrong)
	deadline time.Time
	runs     int
	best     Schedule
	bestRes  runResult
}

// shrink reduces s, whose run returned rr, and logs the reduced schedule
// as a test.
func shrink(t *testing.T, x *executor, s Schedule, rr runResult) {
	t.Helper()
	if x == nil {
		t.Logf("shrink: skipped, the runs are not deterministic (-sim.exec=native)")
		return
	}
	start := time.Now()
	sh := newShrinker(t, func(s Schedule) (runResult, error) { return x.run(t, s, nil) }, s, rr)
	sh.deadline = start.Add(*simShrinkFor)
	sh.shrink()
	rounds := 0
	for _, rs := range sh.best.Rounds {
		rounds += len(rs)
	}
	t.Logf("shrink: seed %d's run (%v, %d operations in %d rounds, %d faults) shrunk to %d rounds of %d workers and %d faults in %v, %d runs in %v of wall time; it finds %s (history %s). The test:\n\n%s",
		s.Seed, rr.Simulated.Round(time.Second), rr.Ops, countRounds(rr.Rounds), len(rr.Acted),
		rounds, len(sh.best.Workers), len(sh.best.Faults), sh.best.Duration, sh.runs, time.Since(start).Round(time.Second),
		strings.Join(sh.bestRes.Kinds, ", "), sh.bestRes.Hash, sh.best.test(sh.bestRes))
}

func newShrinker(t *testing.T, run func(Schedule) (runResult, error), s Schedule, rr runResult) *shrinker {
	return &shrinker{t: t, run: run, kinds: slices.Compact(slices.Sorted(slices.Values(rr.Kinds))), deadline: time.Now().Add(time.Hour), best: s, bestRes: rr}
}

// shrink makes the steps of a shrink; the best schedule is the result.
func (sh *shrinker) shrink() {
	sh.shorten()
	sh.window()
	sh.dropWorkers()
	sh.dropFaults()
	sh.dropRounds()
	sh.dropFaults()
	sh.shorten()
}

func countRounds(rs map[int][]Round) int {
	n := 0
	for _, r := range rs {
		n += len(r)
	}
	return n
}

// fails reports whether rr found what the shrink keeps.
func (sh *shrinker) fails(rr runResult) bool {
	if len(sh.kinds) == 0 {
		return rr.Wrongs > 0
	}
	for _, k := range rr.Kinds {
		if slices.Contains(sh.kinds, k) {
			return true
		}
	}
	return false
}

// first runs cands, up to -sim.jobs at once, in order, and returns the
// index of the first that fails as the shrink's run did (-1: none), which
// becomes the best schedule.
func (sh *shrinker) first(cands []Schedule) int {
	jobs := max(*simJobs, 1)
	for i := 0; i < len(cands); i += jobs {
		if time.Now().After(sh.deadline) {
			return -1
		}
		batch := cands[i:min(i+jobs, len(cands))]
		res := make([]runResult, len(batch))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for j, c := range batch {
			wg.Go(func() { res[j], errs[j] = sh.run(c) })
		}
		wg.Wait()
		sh.runs += len(batch)
		for j := range batch {
			if errs[j] != nil {
				sh.t.Logf("shrink: %v", errs[j])
				continue
			}
			if sh.fails(res[j]) {
				sh.best, sh.bestRes = batch[j], res[j]
				sh.t.Logf("shrink: run %d fails (%s): %s", sh.runs, strings.Join(res[j].Kinds, ", "), batch[j].brief())
				return i + j
			}
		}
	}
	return -1
}

// shorten cuts the run two seconds after its first finding, if that is
// shorter.
func (sh *shrinker) shorten() {
	f := sh.bestRes.First
	if f == 0 {
		return
	}
	d := (f + 2*time.Second).Truncate(time.Second)
	if d >= sh.best.Duration {
		return
	}
	c := sh.best.clone()
	c.Duration = d
	sh.first([]Schedule{c})
}

// window tries the run with only the rounds and faults that started
// within each of windows before the first finding: one run that fails
// leaves most of the run out, and makes the runs after it cheap (an idle
// simulated second costs little).
func (sh *shrinker) window() {
	first := sh.bestRes.First
	if first == 0 {
		return
	}
	var cands []Schedule
	for _, w := range windows {
		c := sh.best.clone()
		c.Faults = []int{}
		for _, f := range sh.bestRes.Acted {
			if f.At >= first-w {
				c.Faults = append(c.Faults, f.K)
			}
		}
		c.Rounds = make(map[int][]Round)
		for w2, rs := range sh.bestRes.Rounds {
			for _, r := range rs {
				if r.At >= first-w {
					r.At = r.At.Truncate(time.Millisecond)
					c.Rounds[w2] = append(c.Rounds[w2], r)
				}
			}
		}
		c.Workers = append([]int{}, slices.Sorted(maps.Keys(c.Rounds))...)
		cands = append(cands, c)
	}
	sh.first(cands)
}

// dropWorkers leaves out workers.
func (sh *shrinker) dropWorkers() {
	ws := sh.best.Workers
	if ws == nil {
		ws = make([]int, Guarded(sh.best.Seed, sh.best.Duration).Workers)
		for i := range ws {
			ws[i] = i
		}
	}
	ddmin(sh, ws, nil, func(keep []int) Schedule {
		c := sh.best.clone()
		c.Workers = keep
		if c.Rounds != nil {
			for w := range c.Rounds {
				if !slices.Contains(keep, w) {
					delete(c.Rounds, w)
				}
			}
		}
		return c
	})
}

// dropFaults leaves out faults: of those that acted in the best run.
func (sh *shrinker) dropFaults() {
	at := func(f Fault) time.Duration { return f.At }
	ddmin(sh, slices.Clone(sh.bestRes.Acted), at, func(keep []Fault) Schedule {
		c := sh.best.clone()
		c.Faults = []int{}
		for _, f := range keep {
			c.Faults = append(c.Faults, f.K)
		}
		return c
	})
}

// dropRounds lists each worker's rounds, with their times in the best
// run (to the millisecond), and leaves out rounds.
func (sh *shrinker) dropRounds() {
	c := sh.best.clone()
	if c.Workers == nil {
		c.Workers = make([]int, Guarded(c.Seed, c.Duration).Workers)
		for i := range c.Workers {
			c.Workers[i] = i
		}
	}
	c.Rounds = make(map[int][]Round)
	var all []workerRound
	for _, w := range c.Workers {
		for _, r := range sh.bestRes.Rounds[w] {
			r.At = r.At.Truncate(time.Millisecond)
			c.Rounds[w] = append(c.Rounds[w], r)
			all = append(all, workerRound{w, r})
		}
	}
	if sh.first([]Schedule{c}) < 0 {
		sh.t.Logf("shrink: the rounds at the times they had, to the millisecond, do not fail: the rounds are kept whole")
		return
	}
	ddmin(sh, all, func(wr workerRound) time.Duration { return wr.r.At }, func(keep []workerRound) Schedule {
		c := sh.best.clone()
		c.Workers, c.Rounds = nil, make(map[int][]Round)
		for _, wr := range keep {
			c.Rounds[wr.w] = append(c.Rounds[wr.w], wr.r)
		}
		c.Workers = append([]int{}, slices.Sorted(maps.Keys(c.Rounds))...)
		return c
	})
}

type workerRound struct {
	w int
	r Round
}

// windows are how long before the first finding the items a shrink
// tries first began: what came long before a finding seldom made it.
var windows = []time.Duration{5 * time.Second, 20 * time.Second}

// ddmin leaves out of items what the run does not need to fail
// (Zeller's delta debugging: each of n parts alone, then all but each,
// n doubling when neither fails), each candidate made by with; the best
// schedule follows every candidate that fails. When items have times (at),
// none, then those within each of windows before the first finding, are
// tried first.
func ddmin[T any](sh *shrinker, items []T, at func(T) time.Duration, with func([]T) Schedule) {
	if len(items) == 0 {
		return
	}
	cands := [][]T{{}}
	if first := sh.bestRes.First; at != nil && first > 0 {
		for _, w := range windows {
			var in []T
			for _, it := range items {
				if at(it) >= first-w {
					in = append(in, it)
				}
			}
			if len(in) > 0 && len(in) < len(items) && len(in) > len(cands[len(cands)-1]) {
				cands = append(cands, in)
			}
		}
	}
	scheds := make([]Schedule, len(cands))
	for i, c := range cands {
		scheds[i] = with(c)
	}
	switch i := sh.first(scheds); {
	case i == 0:
		return
	case i > 0:
		items = cands[i]
	}
	n := 2
	for len(items) >= 2 && time.Now().Before(sh.deadline) {
		parts := split(items, n)
		cands := slices.Clone(parts)
		if n > 2 {
			for i := range parts {
				var rest []T
				for j, p := range parts {
					if j != i {
						rest = append(rest, p...)
					}
				}
				cands = append(cands, rest)
			}
		}
		scheds := make([]Schedule, len(cands))
		for i, c := range cands {
			scheds[i] = with(c)
		}
		if i := sh.first(scheds); i >= 0 {
			items = cands[i]
			if i < len(parts) {
				n = 2
			} else {
				n = max(n-1, 2)
			}
			continue
		}
		if n >= len(items) {
			break
		}
		n = min(2*n, len(items))
	}
}

// split cuts items into n parts of nearly equal length.
func split[T any](items []T, n int) [][]T {
	var out [][]T
	for i := range n {
		lo, hi := i*len(items)/n, (i+1)*len(items)/n
		if lo < hi {
			out = append(out, items[lo:hi])
		}
	}
	return out
}

func (s Schedule) clone() Schedule {
	c := s
	c.Workers, c.Faults = slices.Clone(s.Workers), slices.Clone(s.Faults)
	if s.Workers != nil && c.Workers == nil {
		c.Workers = []int{}
	}
	if s.Faults != nil && c.Faults == nil {
		c.Faults = []int{}
	}
	if s.Rounds != nil {
		c.Rounds = make(map[int][]Round, len(s.Rounds))
		for w, rs := range s.Rounds {
			c.Rounds[w] = slices.Clone(rs)
		}
	}
	return c
}

// brief describes s in a line.
func (s Schedule) brief() string {
	ws, fs := "all", "all"
	if s.Workers != nil {
		ws = fmt.Sprint(s.Workers)
	}
	if s.Faults != nil {
		fs = fmt.Sprintf("%d", len(s.Faults))
	}
	rounds := "all"
	if s.Rounds != nil {
		rounds = fmt.Sprint(countRounds(s.Rounds))
	}
	return fmt.Sprintf("%v, workers %s, rounds %s, faults %s", s.Duration, ws, rounds, fs)
}

// test is s as a test of this package, which fails while the run finds
// what rr found.
func (s Schedule) test(rr runResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// TestSimSeed%dShrunk replays seed %d's run as -sim.shrink reduced it: it\n// finds %s (history %s).\n", s.Seed, s.Seed, strings.Join(slices.Compact(slices.Clone(rr.Kinds)), ", "), rr.Hash)
	fmt.Fprintf(&b, "func TestSimSeed%dShrunk(t *testing.T) {\n\tReplay(t, Schedule{\n\t\tSeed: %d,\n\t\tDuration: %s,\n", s.Seed, s.Seed, goDuration(s.Duration))
	if s.Workers != nil {
		fmt.Fprintf(&b, "\t\tWorkers: %s,\n", goInts(s.Workers))
	}
	if s.Rounds != nil {
		b.WriteString("\t\tRounds: map[int][]Round{\n")
		for _, w := range slices.Sorted(maps.Keys(s.Rounds)) {
			var rs []string
			for _, r := range s.Rounds[w] {
				rs = append(rs, fmt.Sprintf("{N: %d, At: %s}", r.N, goDuration(r.At)))
			}
			fmt.Fprintf(&b, "\t\t\t%d: {%s},\n", w, strings.Join(rs, ", "))
		}
		b.WriteString("\t\t},\n")
	}
	if s.Faults != nil {
		fmt.Fprintf(&b, "\t\tFaults: %s,\n", goInts(s.Faults))
	}
	b.WriteString("\t})\n}\n")
	out, err := format.Source([]byte(b.String()))
	if err != nil {
		return b.String()
	}
	return string(out)
}

func goInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[]int{" + strings.Join(parts, ", ") + "}"
}

// goDuration writes d as Go: in the largest unit that holds it whole.
func goDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Minute, "time.Minute"}, {time.Second, "time.Second"}, {time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"}} {
		if d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d * time.Nanosecond", d)
}

// TestShrinkFindsWhatFails shrinks a made-up run that fails iff it has
// faults 17 and 42 and worker 3's round 5 (started at 12.3456 s), and
// which reports all of what a seed's run reports: the shrink must end with
// exactly those, the other workers and rounds left out, the run cut after
// its finding.
func TestShrinkFindsWhatFails(t *testing.T) {
	all := Schedule{Seed: 9, Duration: 2 * time.Minute}
	full := func(s Schedule) runResult {
		rr := runResult{Rounds: make(map[int][]Round)}
		for k := range 200 {
			if s.acts(k) {
				rr.Acted = append(rr.Acted, Fault{K: k, At: time.Duration(k) * 500 * time.Millisecond})
			}
		}
		for w := range 6 {
			if !s.runs(w) {
				continue
			}
			if rs, ok := s.rounds(w); ok {
				rr.Rounds[w] = rs
				continue
			}
			for n := range 50 {
				rr.Rounds[w] = append(rr.Rounds[w], Round{N: n, At: time.Duration(n)*2*time.Second + 345678*time.Nanosecond + time.Duration(w)*time.Second})
			}
		}
		has := func(k int) bool { return s.acts(k) }
		round := false
		if rs, ok := s.rounds(3); ok && s.runs(3) {
			for _, r := range rs {
				round = round || r.N == 5 && r.At == 13*time.Second
			}
		} else {
			round = s.runs(3) && s.Duration >= 15*time.Second
		}
		if has(17) && has(42) && round && s.Duration >= 22*time.Second {
			rr.Violations, rr.Kinds, rr.First = 1, []string{"exclusion"}, 21*time.Second+500*time.Millisecond
		}
		return rr
	}
	runs := 0
	sh := newShrinker(t, func(s Schedule) (runResult, error) { runs++; return full(s), nil }, all, full(all))
	defer func(j int) { *simJobs = j }(*simJobs)
	*simJobs = 1 // the runs counted in order
	sh.shrink()
	want := Schedule{Seed: 9, Duration: 23 * time.Second, Workers: []int{3}, Rounds: map[int][]Round{3: {{N: 5, At: 13 * time.Second}}}, Faults: []int{17, 42}}
	if !reflect.DeepEqual(sh.best, want) {
		t.Errorf("shrunk to %+v in %d runs, want %+v", sh.best, runs, want)
	}
	t.Logf("%d runs:\n%s", runs, sh.best.test(sh.bestRes))
}
