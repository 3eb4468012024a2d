package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// This file is the chaos suite's workload: clients contending for a few keys
// while a scenario breaks the nodes, the latency of every call they make, and
// the helpers that set a scenario's stage. What the clients saw goes to the
// history of chaos_checker_test.go.

// workload is a set of clients contending for a few keys: acquire, read a
// counter, wait, optionally extend, write the counter back if still valid,
// release. Every call has a deadline and every worker a bounded number of
// rounds, so halt always returns.
type workload struct {
	h         *history
	lat       *latencies
	clients   []*redlock.Client
	keys      []string
	ttl       time.Duration
	wait      time.Duration // deadline of each Acquire call, retries included
	try       bool          // TryAcquire: one attempt per call, the worker backs off itself
	work      time.Duration // between reading and writing the counter
	extend    bool          // extend once in each critical section
	perClient int           // goroutines per client

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// newWorkload returns the suite's usual workload: clients lock clients of
// cl, two goroutines each, contending for two keys under prefix with the
// suite's TTL, a 1 s deadline per Acquire, 5 ms of work and one Extend in
// each critical section. A scenario changes what it needs before start.
func newWorkload(cl *chaosCluster, h *history, prefix string, clients int) *workload {
	return &workload{h: h, lat: &latencies{}, clients: cl.lockClients(clients), keys: chaosKeys(prefix, 2),
		ttl: chaosTTL, wait: time.Second, work: 5 * time.Millisecond, extend: true, perClient: 2}
}

func chaosKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + "k" + strconv.Itoa(i)
	}
	return keys
}

// start starts the workers. They stop at halt, or when t ends if it fails
// before (their cleanup runs before the lock clients are closed).
func (w *workload) start(t *testing.T) {
	w.stop = make(chan struct{})
	t.Cleanup(func() { w.halt(t) })
	for ci, c := range w.clients {
		for g := range w.perClient {
			name := fmt.Sprintf("c%d.%d", ci, g)
			w.wg.Go(func() { w.worker(c, name) })
		}
	}
}

// halt stops the workers and waits for them.
func (w *workload) halt(t *testing.T) {
	t.Helper()
	w.stopped.Do(func() { close(w.stop) })
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("workers did not stop within 30s")
	}
}

// end halts the workers and closes their clients, waiting for the clients'
// background work.
func (w *workload) end(t *testing.T) {
	t.Helper()
	w.halt(t)
	closeClients(t, w.clients...)
}

func (w *workload) worker(c *redlock.Client, name string) {
	jitter := func(lo, hi time.Duration) { time.Sleep(lo + rand.N(hi-lo)) }
	for range 5000 {
		select {
		case <-w.stop:
			return
		default:
		}
		key := w.keys[rand.IntN(len(w.keys))]
		ctx, cancel := context.WithTimeout(context.Background(), w.wait)
		start := time.Now()
		hd, err := w.h.acquire(ctx, c, name, key, w.ttl, w.try)
		cancel()
		w.lat.add("acquire", start, err)
		if err != nil {
			jitter(10*time.Millisecond, 30*time.Millisecond)
			continue
		}
		s := hd.enter()
		time.Sleep(w.work)
		if w.extend {
			start = time.Now()
			err := hd.extend(context.Background(), w.ttl)
			w.lat.add("extend", start, err)
		}
		s.exit()
		start = time.Now()
		err = hd.release(context.Background())
		w.lat.add("release", start, err)
		jitter(time.Millisecond, 10*time.Millisecond)
	}
}

// latencies records how long each lock call took.
type latencies struct {
	mu      sync.Mutex
	samples []latency
}

type latency struct {
	op         string
	start      time.Time
	took       time.Duration
	err        error
	atDeadline bool // a node did not answer within the per-node deadline
}

func (l *latencies) add(op string, start time.Time, err error) {
	s := latency{op: op, start: start, took: time.Since(start), err: err, atDeadline: errors.Is(err, redlock.ErrNoReply)}
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// max returns the longest call per operation.
func (l *latencies) max() map[string]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]time.Duration)
	for _, s := range l.samples {
		out[s.op] = max(out[s.op], s.took)
	}
	return out
}

// deadlines counts the calls that had to give up on a node at its deadline.
func (l *latencies) deadlines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.samples {
		if s.atDeadline {
			n++
		}
	}
	return n
}

// failedBetween counts the failed op calls that started at or after from and
// ended at or before to, and returns the longest of them.
func (l *latencies) failedBetween(op string, from, to time.Time) (n int, longest time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.samples {
		if s.op == op && s.err != nil && !s.start.Before(from) && !s.start.Add(s.took).After(to) {
			n++
			longest = max(longest, s.took)
		}
	}
	return n, longest
}

// mustAcquire takes a lock a scenario needs to set its stage, with retries
// for up to 5 s, so that one slow reply on a loaded machine cannot fail it.
func mustAcquire(t *testing.T, h *history, c *redlock.Client, client, key string, ttl time.Duration) *hold {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hd, err := h.acquire(ctx, c, client, key, ttl, false)
	require.NoError(t, err, "%s: acquire %q", client, key)
	return hd
}
