package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/benchkit"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The multi-process scenario: the harness starts sc.procs copies of its own
// binary as workers (workerEnv set), each of which opens every library on
// its own go-redis clients to the same nodes. For each round and library the
// harness tells every worker to run benchkit.Contend with sc.goroutines
// goroutines on one key from the same wall-clock instant for cfg.sliceTime;
// each worker answers with its acquisitions, waits and held spans as one
// JSON line on stdout. The harness merges the spans of all processes in time
// order to get the handoffs (and to catch overlaps between processes), and
// counts each process's share of the acquisitions.

// workerEnv, when set in the environment, makes the binary a worker.
const workerEnv = "REDLOCK_COMPARE_WORKER"

// workerHello is the first line a worker reads: what to open.
type workerHello struct {
	Addrs      []string `json:"addrs"`
	Libs       []string `json:"libs"`
	Goroutines int      `json:"goroutines"`
	HoldNS     int64    `json:"hold_ns"`
	CtxTimeout bool     `json:"ctx_timeout"`
	Warmup     int      `json:"warmup"`
	Proc       int      `json:"proc"`
	RedisLog   bool     `json:"redis_log"` // keep go-redis's log lines, as the harness's -redis-log
}

// workerRun is one slice for one library.
type workerRun struct {
	Lib        string `json:"lib"`
	Key        string `json:"key"`
	StartNS    int64  `json:"start_unix_ns"`
	DurationNS int64  `json:"duration_ns"`
}

// workerReply answers the hello (Ready or Error) and each run.
type workerReply struct {
	Ready    bool            `json:"ready,omitempty"`
	Error    string          `json:"error,omitempty"`
	Acquired int             `json:"acquired"`
	WaitsNS  []int64         `json:"waits_ns,omitempty"`
	Spans    []benchkit.Span `json:"spans,omitempty"`
	Failures int             `json:"failures"`
	Overlaps int             `json:"overlaps"`
	FirstErr string          `json:"first_err,omitempty"`
}

// workerMain is a worker's life: open the libraries, warm up, run what the
// harness asks until stdin ends, close everything.
func workerMain(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	enc := json.NewEncoder(stdout)
	if !in.Scan() {
		return fmt.Errorf("worker: no hello: %v", in.Err())
	}
	var h workerHello
	if err := json.Unmarshal(in.Bytes(), &h); err != nil {
		return fmt.Errorf("worker: hello: %w", err)
	}
	if !h.RedisLog {
		// As in the harness: a waiter cut off at a slice's end closes its
		// connection, and go-redis logs each reconnect.
		redis.SetLogger(quietLogger{})
	}
	sc := &scenario{name: "worker", kind: contention, nodes: len(h.Addrs), goroutines: h.Goroutines, hold: time.Duration(h.HoldNS)}
	libs := make(map[string]*entrant)
	var entrants []*entrant
	defer func() {
		for _, e := range entrants {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = e.l.close(ctx)
			cancel()
			for _, c := range e.clients {
				_ = c.Close()
			}
		}
	}()
	ctx := context.Background()
	fail := func(err error) error {
		_ = enc.Encode(workerReply{Error: err.Error()})
		return err
	}
	for _, name := range h.Libs {
		i := slices.IndexFunc(contenders(), func(c contender) bool { return c.name == name })
		if i < 0 {
			return fail(fmt.Errorf("worker: unknown library %q", name))
		}
		c := contenders()[i]
		e := &entrant{c: c, s: &sample{lib: name}}
		for _, a := range h.Addrs {
			e.clients = append(e.clients, newClient(a, h.CtxTimeout))
		}
		var err error
		if e.l, err = c.open(e.clients, sc); err != nil {
			return fail(fmt.Errorf("worker: %s: %w", name, err))
		}
		entrants = append(entrants, e)
		libs[name] = e
		e.keys = []string{"cmp:worker:" + strconv.Itoa(h.Proc) + ":" + name}
		good := 0
		var firstErr error
		for range max(h.Warmup, 1) {
			if err := e.once(ctx); err != nil {
				firstErr = firstNonNil(firstErr, err)
			} else {
				good++
			}
		}
		if good == 0 {
			return fail(fmt.Errorf("worker: %s: warm-up: %w", name, firstErr))
		}
	}
	if err := enc.Encode(workerReply{Ready: true}); err != nil {
		return err
	}
	for in.Scan() {
		var r workerRun
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			return fail(fmt.Errorf("worker: run: %w", err))
		}
		e := libs[r.Lib]
		if e == nil {
			return fail(fmt.Errorf("worker: unknown library %q", r.Lib))
		}
		time.Sleep(time.Until(time.Unix(0, r.StartNS)))
		c := benchkit.Contend(ctx, benchkit.Run{Goroutines: h.Goroutines, Duration: time.Duration(r.DurationNS),
			Hold: time.Duration(h.HoldNS), Spans: true},
			func(ctx context.Context) (any, error) { return e.l.lock(ctx, r.Key) }, e.l.unlock)
		rep := workerReply{Acquired: c.Acquired, Spans: c.Spans, Failures: c.Failures, Overlaps: c.Overlaps}
		for _, w := range slices.Concat(c.Waits, c.OpenWaits) {
			rep.WaitsNS = append(rep.WaitsNS, int64(w))
		}
		if c.FirstErr != nil {
			rep.FirstErr = c.FirstErr.Error()
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	return in.Err()
}

// worker is the harness's end of one worker process.
type worker struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	enc  *json.Encoder
	proc int
}

func startWorker(ctx context.Context, proc int, h workerHello) (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, in: in, out: bufio.NewScanner(out), enc: json.NewEncoder(in), proc: proc}
	w.out.Buffer(make([]byte, 1<<16), 64<<20)
	h.Proc = proc
	if err := w.enc.Encode(h); err != nil {
		w.stop()
		return nil, err
	}
	rep, err := w.read()
	if err == nil && !rep.Ready {
		err = errors.New("worker not ready")
	}
	if err != nil {
		w.stop()
		return nil, fmt.Errorf("worker %d: %w", proc, err)
	}
	return w, nil
}

func (w *worker) read() (workerReply, error) {
	var rep workerReply
	if !w.out.Scan() {
		return rep, fmt.Errorf("worker %d ended: %v", w.proc, w.out.Err())
	}
	if err := json.Unmarshal(w.out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("worker %d: %w", w.proc, err)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("worker %d: %s", w.proc, rep.Error)
	}
	return rep, nil
}

// stop closes the worker's stdin, so that it closes its libraries and
// exits, and waits for it.
func (w *worker) stop() error {
	_ = w.in.Close()
	return w.cmd.Wait()
}

// runMultiProc runs the multi-process scenario: every eligible library, in
// rounds whose order rotates, on sc.procs workers at once.
func runMultiProc(ctx context.Context, cfg config, servers []*redistest.Server, sc *scenario) (res *result, err error) {
	addrs := make([]string, sc.nodes)
	for i := range addrs {
		addrs[i] = servers[i].Addr()
	}
	res = &result{sc: sc}
	var libs []string
	for _, c := range contenders() {
		if sc.runs(c) {
			libs = append(libs, c.name)
			res.samples = append(res.samples, &sample{lib: c.name, shares: make([]int, sc.procs)})
		}
	}
	h := workerHello{Addrs: addrs, Libs: libs, Goroutines: sc.goroutines, HoldNS: int64(sc.hold),
		CtxTimeout: cfg.ctxTimeout, Warmup: cfg.warmup, RedisLog: cfg.redisLog}
	var workers []*worker
	defer func() {
		for _, w := range workers {
			if werr := w.stop(); werr != nil && err == nil {
				err = fmt.Errorf("worker %d: %w", w.proc, werr)
			}
		}
	}()
	for p := range sc.procs {
		w, err := startWorker(ctx, p, h)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	stats := newNodeStats(ctx, addrs)
	defer stats.close()
	spent := make([]time.Duration, len(libs))
	for round := range cfg.rounds {
		for i := range libs {
			li := (round + i) % len(libs)
			s := res.samples[li]
			if spent[li] >= cfg.budget {
				s.stopped = true
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			begin := time.Now()
			run := workerRun{Lib: libs[li], Key: "cmp:" + sc.name + ":" + libs[li] + ":round" + strconv.Itoa(round),
				StartNS: time.Now().Add(30 * time.Millisecond).UnixNano(), DurationNS: int64(cfg.sliceTime)}
			before, ops := stats.snapshot(ctx), s.ops
			for _, w := range workers {
				if err := w.enc.Encode(run); err != nil {
					return nil, fmt.Errorf("worker %d: %w", w.proc, err)
				}
			}
			var spans []benchkit.Span
			for p, w := range workers {
				rep, err := w.read()
				if err != nil {
					return nil, err
				}
				s.ops += rep.Acquired
				s.shares[p] += rep.Acquired
				s.failures += rep.Failures
				s.overlaps += rep.Overlaps
				if rep.FirstErr != "" {
					s.firstErr = firstNonNil(s.firstErr, fmt.Errorf("process %d: %s", p, rep.FirstErr))
				}
				for _, ns := range rep.WaitsNS {
					s.wait = append(s.wait, time.Duration(ns))
				}
				spans = append(spans, rep.Spans...)
			}
			s.addNodes(stats.since(ctx, before), s.ops-ops)
			s.busy += cfg.sliceTime
			// Merged in time order, the spans of all processes give the
			// handoffs; a span that starts before the previous one ended
			// is an overlap between processes.
			slices.SortFunc(spans, func(a, b benchkit.Span) int { return cmp.Compare(a.Acquired, b.Acquired) })
			for j := 1; j < len(spans); j++ {
				gap := spans[j].Acquired - spans[j-1].Released
				if gap < 0 {
					s.overlaps++
					continue
				}
				s.lat = append(s.lat, time.Duration(gap))
			}
			spent[li] += time.Since(begin)
		}
	}
	for li, s := range res.samples {
		cfg.logf("  %-16s ops=%d shares=%v failures=%d spent=%v", s.lib, s.ops, s.shares, s.failures, spent[li].Round(time.Millisecond))
	}
	return res, nil
}
