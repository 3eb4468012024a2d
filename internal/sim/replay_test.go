package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/history"
)

// Deterministic replay. A run of the simulator in this process is not the
// same twice: Go's scheduler, select's choice, map order and the seeds of
// math/rand and crypto/rand (the library's jitter, go-redis's backoff, the
// Locks' tokens) come from the runtime, whose random state the kernel
// seeds at each start, and its preemption from the wall clock. So TestSim
// runs each seed in this package's test binary compiled for wasip1 and run
// by wasirun (internal/wasirun, under wazero): one thread, no preemption,
// every random byte the runtime reads drawn from the seed, and clocks that
// move only as the program reads them. A seed's run is then a function of
// the seed and the source: the same history, and its hash, every time, on
// any machine with the module's toolchain.

var (
	simExec = flag.String("sim.exec", "", "where a seed runs: wasm (deterministic, compiled for wasip1 and run by internal/wasirun; the default) "+
		"or native (in this process: about ten times faster, not the same twice; the default of TestSim under -race, which wasm lacks)")
	simSchedule = flag.String("sim.schedule", "", "run this schedule (JSON of a Schedule) instead of the seeds: how a wasm run gets its own")
	simResult   = flag.String("sim.result", "", "write each run's result (JSON) to this file: how a wasm run reports to the test that started it")
	simFirst    = flag.Bool("sim.first", false, "stop each run at its first finding (TestPlantedBugs's runs)")
	simIO       = flag.String("sim.io", "", "-sim.result, -sim.trace and -sim.stall of a wasm run, as JSON padded to a fixed length (runIO)")
)

// runIO is what a wasm run is told that must not change its history: its
// arguments are in its memory, and one of another length may lay its heap
// out otherwise (a map of pointers is then iterated in another order), so
// these paths go in one argument of a fixed length.
type runIO struct {
	Result, Trace string
	Stall         time.Duration
}

const runIOLen = 4096

func (rio runIO) arg() (string, error) {
	b, err := json.Marshal(rio)
	if err != nil {
		return "", err
	}
	if len(b) > runIOLen {
		return "", fmt.Errorf("paths of a wasm run longer than %d bytes: %s", runIOLen, b)
	}
	return "-sim.io=" + string(b) + strings.Repeat(" ", runIOLen-len(b)), nil
}

// applyIO sets -sim.result, -sim.trace and -sim.stall from -sim.io.
func applyIO() error {
	if *simIO == "" {
		return nil
	}
	var rio runIO
	if err := json.Unmarshal([]byte(*simIO), &rio); err != nil {
		return fmt.Errorf("-sim.io: %v", err)
	}
	*simResult, *simTrace, *simStall = rio.Result, rio.Trace, rio.Stall
	return nil
}

// runResult is what a run reports to the test that started it.
type runResult struct {
	Seed       uint64
	Hash       string // Result.Hash
	Summary    string
	Violations int
	Wrongs     int
	Kinds      []string      // the findings' kinds, in order
	First      time.Duration // when the first finding happened, after the workload's start (0: not known)
	FirstKind  string        // its kind
	Report     string        // the findings, each with the trace around it
	Simulated  time.Duration
	Ops        int
	Rounds     map[int][]Round // Result.Rounds
	Acted      []Fault         // Result.Acted
	Wall       time.Duration   // the run's wall time, as the test that started it measured it
}

func (rr runResult) failed() bool { return rr.Violations > 0 || rr.Wrongs > 0 }

func resultOf(res *Result, cfg Config) runResult {
	rr := runResult{Seed: cfg.Seed, Hash: res.Hash(), Summary: res.Summary(cfg), Violations: res.Violations(), Wrongs: len(res.Wrongs),
		Report: res.Report(5), Simulated: res.Simulated, Ops: res.OpTotal, Rounds: res.Rounds, Acted: res.Acted}
	for _, f := range res.Verdict.Found {
		rr.Kinds = append(rr.Kinds, f.Kind)
		if !f.At.IsZero() && (rr.First == 0 || f.At.Sub(res.Began) < rr.First) {
			rr.First = max(f.At.Sub(res.Began), time.Nanosecond)
			rr.FirstKind = f.Kind
		}
	}
	return rr
}

// config is the run of s: the guarded run of its seed, less what s leaves
// out.
func (s Schedule) config() Config {
	cfg := Guarded(s.Seed, s.Duration)
	if s.Handovers {
		cfg = Handovers(s.Seed, s.Duration)
	}
	if s.Workers != nil || s.Rounds != nil || s.Faults != nil || s.Handovers {
		cfg.Schedule = &s
	}
	if s.First {
		cfg.Stop = func(v *history.Verdict) bool { return len(v.Found) > 0 }
	}
	return cfg
}

// runHere runs s in this process and logs its summary; with -sim.result,
// it writes what it found there too.
func runHere(t *testing.T, s Schedule) runResult {
	t.Helper()
	if err := applyIO(); err != nil {
		t.Fatal(err)
	}
	cfg := s.config()
	res, wall := runSim(t, cfg)
	rr := resultOf(res, cfg)
	rr.Wall = wall
	if *simResult != "" {
		b, err := json.Marshal(rr)
		if err == nil {
			err = os.WriteFile(*simResult, b, 0o644)
		}
		if err != nil {
			t.Errorf("-sim.result: %v", err)
		}
	}
	return rr
}

// executor runs schedules in the wasm build of this package's tests.
type executor struct {
	pkg    string // this package's directory
	bin    string // the test binary, for wasip1
	runner string // wasirun
	cache  string // wazero's compiled code, kept between runs ("": none)
}

var buildMu sync.Mutex // one build at a time: the go command's cache does the rest

// newExecutor builds what runs schedules deterministically into a
// directory of t's, or returns nil when they run in this process: in a
// wasm run itself, and with -sim.exec=native (the default with native).
func newExecutor(t *testing.T, native bool) *executor {
	t.Helper()
	switch {
	case runtime.GOOS == "wasip1":
		return nil
	case *simExec == "native":
		return nil
	case *simExec == "" && native:
		return nil
	case *simExec != "" && *simExec != "wasm":
		t.Fatalf("-sim.exec=%q: want wasm or native", *simExec)
	}
	pkg, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pkg, "schedule.go")); err != nil {
		t.Fatalf("the wasm runs build this package from its directory, and %s is not it: %v", pkg, err)
	}
	dir := t.TempDir()
	x := &executor{pkg: pkg, bin: filepath.Join(dir, "sim.wasm"), runner: filepath.Join(dir, "wasirun")}
	if c, err := os.UserCacheDir(); err == nil {
		x.cache = filepath.Join(c, "redlock", "wasirun")
	}
	goCmd, err := exec.LookPath("go") // go test puts its own first on the PATH
	if err != nil {
		t.Fatalf("the wasm runs are built with the go command: %v", err)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	start := time.Now()
	// -trimpath: the binary is the same wherever the module is checked
	// out, so that a seed replays on another machine's clone.
	build := exec.Command(goCmd, "test", "-c", "-trimpath", "-o", x.bin, ".")
	build.Dir = pkg
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the simulator for wasip1: %v\n%s", err, out)
	}
	// wasirun is a module of its own (wazero stays out of the library's
	// go.mod): built for this machine, whatever GOOS the caller set.
	build = exec.Command(goCmd, "build", "-o", x.runner, ".")
	build.Dir = filepath.Join(pkg, "..", "wasirun")
	build.Env = append(os.Environ(), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH, "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building internal/wasirun: %v\n%s", err, out)
	}
	if x.cache != "" {
		// Compiled once, before the runs that start at once each do it.
		if out, err := exec.Command(x.runner, "-cache", x.cache, "-compile", x.bin).CombinedOutput(); err != nil {
			t.Fatalf("wasirun -compile: %v\n%s", err, out)
		}
	}
	t.Logf("wasm runs: the simulator built for wasip1 and compiled in %v", time.Since(start).Round(time.Millisecond))
	return x
}

// run runs s in a wasm run of its own, relays its output and returns its
// result.
func (x *executor) run(t *testing.T, s Schedule, out io.Writer) (runResult, error) {
	t.Helper()
	sched, err := json.Marshal(s)
	if err != nil {
		return runResult{}, err
	}
	rio := runIO{Result: filepath.Join(t.TempDir(), "result.json"), Stall: *simStall}
	if *simTrace != "" {
		if rio.Trace, err = filepath.Abs(*simTrace); err != nil {
			return runResult{}, err
		}
	}
	ioArg, err := rio.arg()
	if err != nil {
		return runResult{}, err
	}
	// The run's directory is /, whatever the checkout's: its paths are
	// absolute, and its environment is the same everywhere.
	args := []string{"-seed", strconv.FormatUint(s.Seed, 10), "-cwd", "/"}
	if x.cache != "" {
		args = append(args, "-cache", x.cache)
	}
	args = append(args, x.bin, "-test.run=^TestSim$", "-test.v", "-test.timeout=0", "-sim.schedule="+string(sched), ioArg)
	if *simCmds != "" {
		args = append(args, "-sim.cmds="+*simCmds) // it changes the run: the nodes trace more
	}
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-10*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, x.runner, args...)
	cmd.Dir = x.pkg
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		relay(pr, out)
	}()
	start := time.Now()
	err = cmd.Run()
	_ = pw.Close()
	<-relayed
	wall := time.Since(start)
	b, rerr := os.ReadFile(rio.Result)
	if rerr != nil {
		return runResult{}, fmt.Errorf("the wasm run of seed %d ended without a result (%v, after %v): %v", s.Seed, err, wall.Round(time.Millisecond), rerr)
	}
	var rr runResult
	if err := json.Unmarshal(b, &rr); err != nil {
		return runResult{}, err
	}
	rr.Wall = wall
	return rr, nil
}

// relay copies a wasm run's output to w, less the lines that frame its
// tests (=== RUN, --- PASS, PASS, ...), which would read as this process's.
func relay(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch l := strings.TrimSpace(line); {
		case strings.HasPrefix(l, "=== "), strings.HasPrefix(l, "--- "), l == "PASS", l == "FAIL", strings.HasPrefix(l, "ok "):
			continue
		}
		if w != nil {
			fmt.Fprintln(w, line)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// startRuns starts the wasm runs of runs, -sim.jobs at once, and returns
// what waits for run i's end, prints its output and returns its result
// (with x nil: what makes run i in this process).
func startRuns(top *testing.T, x *executor, runs []Schedule) func(t *testing.T, i int) runResult {
	if x == nil {
		return func(t *testing.T, i int) runResult {
			t.Helper()
			return runHere(t, runs[i])
		}
	}
	type run struct {
		done chan struct{}
		out  bytes.Buffer
		rr   runResult
		err  error
	}
	all := make([]*run, len(runs))
	jobs := make(chan struct{}, max(*simJobs, 1))
	for i, s := range runs {
		r := &run{done: make(chan struct{})}
		all[i] = r
		go func() {
			defer close(r.done)
			jobs <- struct{}{}
			defer func() { <-jobs }()
			r.rr, r.err = x.run(top, s, &r.out)
		}()
	}
	return func(t *testing.T, i int) runResult {
		t.Helper()
		r := all[i]
		<-r.done
		_, _ = os.Stdout.Write(r.out.Bytes())
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Logf("seed %d: %v simulated in %v of wall time, deterministic (wasm): history %s", runs[i].Seed, r.rr.Simulated.Round(time.Second), r.rr.Wall.Round(time.Millisecond), r.rr.Hash)
		return r.rr
	}
}

// schedules returns the runs TestSim makes: -sim.schedule's, or
// -sim.seed's, or the fixed seeds and a fresh one, each for dur.
func schedules(dur time.Duration) ([]Schedule, error) {
	if *simSchedule != "" {
		var s Schedule
		if err := json.Unmarshal([]byte(*simSchedule), &s); err != nil {
			return nil, fmt.Errorf("-sim.schedule: %v", err)
		}
		if s.Seed == 0 || s.Duration <= 0 {
			return nil, errors.New("-sim.schedule: a seed and a duration are needed")
		}
		return []Schedule{s}, nil
	}
	seeds := append([]uint64(nil), SimSeeds...)
	switch {
	case *simSeed != 0:
		seeds = []uint64{*simSeed}
	case raceOn:
		seeds = seeds[:2] // the race detector makes it ten times slower
	default:
		seeds = append(seeds, uint64(time.Now().UnixNano()%1_000_000)+1000)
	}
	seeds, err := shardOf(seeds, *simShard)
	if err != nil {
		return nil, err
	}
	out := make([]Schedule, len(seeds))
	for i, seed := range seeds {
		out[i] = Schedule{Seed: seed, Duration: dur, First: *simFirst}
	}
	return out, nil
}

// Replay runs schedule s deterministically (in the wasm build of this
// package's tests) and fails t if the run finds anything: the test that
// -sim.shrink prints is a call of it.
func Replay(t *testing.T, s Schedule) {
	t.Helper()
	x := newExecutor(t, false)
	rr := startRuns(t, x, []Schedule{s})(t, 0)
	if rr.failed() {
		t.Errorf("%d violations (%s), %d wrongs; the run's output is above", rr.Violations, strings.Join(rr.Kinds, ", "), rr.Wrongs)
	}
}
