package sim

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-go/redlock/internal/history"
)

// TestSim runs the simulator: the library's Client, go-redis's clients and
// in-process nodes in one synctest bubble, the nemesis's workload and a
// nemesis of its own, judged by internal/history. Every seed of SimSeeds
// runs -sim.dur, then a fresh one; -sim.seed=S replays S alone:
//
//	go test ./internal/sim -run TestSim -sim.seed=S -sim.dur=D
var (
	simSeed  = flag.Uint64("sim.seed", 0, "replay this seed alone (0: the fixed seeds and a fresh one)")
	simDur   = flag.Duration("sim.dur", 0, "simulated time of each seed's run (0: 2m, or 1m under -race)")
	simStall = flag.Duration("sim.stall", 30*time.Second, "wall time without the bubble's clock moving after which the watchdog reports a stall")
	simTrace = flag.String("sim.trace", "", "write each run's whole trace to this file (a seed's run to FILE.SEED)")
	simCmds  = flag.String("sim.cmds", "", "trace every command a client sends a node that names a key with this prefix, with its arguments (see -sim.trace)")
	simShard = flag.String("sim.shard", "", "K/N: run only the seeds whose index in the list is K modulo N, so that N processes share the list (test.sh runs two, one per core)")
)

// shardOf returns the seeds of shard spec ("K/N"; "" for all).
func shardOf(seeds []uint64, spec string) ([]uint64, error) {
	if spec == "" {
		return seeds, nil
	}
	var k, n int
	if _, err := fmt.Sscanf(spec, "%d/%d", &k, &n); err != nil || n <= 0 || k < 0 || k >= n {
		return nil, fmt.Errorf("-sim.shard=%q: want K/N with 0 <= K < N", spec)
	}
	var out []uint64
	for i, s := range seeds {
		if i%n == k {
			out = append(out, s)
		}
	}
	return out, nil
}

// SimSeeds are the seeds every run of TestSim replays. On the commit
// before the tombstones each found, in most runs, values that outlived
// their Locks: a command held back while its connection was reset, sent
// again by go-redis, that landed after its Lock's Release or its failed
// attempt's rollback (docs/testing.md has the figures).
var SimSeeds = []uint64{2, 5, 6, 7, 8}

// Guarded is the run within the assumptions: every fault, the restart
// guard on, and nodes at latencies from the seed (NodeLatencies: up to
// 75 ms one way, a quorum near in most runs).
func Guarded(seed uint64, dur time.Duration) Config {
	return Config{
		Seed: seed, Duration: dur, Nodes: 5, Slots: 3, Workers: 6, Keys: 8,
		Latency: 200 * time.Microsecond, Far: 75 * time.Millisecond, Guard: MaxTTL, Skew: 300 * time.Millisecond,
		Faults: []string{FaultDelay, FaultBlackhole, FaultPartition, FaultDrop, FaultHoldReset, FaultHoldReset, FaultHoldReset,
			FaultLateBeyond, FaultHoldHandover, FaultStop, FaultStopLong, FaultCrash, FaultRestartEmpty, FaultFlush, FaultClock, FaultPause,
			FaultHoldQuick, FaultHoldQuick, FaultHoldQuick, FaultFar},
		FaultEvery: 500 * time.Millisecond, Think: 200 * time.Millisecond,
		Owners: true, Shared: true, Permits: true, Multi: true, Stalled: true, Long: true, Elections: true, Hot: true, Quick: true,
		Handover:     handoverCommand,
		ReplaceEvery: 90 * time.Second, ResidueBound: 2 * time.Second,
	}
}

// handoverCommand picks a command of the handover script, by its hash as
// EVALSHA sends it, and then the leaving Lock's delete (the script that
// scripts/release_one.lua ends), by its hash and the leaving Lock's
// prefix, the last of the handover's arguments that ends with a dot
// (FaultHoldHandover). Each script is found by the first line of its
// file, among those the nodes have loaded.
var handoverCommand = &HandoverFault{
	Handover: func(b []byte) bool {
		sha := scriptWith("-- handover: ")
		return sha != nil && bytes.Contains(b, sha)
	},
	LeavingDelete: func(h []byte) func([]byte) bool {
		release := scriptWith("-- release_one: ")
		if release == nil {
			return nil
		}
		var leaving []byte
		for _, a := range bytes.Split(h, []byte("\r\n")) {
			if len(a) > 1 && a[len(a)-1] == '.' {
				leaving = a
			}
		}
		if leaving == nil {
			return nil
		}
		return func(b []byte) bool { return bytes.Contains(b, release) && bytes.Contains(b, leaving) }
	},
}

// Handovers is the run where a Release hands its key to a waiter of its
// Client: no restart guard and no fencing, which the handover does not
// do (docs/waiting.md), and so no fault that restarts a node empty or
// flushes it, which an unguarded Client's Locks do not survive; the hot
// key brings waiters of one Client together, and every fault that holds a
// handover back, or a node, or a command past its deadline, acts, and far,
// which slows the handover's node and then its reply.
func Handovers(seed uint64, dur time.Duration) Config {
	cfg := Guarded(seed, dur)
	cfg.Guard, cfg.Unfenced = 0, true
	cfg.Faults = []string{FaultDelay, FaultBlackhole, FaultDrop, FaultHoldReset, FaultLateBeyond,
		FaultHoldHandover, FaultHoldHandover, FaultHoldHandover, FaultStop, FaultStopLong, FaultCrash, FaultClock, FaultFar}
	cfg.Quick = false // the quick rounds are for hold-quick, not made here
	return cfg
}

// TestSimHandovers runs Handovers on the fixed seeds, a simulated minute
// each, as TestSim runs its seeds (deterministic, in wasm; in this
// process under -race, for two of them).
func TestSimHandovers(t *testing.T) {
	dur := *simDur
	if dur == 0 {
		dur = time.Minute
	}
	runs, err := schedules(dur)
	if err != nil {
		t.Fatal(err)
	}
	if *simSeed == 0 && *simSchedule == "" { // the fixed seeds: a fresh one is TestSim's
		runs = slices.DeleteFunc(runs, func(s Schedule) bool { return !slices.Contains(SimSeeds, s.Seed) })
	}
	for i := range runs {
		runs[i].Handovers = true
	}
	x := newExecutor(t, raceOn)
	result := startRuns(t, x, runs)
	for i, s := range runs {
		t.Run(fmt.Sprintf("seed=%d", s.Seed), func(t *testing.T) {
			rr := result(t, i)
			if rr.failed() {
				t.Errorf("%d violations, %d wrongs\n%s\nreplay: %s", rr.Violations, rr.Wrongs, firstLines(rr.Report, 12), replay(t, s.config()))
			}
		})
	}
}

func TestSim(t *testing.T) {
	TraceCommandsOf = *simCmds
	dur := *simDur
	if dur == 0 {
		dur = 2 * time.Minute
		if raceOn {
			dur = time.Minute
		}
	}
	runs, err := schedules(dur)
	if err != nil {
		t.Fatal(err)
	}
	x := newExecutor(t, raceOn)
	result := startRuns(t, x, runs)
	var failed []string
	for i, s := range runs {
		t.Run(fmt.Sprintf("seed=%d", s.Seed), func(t *testing.T) {
			rr := result(t, i)
			if rr.failed() && rr.First > 0 {
				t.Logf("first finding: %s at %v", rr.FirstKind, rr.First.Round(time.Millisecond))
			}
			if rr.failed() {
				if x != nil {
					t.Errorf("%d violations, %d wrongs (the findings are above)", rr.Violations, rr.Wrongs)
				} else {
					t.Errorf("%d violations, %d wrongs\n%s", rr.Violations, rr.Wrongs, rr.Report)
				}
				failed = append(failed, fmt.Sprintf("seed %d: %d violations, %d wrongs; replay: %s\n%s",
					s.Seed, rr.Violations, rr.Wrongs, replay(t, s.config()), firstLines(rr.Report, 12)))
				if *simShrink {
					shrink(t, x, s, rr)
				}
			}
		})
	}
	// CI shows the tail of a failing test's output: the findings again,
	// last, so that the tail holds them and not the next seed's summary.
	if len(failed) > 0 && *simResult == "" { // a wasm run's test that started it says it
		t.Errorf("failed seeds:\n%s", strings.Join(failed, "\n"))
	}
}

// firstLines is s cut to its first n lines, each to 400 bytes.
func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... %d more lines above", len(lines)-n))
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "..."
		}
	}
	return strings.Join(lines, "\n")
}

// runSim runs cfg in a bubble of its own, under a watchdog, and logs its
// summary and how to replay it.
func runSim(t *testing.T, cfg Config) (*Result, time.Duration) {
	t.Helper()
	var progress atomic.Int64
	cfg.Progress = &progress
	stop := watchdog(cfg.Seed, replay(t, cfg), &progress, *simStall, stalled)
	defer stop()
	start := time.Now()
	var res *Result
	prev := runtime.GOMAXPROCS(1) // one P: fewer interleavings, a seed comes back more often
	defer runtime.GOMAXPROCS(prev)
	defer debug.SetGCPercent(debug.SetGCPercent(300)) // a fifth less CPU for some 100 MB more
	bubble(t, func(t *testing.T) {
		res = Run(cfg)
	})
	wall := time.Since(start)
	if *simTrace != "" {
		path := fmt.Sprintf("%s.%d", *simTrace, cfg.Seed)
		f, err := os.Create(path)
		if err == nil {
			_, err = res.Trace.WriteTo(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Errorf("trace: %v", err)
		}
		t.Logf("trace: %s", path)
	}
	t.Log(res.Summary(cfg))
	if bases := NodeLatencies(cfg); bases != nil {
		t.Logf("nodes' base latencies, one way: %v", bases)
	}
	if runtime.GOOS != "wasip1" { // a wasm run's clock is not the wall's: the test that started it says
		t.Logf("%v simulated in %v of wall time (%.1f simulated hours per wall minute); %d trace events",
			res.Simulated.Round(time.Second), wall.Round(time.Millisecond), res.Simulated.Hours()/wall.Minutes(), res.Trace.Len())
	}
	t.Logf("outcomes: %s", res.Outcomes)
	if cfg.Elections {
		t.Log(electionLine(res.Record))
	}
	if res.Violations() > 0 || len(res.Wrongs) > 0 {
		t.Logf("replay: %s", replay(t, cfg))
	}
	return res, wall
}

// replay is the command that runs cfg's seed again.
func replay(t *testing.T, cfg Config) string {
	name := t.Name()
	if i := strings.LastIndex(name, "/"); i >= 0 && strings.HasPrefix(name[i+1:], "seed=") {
		name = name[:i] // TestSim/seed=S: -sim.seed selects the seed
	}
	cmd := fmt.Sprintf("go test ./internal/sim -run '^%s$' -v -sim.seed=%d -sim.dur=%v", strings.ReplaceAll(name, "/", "$/^"), cfg.Seed, cfg.Duration)
	if cfg.Schedule != nil {
		b, _ := json.Marshal(cfg.Schedule)
		cmd = fmt.Sprintf("go test ./internal/sim -run '^TestSim$' -v -sim.schedule='%s'", b)
	}
	return cmd
}

// watchdog watches the bubble from outside it: when its clock has not
// moved for stall of wall time (a goroutine blocked on a mutex whose holder
// waits for the clock stops it, silently), it calls report with what to
// print: the seed, the replay command and every goroutine's stack.
func watchdog(seed uint64, cmd string, progress *atomic.Int64, stall time.Duration, report func(string)) (stop func()) {
	done := make(chan struct{})
	go func() {
		last, since := progress.Load(), time.Now()
		tick := time.NewTicker(min(time.Second, stall/4))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if p := progress.Load(); p != last {
				last, since = p, time.Now()
				continue
			}
			if time.Since(since) < stall {
				continue
			}
			buf := make([]byte, 64<<20)
			buf = buf[:runtime.Stack(buf, true)]
			report(fmt.Sprintf("sim: the bubble's clock has not moved for %v of wall time (seed %d, at %s simulated): stalled\nreplay: %s\n\n%s\n",
				stall, seed, time.Unix(0, last).UTC().Format("15:04:05.000"), cmd, buf))
			return
		}
	}()
	return func() { close(done) }
}

// stalled prints the watchdog's report and ends the test binary, which
// would otherwise hang on the stalled bubble.
func stalled(report string) {
	fmt.Fprint(os.Stderr, report)
	os.Exit(2)
}

// bubble runs f in a synctest bubble of its own, then empties the
// process's sync.Pools (two garbage collections do): the library's engine
// pools values that hold channels, and a channel made in one bubble may
// not be used from another (Go panics: "receive on synctest channel from
// outside bubble"), which the next bubble's Client would do with a pooled
// one.
func bubble(t *testing.T, f func(*testing.T)) {
	t.Helper()
	synctest.Test(t, f)
	runtime.GC()
	runtime.GC()
}

// electionLine counts what the elections did: the leaderships, and the
// observers' reports of a leader and of none, which the terms and
// observers rules judged.
func electionLine(r *history.Record) string {
	leaderships, seen, none := 0, 0, 0
	for _, l := range r.Locks {
		if l.Election {
			leaderships++
		}
	}
	for _, o := range r.Observations {
		if o.None {
			none++
		} else {
			seen++
		}
	}
	return fmt.Sprintf("elections: %d leaderships, %d observer reports of a leader, %d of none", leaderships, seen, none)
}
