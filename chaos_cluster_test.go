package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/containertest"
	"github.com/redlock-go/redlock/internal/history"
	"github.com/redlock-go/redlock/internal/nodetest"
)

// This file is the chaos suite's fixture and workload: the masters in
// containers, the lock clients over them, the test's own look at the nodes,
// the dialers that cut one client off a node or follow a failover; then the
// clients contending for a few keys while a scenario breaks the nodes, the
// latency of every call they make, and the helpers that set a scenario's
// stage. What the clients saw goes to the history of chaos_checker_test.go.

// chaosCluster is a set of independent masters in containers.
type chaosCluster struct {
	t     *testing.T
	nodes []*containertest.Node
}

func startChaosCluster(t *testing.T, n int) *chaosCluster {
	t.Helper()
	c := &chaosCluster{t: t, nodes: containertest.StartCluster(t, n)}
	c.loadScripts(c.all()...)
	return c
}

// all returns the index of every node.
func (c *chaosCluster) all() []int {
	idx := make([]int, len(c.nodes))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// in returns the cluster for use by subtest t: its failures go to t, and if
// t fails halfway through a fault, the nodes are healed, and started again
// empty with their scripts, for the phases after it.
func (c *chaosCluster) in(t *testing.T) *chaosCluster {
	sub := &chaosCluster{t: t, nodes: c.nodes}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range c.nodes {
			_ = n.Reconnect()
			_ = n.Restart() // thaws a paused node first
		}
		sub.loadScripts(sub.all()...)
	})
	return sub
}

// phase runs one phase of a scenario as subtest name of the cluster's test,
// with the cluster as the subtest's (see in) and a history of its own.
func (c *chaosCluster) phase(name string, fn func(t *testing.T, cl *chaosCluster, h *chaosHistory)) {
	c.t.Run(name, func(t *testing.T) { fn(t, c.in(t), newChaosHistory()) })
}

// each applies fault to the nodes idx, in parallel, as one fault.
func (c *chaosCluster) each(fault func(*containertest.Node) error, idx ...int) {
	c.t.Helper()
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for j, i := range idx {
		wg.Go(func() { errs[j] = fault(c.nodes[i]) })
	}
	wg.Wait()
	require.NoError(c.t, errors.Join(errs...))
}

// lockClient returns a lock client over fresh go-redis clients with default
// options, one per node: a process of its own.
func (c *chaosCluster) lockClient(opts ...redlock.Option) *redlock.Client {
	return c.lockClientWith(nil, opts...)
}

// lockClientWith is lockClient with a change to each node's client options.
func (c *chaosCluster) lockClientWith(change func(i int, o *redis.Options), opts ...redlock.Option) *redlock.Client {
	c.t.Helper()
	nodes := make([]redis.UniversalClient, len(c.nodes))
	for i, n := range c.nodes {
		nodes[i] = n.Client(func(o *redis.Options) {
			if change != nil {
				change(i, o)
			}
		})
	}
	return newLockClient(c.t, nodes, opts...)
}

func (c *chaosCluster) lockClients(n int, opts ...redlock.Option) []*redlock.Client {
	out := make([]*redlock.Client, n)
	for i := range out {
		out[i] = c.lockClient(opts...)
	}
	return out
}

// newLockClient makes a lock client with the suite's node deadline. It opens
// a connection to each node first, as a running service has, so that faults
// hit commands rather than handshakes, and closes the client when the test
// ends (before the go-redis clients, whose cleanups were registered first).
func newLockClient(t *testing.T, nodes []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		require.NoError(t, n.Ping(ctx).Err())
	}
	c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithNodeTimeout(chaosNodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("lock client did not close: %v", err)
		}
	})
	return c
}

// closeClients closes lock clients and waits for their background work:
// rollbacks and release tails, including those queued behind stalled calls.
func closeClients(t *testing.T, clients ...*redlock.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range clients {
		require.NoError(t, c.Close(ctx), "background work did not finish")
	}
}

// nodeValue returns what the node at addr holds under key, "" if nothing.
func nodeValue(t *testing.T, addr, key string) string {
	t.Helper()
	var v string
	nodetest.Look(t, addr, func(ctx context.Context, rc *redis.Client) { v = readKey(t, ctx, rc, key) })
	return v
}

// values returns what each node holds under key.
func (c *chaosCluster) values(key string) []string {
	c.t.Helper()
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = nodeValue(c.t, n.Addr(), key)
	}
	return out
}

// scan returns every key under prefix on the nodes idx (all if none), apart
// from fencing counters, which are kept on purpose.
func (c *chaosCluster) scan(prefix string, idx ...int) []history.NodeKey {
	c.t.Helper()
	if len(idx) == 0 {
		idx = c.all()
	}
	var found []history.NodeKey
	for _, i := range idx {
		nodetest.Look(c.t, c.nodes[i].Addr(), func(ctx context.Context, rc *redis.Client) {
			it := rc.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
			for it.Next(ctx) {
				k := it.Val()
				if strings.HasSuffix(k, ":redlock:fence") {
					continue
				}
				raw := nodetest.Get(c.t, ctx, rc, k)
				if v := holderOf(raw); v != "" { // "": expired meanwhile
					ttl, _ := rc.PTTL(ctx, k).Result()
					if strings.HasSuffix(k, ":redlock:wait") && ttl >= 0 && ttl <= 2*time.Second {
						// A waiting room lives as long as the entry of a
						// waiter that stopped, under a second for these
						// Clients (docs/shared.md): no leftover, unless it
						// lives longer.
						continue
					}
					found = append(found, history.NodeKey{Node: i, Key: k, Value: v, Raw: raw, TTL: ttl})
				}
			}
			require.NoError(c.t, it.Err())
		})
	}
	return found
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// loadScripts loads the library's scripts on the nodes idx (see
// nodetest.LoadScripts), as after a restart.
func (c *chaosCluster) loadScripts(idx ...int) {
	c.t.Helper()
	for _, i := range idx {
		nodetest.LoadScripts(c.t, c.nodes[i].Addr())
	}
}

// errors returns how many error replies of each code node i has sent
// (nodetest.ErrorCounts): LATE counts the writes it refused past their
// deadline (docs/late-writes.md).
func (c *chaosCluster) errors(i int) map[string]int {
	c.t.Helper()
	var out map[string]int
	nodetest.Look(c.t, c.nodes[i].Addr(), func(ctx context.Context, rc *redis.Client) { out = nodetest.ErrorCounts(c.t, ctx, rc) })
	return out
}

// debugSleep blocks node i's event loop for d (DEBUG SLEEP): every client
// waits, then gets its answer late. It returns when the node answers again.
func (c *chaosCluster) debugSleep(i int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d+10*time.Second)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: c.nodes[i].Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer func() { _ = rc.Close() }()
	return rc.Do(ctx, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Err()
}

// followAddr is the address of the current master of a replicated pair, which
// clients dial, as a Sentinel-aware client re-points itself on failover.
type followAddr struct{ addr atomic.Pointer[string] }

func newFollowAddr(addr string) *followAddr {
	f := &followAddr{}
	f.set(addr)
	return f
}

func (f *followAddr) set(addr string) { f.addr.Store(&addr) }

func (f *followAddr) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, *f.addr.Load())
}

// client returns a go-redis client, closed when the test ends, that dials
// whichever node is the master now. Its Addr is a name, not a server, as
// for a Sentinel failover client.
func (f *followAddr) client(n *containertest.Node) *redis.Client {
	return n.Client(func(o *redis.Options) {
		o.Addr = "mymaster"
		o.Dialer = f.dial
	})
}

// cuttableDialer partitions one client process from one node on the
// client's side: while cut, dials fail and the open connections are closed.
type cuttableDialer struct {
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

var errCut = errors.New("chaos: link cut")

func (d *cuttableDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		_ = conn.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Err: errCut}
	}
	if d.conns == nil {
		d.conns = make(map[net.Conn]struct{})
	}
	d.conns[conn] = struct{}{}
	return &trackedConn{Conn: conn, d: d}, nil
}

func (d *cuttableDialer) cut(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
	if down {
		for c := range d.conns {
			_ = c.Close()
		}
		clear(d.conns)
	}
}

type trackedConn struct {
	net.Conn
	d *cuttableDialer
}

func (c *trackedConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns, c.Conn)
	c.d.mu.Unlock()
	return c.Conn.Close()
}

// workload is a set of clients contending for a few keys: acquire, read a
// counter, wait, optionally extend, write the counter back if still valid,
// release. Every call has a deadline and every worker a bounded number of
// rounds, so halt always returns.
type workload struct {
	h         *chaosHistory
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
func newWorkload(cl *chaosCluster, h *chaosHistory, prefix string, clients int) *workload {
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
// ended at or before to, and returns the longest of them, and the longest
// beyond the process's lag while it ran (lagProbe.beyond).
func (l *latencies) failedBetween(op string, from, to time.Time, lag *lagProbe) (n int, longest, beyond time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.samples {
		if s.op == op && s.err != nil && !s.start.Before(from) && !s.start.Add(s.took).After(to) {
			n++
			longest = max(longest, s.took)
			beyond = max(beyond, lag.beyond(s.start, s.took))
		}
	}
	return n, longest, beyond
}

// maxBeyond returns each operation's longest call beyond the process's lag
// while it ran (lagProbe.beyond).
func (l *latencies) maxBeyond(lag *lagProbe) map[string]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]time.Duration)
	for _, s := range l.samples {
		if s.took > out[s.op] { // beyond is at most took
			out[s.op] = max(out[s.op], lag.beyond(s.start, s.took))
		}
	}
	return out
}

// mustAcquire takes a lock a scenario needs to set its stage, with retries
// for up to 5 s, so that one slow reply on a loaded machine cannot fail it.
func mustAcquire(t *testing.T, h *chaosHistory, c *redlock.Client, client, key string, ttl time.Duration) *hold {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hd, err := h.acquire(ctx, c, client, key, ttl, false)
	require.NoError(t, err, "%s: acquire %q", client, key)
	return hd
}
