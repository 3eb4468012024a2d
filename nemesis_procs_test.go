package redlock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
)

// This file runs the nemesis's workers in processes of their own: the test
// binary run again (TestNemesisWorkerProcess), each process with workers
// and Clients of its own, streaming what they do to TestNemesis as it
// happens, so that the nemesis can stop (SIGSTOP) and kill (SIGKILL) a
// client process, as a GC pause or a crash does. The fenced store the
// workers write to lives in TestNemesis's process (nemStore), out of reach
// of the faults.
//
// Instants: every process reads the wall clock once (nemAnchor) and adds
// its monotonic elapsed time (stamp), so that instants of different
// processes compare (one machine, one clock) and a step of the wall clock
// mid-run moves none of them. A record is sent before the call it starts
// returns control (a Release's start before the Release) and after the
// call it ends: a process killed mid-run loses at most its calls in
// flight, which may hide a violation but never invent one.

// nemWorkerEnv holds a worker process's nemWorkerConfig; without it
// TestNemesisWorkerProcess skips.
const nemWorkerEnv = "REDLOCK_NEMESIS_WORKER"

var (
	nemAnchor     = time.Now()
	nemWallAnchor = nemAnchor.Round(0)
)

// stamp returns t (a reading of this process's clock, with its monotonic
// part) as the instant the checker compares across processes.
func stamp(t time.Time) time.Time { return nemWallAnchor.Add(t.Sub(nemAnchor)) }

func nemNow() time.Time { return stamp(time.Now()) }

// nemWorkerConfig is what a worker process runs.
type nemWorkerConfig struct {
	Proc    string   // its name in the records, "p0", "p1", ...
	Num     int      // its number, for its seeds and ids
	Workers []int    // the numbers of its workers
	Nodes   []string // the proxies' addresses
	Store   string   // the fenced store's address
	Seed    uint64
	Guarded bool
	Keys    []string
	// WaitKey, with Shared, is the key of the waiters' rounds
	// (nemWorkload.waiterRun), which no other round uses.
	WaitKey     string
	Sems        []nemSem
	Owners      bool
	Shared      bool
	SharedEvery int // with Shared, one in so many of the single-key acquires and Dos are shared
	Permits     bool
	PermitsOnly bool
	// LongHolds (the restart controls) makes TTLs of 1 to 2 s and
	// plain holds of half to one and a half of them: holds that span
	// several node restarts where a loaded machine makes restarts slow.
	LongHolds bool
	// CloseAfter, if positive, is when the process closes its first
	// Client and moves its workers to a new one.
	CloseAfter time.Duration
}

// nemMsg is one record a worker process streams to TestNemesis, a JSON
// line; nemRecorder.apply says what each Op means.
type nemMsg struct {
	Op    string               `json:"op"`
	ID    int                  `json:"id,omitempty"`
	N     int                  `json:"n,omitempty"`
	Lock  *history.Lock        `json:"lock,omitempty"`
	Span  history.Span         `json:"span"`
	Proof history.Proof        `json:"proof"`
	Lease *history.LeaseObs    `json:"lease,omitempty"`
	Wait  *history.Wait        `json:"wait,omitempty"`
	Obs   *history.Observation `json:"obs,omitempty"`
	At    time.Time            `json:"at"`
	Keys  []string             `json:"keys,omitempty"`
	Name  string               `json:"name,omitempty"`
	Text  string               `json:"text,omitempty"`
	TTL   time.Duration        `json:"ttl,omitempty"` // an acquire's or an Extend's (cap's)
	OK    bool                 `json:"ok,omitempty"`  // a Release that returned nil
}

// TestNemesisWorkerProcess is a worker process of TestNemesis, which runs
// the test binary again with nemWorkerEnv set; otherwise it skips. It runs
// its workers until its stdin ends, then closes its Clients, streaming its
// records on file descriptor 3.
func TestNemesisWorkerProcess(t *testing.T) {
	raw := os.Getenv(nemWorkerEnv)
	if raw == "" {
		t.Skip("a worker process of TestNemesis, which starts it")
	}
	var cfg nemWorkerConfig
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg))
	out := os.NewFile(3, "records")
	enc := json.NewEncoder(out)
	wl := newNemWorkload(t, cfg, func(m nemMsg) {
		if err := enc.Encode(m); err != nil {
			// TestNemesis is gone: nobody reads the records.
			os.Exit(3)
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, w := range cfg.Workers {
		wg.Go(func() { wl.worker(i, w, stop) })
	}
	var replaced sync.WaitGroup
	if cfg.CloseAfter > 0 {
		timer := time.NewTimer(cfg.CloseAfter)
		defer timer.Stop()
		replaced.Go(func() {
			select {
			case <-timer.C:
				wl.replaceFirst()
			case <-stop:
			}
		})
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until TestNemesis closes it
	close(stop)
	wg.Wait()
	replaced.Wait()
	wl.close(t)
	require.NoError(t, out.Close())
}

// newNemWorkload makes the Clients of a worker process. They fence, so
// that a stopped holder's late writes meet the store, but for the second
// of the first process, which neither fences nor bounds reads by context
// timeouts; the first of each process has context timeouts, the others at
// random; a random half have a node timeout.
func newNemWorkload(t *testing.T, cfg nemWorkerConfig, sink func(nemMsg)) *nemWorkload {
	wl := &nemWorkload{cfg: cfg, seed: cfg.Seed, keys: cfg.Keys, sems: cfg.Sems, owners: cfg.Owners, shared: cfg.Shared,
		permits: cfg.Permits, permitsOnly: cfg.PermitsOnly, rec: newNemRecorder(cfg.Proc, sink),
		store: &nemStoreClient{addr: cfg.Store}}
	r := rand.New(rand.NewPCG(cfg.Seed, 7<<32|uint64(cfg.Num)))
	for i := range nemSlotCount(len(cfg.Workers)) {
		fenced, timeouts := true, i == 0
		switch {
		case i == 1 && cfg.Num == 0:
			fenced = false
		case i > 0:
			timeouts = r.IntN(2) == 0
		}
		// The derived node timeout (10 to 50 ms here), 100 ms, or 500 ms:
		// a long one lets go-redis send a write again within its round,
		// after a reset (the resend fault).
		nodeTimeout := time.Duration(0)
		switch r.IntN(3) {
		case 1:
			nodeTimeout = 100 * time.Millisecond
		case 2:
			nodeTimeout = 500 * time.Millisecond
		}
		slot := &nemSlot{name: fmt.Sprintf("%s.C%d", cfg.Proc, i), fenced: fenced}
		slot.make = func() *redlock.Client {
			var nodes []redis.UniversalClient
			for _, a := range cfg.Nodes {
				nodes = append(nodes, redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: timeouts}))
			}
			var opts []redlock.Option
			if fenced {
				opts = append(opts, redlock.WithFencing())
			}
			if nodeTimeout > 0 {
				opts = append(opts, redlock.WithNodeTimeout(nodeTimeout))
			}
			if cfg.Guarded {
				opts = append(opts, redlock.WithRestartGuard(nemGuard))
			}
			c, err := redlock.New(nodes, opts...)
			require.NoError(t, err)
			// Briefly: a process starts under faults, where a Warm may not
			// finish, and its workers should not wait for it.
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_ = c.Warm(ctx)
			slot.mu.Lock()
			slot.every = append(slot.every, nemClient{c, nodes})
			slot.mu.Unlock()
			return c
		}
		slot.c.Store(slot.make())
		wl.slots = append(wl.slots, slot)
	}
	return wl
}

// replaceFirst closes the process's first Client mid-run and moves its
// workers to a new one.
func (wl *nemWorkload) replaceFirst() {
	s := wl.slots[0]
	old := s.c.Load()
	s.c.Store(s.make())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = old.Close(ctx)
}

// waitQuiet waits up to bound until c has no call in flight and no delete
// waiting to be tried again, and reports whether it came to that.
func waitQuiet(c *redlock.Client, bound time.Duration) bool {
	for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		busy := false
		for _, n := range c.Nodes() {
			busy = busy || n.InFlight > 0 || n.PendingCleanups > 0
		}
		if !busy {
			return true
		}
	}
	return false
}

// close closes every Client the workload made, waiting for their
// background work, then their node clients and the store's connections.
func (wl *nemWorkload) close(t *testing.T) {
	for _, s := range wl.slots {
		s.mu.Lock()
		every := s.every
		s.every = nil
		s.mu.Unlock()
		for _, c := range every {
			// Close gives up, after the cleanup timeout, deletes that nodes
			// do not confirm: wait for them as long as they try, until
			// their keys would expire, as Close did for them before.
			if !waitQuiet(c.c, 30*time.Second) {
				t.Errorf("closing a Client: its background work did not end within 30s: %+v", c.c.Nodes())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := c.c.Close(ctx)
			cancel()
			if err != nil && !errors.Is(err, redlock.ErrClosed) {
				t.Errorf("closing a Client: %v", err)
			}
			for _, n := range c.nodes {
				_ = n.Close()
			}
		}
	}
	wl.store.close()
}

// nemProcs are the worker processes of a run, from TestNemesis's side.
type nemProcs struct {
	t     *testing.T
	cfg   nemWorkerConfig // what each process gets, but Proc, Num and Workers
	per   int             // workers per process
	apply func(nemMsg)
	exe   string

	mu      sync.Mutex
	all     []*nemProc
	workers int // workers numbered so far
	readers sync.WaitGroup
	errs    []string // what went wrong in a process, for the test to report
}

// nemProc is one worker process.
type nemProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	output *lockedBuffer // its stdout and stderr
	killed bool          // by the nemesis: its exit is no failure
	paused bool
	done   chan struct{} // its records read to the end, and it exited
}

func newNemProcs(t *testing.T, cfg nemWorkerConfig, per int, apply func(nemMsg)) *nemProcs {
	exe, err := os.Executable()
	require.NoError(t, err)
	return &nemProcs{t: t, cfg: cfg, per: per, apply: apply, exe: exe}
}

// start starts a worker process with per new workers, closeAfter its
// CloseAfter.
func (ps *nemProcs) start(closeAfter time.Duration) (*nemProc, error) {
	ps.mu.Lock()
	cfg := ps.cfg
	cfg.Num = len(ps.all)
	cfg.Proc = "p" + strconv.Itoa(cfg.Num)
	cfg.CloseAfter = closeAfter
	for range ps.per {
		cfg.Workers = append(cfg.Workers, ps.workers)
		ps.workers++
	}
	p := &nemProc{name: cfg.Proc, output: &lockedBuffer{}, done: make(chan struct{})}
	ps.all = append(ps.all, p)
	ps.mu.Unlock()

	ok := false
	defer func() {
		if !ok { // not started: nothing to signal or wait for
			ps.mu.Lock()
			p.killed = true
			ps.mu.Unlock()
			close(p.done)
		}
	}()
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer func() { _ = pw.Close() }() // the process has its own copy
	p.cmd = exec.Command(ps.exe, "-test.run=^TestNemesisWorkerProcess$", "-test.count=1")
	p.cmd.Env = append(os.Environ(), nemWorkerEnv+"="+string(raw))
	p.cmd.ExtraFiles = []*os.File{pw}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		_ = pr.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		_ = pr.Close()
		return nil, err
	}
	ok = true
	ps.readers.Go(func() {
		defer close(p.done)
		ps.read(p, pr)
	})
	return p, nil
}

// read applies p's records until it exits, then notes a failure that the
// nemesis did not cause.
func (ps *nemProcs) read(p *nemProc, pr *os.File) {
	dec := json.NewDecoder(bufio.NewReaderSize(pr, 1<<16))
	var bad error
	for {
		var m nemMsg
		if err := dec.Decode(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				bad = err // a line cut by SIGKILL, or a broken one
			}
			break
		}
		ps.apply(m)
	}
	_ = pr.Close()
	err := p.cmd.Wait()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.killed {
		return
	}
	if err != nil || bad != nil {
		ps.errs = append(ps.errs, fmt.Sprintf("worker process %s: %v (records: %v); its output:\n%s", p.name, err, bad, p.output.tail(4000)))
	}
}

// running returns the processes neither killed nor paused, nor exited.
func (ps *nemProcs) running() []*nemProc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []*nemProc
	for _, p := range ps.all {
		select {
		case <-p.done:
			continue
		default:
		}
		if !p.killed && !p.paused {
			out = append(out, p)
		}
	}
	return out
}

// pause stops p and returns when it was sent the signal.
func (ps *nemProcs) pause(p *nemProc) (time.Time, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return time.Time{}, err
	}
	p.paused = true
	return nemNow(), nil
}

// resume lets p run again and returns when, read before the signal.
func (ps *nemProcs) resume(p *nemProc) (time.Time, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	at := nemNow()
	p.paused = false
	return at, p.cmd.Process.Signal(syscall.SIGCONT)
}

// kill kills p and returns when it was sent the signal.
func (ps *nemProcs) kill(p *nemProc) (time.Time, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil {
		return time.Time{}, err
	}
	return nemNow(), nil
}

// stop ends every live process (its workers stop and it closes its
// Clients) and waits for their records, within bound.
func (ps *nemProcs) stop(bound time.Duration) {
	ps.mu.Lock()
	all := append([]*nemProc(nil), ps.all...)
	ps.mu.Unlock()
	for _, p := range all {
		if p.cmd == nil || p.cmd.Process == nil {
			continue // never started
		}
		if p.paused {
			_, _ = ps.resume(p)
		}
		_ = p.stdin.Close()
	}
	done := make(chan struct{})
	go func() { ps.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		ps.t.Errorf("worker processes did not end within %v", bound)
		for _, p := range all {
			if p.cmd != nil && p.cmd.Process != nil {
				_ = p.cmd.Process.Kill()
			}
		}
		<-done
	}
}

// failures returns what went wrong in the processes.
func (ps *nemProcs) failures() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]string(nil), ps.errs...)
}

// count returns how many processes and workers were started.
func (ps *nemProcs) count() (procs, workers int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.all), ps.workers
}

// lockedBuffer is a process's output, written by exec's copying goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	return s[max(0, len(s)-n):]
}

// nemStore is the fenced store: a loopback server that accepts a write of
// a key with a fence iff the fence is at least the highest it accepted for
// the key, and records each decision in its own order. A request is one
// line, "key fence lockID"; the answer "1" (accepted) or "0".
type nemStore struct {
	ln      net.Listener
	mu      sync.Mutex
	highest map[string]uint64
	writes  []history.FenceWrite
	conns   map[net.Conn]struct{}
	serving sync.WaitGroup
}

func startNemStore(t *testing.T) *nemStore {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &nemStore{ln: ln, highest: make(map[string]uint64), conns: make(map[net.Conn]struct{})}
	s.serving.Go(s.accept)
	t.Cleanup(s.close)
	return s
}

func (s *nemStore) addr() string { return s.ln.Addr().String() }

func (s *nemStore) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.serving.Go(func() { s.serve(c) })
	}
}

func (s *nemStore) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	in := bufio.NewScanner(c)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 3 {
			return
		}
		fence, err1 := strconv.ParseUint(f[1], 10, 64)
		id, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			return
		}
		ok := s.decide(f[0], fence, id)
		if _, err := c.Write([]byte(map[bool]string{true: "1\n", false: "0\n"}[ok])); err != nil {
			return
		}
	}
}

// decide applies the store's rule to one write and records it, with the
// instant it decided.
func (s *nemStore) decide(key string, fence uint64, id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := fence >= s.highest[key]
	if ok {
		s.highest[key] = fence
	}
	s.writes = append(s.writes, history.FenceWrite{Seq: len(s.writes), LockID: id, Key: key, Fence: fence, At: nemNow(), Accepted: ok})
	return ok
}

// record returns the writes decided so far.
func (s *nemStore) record() []history.FenceWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]history.FenceWrite(nil), s.writes...)
}

func (s *nemStore) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.serving.Wait()
}

// nemStoreClient is a worker process's end of the fenced store: one
// connection per write in flight, kept for the next.
type nemStoreClient struct {
	addr string
	mu   sync.Mutex
	free []net.Conn
}

// write asks the store to take a write of key with fence for lock id. An
// error (the store gone at the end of a run) drops the write.
func (sc *nemStoreClient) write(key string, fence uint64, id int) {
	sc.mu.Lock()
	var c net.Conn
	if n := len(sc.free); n > 0 {
		c, sc.free = sc.free[n-1], sc.free[:n-1]
	}
	sc.mu.Unlock()
	if c == nil {
		var err error
		if c, err = net.DialTimeout("tcp", sc.addr, 5*time.Second); err != nil {
			return
		}
	}
	_, err := fmt.Fprintf(c, "%s %d %d\n", key, fence, id)
	var reply [2]byte
	if err == nil {
		_, err = io.ReadFull(c, reply[:])
	}
	if err != nil {
		_ = c.Close()
		return
	}
	sc.mu.Lock()
	sc.free = append(sc.free, c)
	sc.mu.Unlock()
}

func (sc *nemStoreClient) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, c := range sc.free {
		_ = c.Close()
	}
	sc.free = nil
}
