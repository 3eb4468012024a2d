package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/testbed"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopExampleServers()
	if code == 0 {
		if err := findLeaks(3 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.Find, retried for up to within: Close returns once
// it has given up the deletes that nodes did not confirm, and a try in
// flight then ends at its node deadline, which is longer than goleak's own
// wait (about 0.4 s). A goroutine that outlives within is a leak.
func findLeaks(within time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(within)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// env is N real redis-server processes, each behind a fault-injecting TCP
// proxy (internal/testbed). Lock clients talk through the proxies; direct
// clients bypass them to inspect what the servers really hold.
type env struct {
	t       *testing.T
	bed     *testbed.Bed
	servers []*redistest.Server
	proxies []*faultproxy.Proxy
	direct  []*redis.Client
	nodes   []redis.UniversalClient
}

const testNodeTimeout = 500 * time.Millisecond

// fastClients bound socket reads by the context, so tests of unknown outcomes
// do not wait for go-redis's 3s read timeout in the background.
func fastClients(o *redis.Options) { o.ContextTimeoutEnabled = true }

// defaultClients leaves go-redis's options as users leave them.
func defaultClients(*redis.Options) {}

// clientConfigs are both: a test of unknown outcomes runs with each.
var clientConfigs = []struct {
	name string
	o    func(*redis.Options)
}{{"context-timeouts", fastClients}, {"go-redis-defaults", defaultClients}}

func newEnv(t *testing.T, n int, clientOpts func(*redis.Options)) *env {
	t.Helper()
	bed := testbed.Start(t, n)
	e := &env{t: t, bed: bed, servers: bed.Servers, proxies: bed.Proxies, direct: bed.Direct, nodes: bed.Clients(clientOpts)}
	for _, c := range e.nodes {
		// Open a pooled connection now, as a running service has one: a
		// fault injected later then hits commands, not the handshake.
		require.NoError(t, c.Ping(t.Context()).Err())
	}
	// Script.Run sends EVALSHA first, and a fault that swallowed the
	// NOSCRIPT reply would keep the script from ever running, which is not
	// the case under test.
	bed.LoadScripts()
	return e
}

// client returns a lock client over the proxied nodes. Its cleanup waits for
// the background work (rollbacks, late replies) before the nodes go away.
//
// Unless a test sets its own, the per-node timeout is generous: the tests
// share two cores with other test binaries under -race, and a test that is
// not about deadlines must not fail on a late reply.
func (e *env) client(opts ...redlock.Option) *redlock.Client {
	e.t.Helper()
	c, err := redlock.New(e.nodes, append([]redlock.Option{redlock.WithNodeTimeout(testNodeTimeout)}, opts...)...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.settle(c) })
	// A running service has met its nodes: the servers are identified and
	// the connections warm before a test injects a fault.
	require.NoError(e.t, c.Warm(e.t.Context()))
	return c
}

// settle waits for c's background work to finish, then closes c: Close
// itself gives up deletes that nodes do not confirm within its bound.
func (e *env) settle(c *redlock.Client) {
	e.t.Helper()
	quiet(e.t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(e.t, c.Close(ctx), "background work did not finish")
}

// value returns what server i holds under key ("" when absent).
func (e *env) value(i int, key string) string {
	e.t.Helper()
	return holderOf(e.bed.Get(i, key))
}

// holders counts the servers whose key holds token.
func (e *env) holders(key, token string) int {
	e.t.Helper()
	n := 0
	for i := range e.direct {
		if e.value(i, key) == token {
			n++
		}
	}
	return n
}

// quorumHolders counts the servers that hold key for its most common
// holder: Acquire returns at a quorum, so a node read at once may not have
// taken the key yet.
func (e *env) quorumHolders(key string) int {
	e.t.Helper()
	most := 0
	for i := range e.direct {
		if v := e.value(i, key); v != "" {
			most = max(most, e.holders(key, v))
		}
	}
	return most
}

// awaitHolders waits until every server holds key with token: Acquire
// returns at quorum, and the other nodes answer just after.
func (e *env) awaitHolders(key, token string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.holders(key, token) == len(e.direct) },
		5*time.Second, time.Millisecond, "not every node took the key")
}

// gaveUp waits, after a call that returned at a quorum while node i was
// blackholed, until nothing c sent for it can reach node i once the fault is
// lifted. Such a call returns before its write to node i may even have been
// written; a write lifted out of the blackhole would land. Every write goes
// out within its deadline or never (the node timeout, or for a write left
// to the background, such as a fence's late commit, the cleanup timeout),
// so gaveUp waits out the longest of them and then for c to have no call
// running on node i: what went out met the blackhole and was discarded.
func (e *env) gaveUp(c *redlock.Client, i int) {
	e.t.Helper()
	sent := time.Now().Add(max(testNodeTimeout, redlock.DefaultCleanupTimeout))
	require.Eventually(e.t, func() bool {
		return time.Now().After(sent) && c.Nodes()[i].InFlight == 0
	}, 20*time.Second, 5*time.Millisecond, "calls to node %d still running", i)
}

// requireNoKey fails if any server holds key at all.
func (e *env) requireNoKey(key string) {
	e.t.Helper()
	for i := range e.direct {
		require.Empty(e.t, e.value(i, key), "node %d still holds %q", i, key)
	}
}

// eventuallyNoKey waits until no server holds key, for background rollbacks.
func (e *env) eventuallyNoKey(key string, within time.Duration) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		for i := range e.direct {
			if e.value(i, key) != "" {
				return false
			}
		}
		return true
	}, within, 5*time.Millisecond, "key %q left behind", key)
}

func (e *env) resetFaults() { e.bed.ResetFaults() }

// calls returns how many times server i has executed command (lowercase),
// scripts included: evidence that a write landed even when its key is gone.
func (e *env) calls(i int, command string) int {
	e.t.Helper()
	return e.bed.Calls(i, command)
}

// rawValues returns what every server holds under key.
func (e *env) rawValues(key string) []string {
	e.t.Helper()
	out := make([]string, len(e.direct))
	for i := range e.direct {
		out[i] = e.bed.Get(i, key)
	}
	return out
}

// reachable waits until node i answers through its proxy again: go-redis
// backs off dialling a node whose connections were refused.
func (e *env) reachable(i int) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		return e.nodes[i].Ping(context.Background()).Err() == nil
	}, 10*time.Second, 10*time.Millisecond, "node %d stays unreachable", i)
}

// newKey is a key no other test uses.
func newKey(t *testing.T) string {
	return "test:" + t.Name() + ":" + uuid.NewString()
}

// readKey returns the holder's token that rc's node holds under key, "" if
// nothing: a lock writes its token, a dot and a generation. Other values are
// returned whole. It looks at a node whatever runs it: a process of env or a
// container of the chaos suite.
func readKey(t testing.TB, ctx context.Context, rc *redis.Client, key string) string {
	t.Helper()
	return holderOf(nodetest.Get(t, ctx, rc, key))
}

// holderOf is the token in a lock's value (token "." generation, or for a
// Lock of an owner token "~" id "." generation, then, after an owner's
// takeover, "|" and the value it replaced, then "," and the tombstone
// entries it carries); a tombstone, which every
// lock reads as an absent key, is ""; a value of another form is returned
// whole.
func holderOf(v string) string {
	if strings.HasPrefix(v, "!") {
		return ""
	}
	v, _, _ = strings.Cut(v, ",") // the tombstone entries it carries
	v, _, _ = strings.Cut(v, "|") // what an owner's takeover replaced
	if i := strings.LastIndexByte(v, '.'); i > 0 {
		if _, err := strconv.ParseUint(v[i+1:], 10, 64); err == nil {
			token, _, _ := strings.Cut(v[:i], "~")
			// Holder metadata (WithMetadata): "m" and base32 after the token.
			if m := strings.IndexByte(token, 'm'); m > 0 && strings.Trim(token[m+1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == "" {
				token = token[:m]
			}
			return token
		}
	}
	return v
}

// quiet waits until c has nothing in flight and no delete waiting to be
// tried again on any node.
func quiet(t testing.TB, c *redlock.Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range c.Nodes() {
			if n.InFlight > 0 || n.PendingCleanups > 0 {
				return false
			}
		}
		return true
	}, 20*time.Second, 5*time.Millisecond, "background work did not end")
}

// waitClosed waits for ch with a generous bound.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestClose(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, err := redlock.New(e.nodes, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token()) // TryAcquire returns at a quorum

	// An Acquire waiting for the held lock is woken by Close.
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, key, time.Minute)
		done <- err
	}()
	time.Sleep(30 * time.Millisecond)
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.Close(closeCtx))
	err = <-done
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrClosed)

	_, err = c.TryAcquire(ctx, newKey(t), time.Minute)
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	// Close left the lock to its holder, whose Release still works.
	assert.Equal(t, 3, e.holders(key, l.Token()), "Close took the lock from its holder")
	require.NoError(t, l.Release(ctx))
	require.NoError(t, c.Close(closeCtx)) // waits for the release's background work
	e.requireNoKey(key)
}

// closeBound is how long a test lets Close take on a loaded machine: every
// Close here waits for nodes that answer.
const closeBound = 10 * time.Second

// closeAtCleanup closes c when the test ends, within closeBound, whatever
// Close reports: for tests whose nodes are down on purpose.
func closeAtCleanup(t *testing.T, c *redlock.Client) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeBound)
		defer cancel()
		_ = c.Close(ctx)
	})
}

// returnsWithin runs f, a call that the library itself must end (an
// Acquire with context.Background() on nodes that are down), and fails the
// test if it has not returned within bound, rather than wait for the test
// binary's timeout.
func returnsWithin(t *testing.T, bound time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("%s did not return within %v: the library's own bound did not hold", what, bound)
	}
}

// closeClient closes c with closeBound and returns when it returned.
func closeClient(t *testing.T, c *redlock.Client) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), closeBound)
	defer cancel()
	require.NoError(t, c.Close(ctx))
	return time.Now()
}

// isDone reports whether ch is closed already.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestCloseEndsDo: Close ends the context of a running Do's fn (cause
// ErrClosed), waits for fn to return and for Do's release, and leaves the
// key on no node. A graceful shutdown must not lock other processes out of
// the keys it held for the rest of their TTL.
func TestCloseEndsDo(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	const ttl = 6 * time.Second // renewals every 2 s: a Close that waits for one is seen

	started := make(chan string, 1)
	fnDone := make(chan struct{})
	doDone := make(chan struct{})
	var cause, doErr error
	go func() {
		defer close(doDone)
		doErr = c.Do(t.Context(), key, ttl, func(ctx context.Context, l *redlock.Lock) error {
			defer close(fnDone)
			started <- l.Token()
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return ctx.Err()
			case <-time.After(closeBound):
				return errors.New("fn's context outlived Close")
			}
		})
	}()
	e.awaitHolders(key, <-started)
	closeClient(t, c)
	require.True(t, isDone(fnDone), "Close returned while fn still ran")
	<-doDone // returning once its release is done
	require.ErrorIs(t, cause, redlock.ErrClosed, "the cause of fn's context")
	require.NotErrorIs(t, cause, redlock.ErrLockLost, "a Close is no loss")
	require.ErrorIs(t, doErr, redlock.ErrClosed)
	require.ErrorIs(t, doErr, context.Canceled, "fn's own error is kept")
	require.NotErrorIs(t, doErr, redlock.ErrNotHeld, "Do's release failed")
	require.NotErrorIs(t, doErr, redlock.ErrLockLost)
	e.requireNoKey(key)
}

// TestCloseLeavesHeldLocksToHolders: Close ends the KeepAlive contexts of
// the Locks held (cause ErrClosed, no loss) but takes no Lock from its
// holder: the keys stay until the holders release them, and their Release
// works after Close.
func TestCloseLeavesHeldLocksToHolders(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	plain, err := c.Acquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	kept, err := c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	kctx := kept.KeepAlive(ctx)
	for _, l := range []*redlock.Lock{plain, kept} {
		e.awaitHolders(l.Key(), l.Token())
	}

	closeClient(t, c)
	require.True(t, isDone(kctx.Done()), "the KeepAlive context outlived Close")
	require.Equal(t, redlock.ErrClosed, context.Cause(kctx))
	for _, l := range []*redlock.Lock{plain, kept} {
		require.Equal(t, len(e.direct), e.holders(l.Key(), l.Token()), "Close took the lock from its holder")
	}
	require.ErrorIs(t, plain.Extend(ctx, time.Minute), redlock.ErrClosed)
	after := plain.KeepAlive(ctx)
	require.True(t, isDone(after.Done()))
	require.Equal(t, redlock.ErrClosed, context.Cause(after))

	for _, l := range []*redlock.Lock{plain, kept} {
		require.NoError(t, l.Release(ctx), "a Release after Close")
	}
	closeClient(t, c) // waits for the releases' background work
	for _, l := range []*redlock.Lock{plain, kept} {
		e.requireNoKey(l.Key())
	}
}

// TestReleaseWhileClosing: Releases of user code that run while Close
// drains work, and Close waits for those that began before it was done.
func TestReleaseWhileClosing(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	var locks []*redlock.Lock
	for range 8 {
		l, err := c.TryAcquire(ctx, newKey(t), time.Minute)
		require.NoError(t, err)
		e.awaitHolders(l.Key(), l.Token())
		locks = append(locks, l)
	}
	// Deletes take a while: some Releases are on their way when Close
	// begins, others begin after.
	for _, p := range e.proxies {
		p.SetDelay(50 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeBound)
		defer cancel()
		closed <- c.Close(cctx)
	}()
	errs := make(chan error, len(locks))
	for _, l := range locks {
		go func() { errs <- l.Release(ctx) }()
	}
	for range locks {
		require.NoError(t, <-errs)
	}
	require.NoError(t, <-closed)
	closeClient(t, c) // the releases' background work is over
	e.resetFaults()
	for _, l := range locks {
		e.requireNoKey(l.Key())
	}
}

// TestAcquireEndingAfterClose: an Acquire whose attempt succeeds once Close
// has begun does not hand out a Lock that nobody will release: it releases
// it and fails with ErrClosed, and Close waits for that.
func TestAcquireEndingAfterClose(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(3*time.Second), redlock.WithCleanupTimeout(3*time.Second))
	key := newKey(t)
	// Every node answers a second late: the attempt is on its way when
	// Close begins, and the release that follows is answered in time.
	for _, p := range e.proxies {
		p.SetDelay(time.Second)
	}
	acquired := make(chan error, 1)
	go func() {
		_, err := c.TryAcquire(t.Context(), key, time.Minute)
		acquired <- err
	}()
	require.Eventually(t, func() bool {
		for _, n := range c.Nodes() {
			if n.InFlight == 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the attempt was not sent")
	closeClient(t, c)
	err := <-acquired
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrClosed)
	e.resetFaults()
	e.requireNoKey(key)
}

// TestCloseBoundedByContext: Close waits for fn no longer than its
// context; the Do still running then releases its lock when fn returns,
// although the Client is closed.
func TestCloseBoundedByContext(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	started := make(chan string, 1)
	finish := make(chan struct{})
	doDone := make(chan error, 1)
	go func() {
		doDone <- c.Do(t.Context(), key, time.Minute, func(_ context.Context, l *redlock.Lock) error {
			started <- l.Token()
			<-finish // ignores its context
			return nil
		})
	}()
	e.awaitHolders(key, <-started)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.Close(ctx), context.DeadlineExceeded)
	assert.GreaterOrEqual(t, e.quorumHolders(key), c.Quorum(), "released under a running fn")
	close(finish)
	require.NoError(t, <-doDone, "fn returned nil and the lock was held throughout")
	closeClient(t, c) // the Do's deletes have all been answered
	e.requireNoKey(key)
}

// TestCloseWaitsForNestedDo: an owner's Do within its own Do, and a hold
// of the owner's Lock by Acquire: Close ends both fns' contexts and waits
// for both Do calls, which give back their holds; the Acquire's hold is its
// holder's to release.
func TestCloseWaitsForNestedDo(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("job-7")
	held, err := c.Acquire(ctx, key, time.Minute, owner)
	require.NoError(t, err)
	e.awaitHolders(key, held.Token())

	started := make(chan struct{})
	doDone := make(chan error, 1)
	var innerErr error
	go func() {
		doDone <- c.Do(ctx, key, time.Minute, func(outer context.Context, l *redlock.Lock) error {
			if l != held {
				return errors.New("the owner's Do did not re-enter its Lock")
			}
			innerErr = c.Do(ctx, key, time.Minute, func(inner context.Context, l *redlock.Lock) error {
				close(started)
				<-inner.Done()
				return context.Cause(inner)
			}, owner)
			<-outer.Done()
			// The inner Do's release only gave back its hold: the key
			// is still held under the running outer fn.
			if e.quorumHolders(key) < c.Quorum() {
				return errors.New("released under the outer fn")
			}
			return context.Cause(outer)
		}, owner)
	}()
	<-started
	closeClient(t, c)
	err = <-doDone
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.NotErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, innerErr, redlock.ErrClosed)
	require.NotErrorIs(t, innerErr, redlock.ErrNotHeld)
	require.Equal(t, len(e.direct), e.holders(key, held.Token()), "the Acquire's hold was taken")
	require.NoError(t, held.Release(ctx))
	closeClient(t, c)
	e.requireNoKey(key)
}

// closeWithNodeDownBound is how long a test lets Close take when a node
// does not answer: Close's own bound, the cleanup timeout (1 s by default),
// and a loaded machine's scheduling lag.
const closeWithNodeDownBound = redlock.DefaultCleanupTimeout + 1500*time.Millisecond

// TestCloseWithNodeStopped: with a node stopped (SIGSTOP), Release returns
// at a quorum and leaves its delete to that node to the background, and
// Close(context.Background()) does not wait for it until the key would
// expire: it returns within its bound, gives the delete up and says so, in
// its error and to the hook; the stopped node's copy of the key, if the
// acquire's write reached it, expires with its TTL.
func TestCloseWithNodeStopped(t *testing.T) {
	for _, cc := range clientConfigs {
		t.Run(cc.name, func(t *testing.T) {
			e := newEnv(t, 3, cc.o)
			var mu sync.Mutex
			var given []redlock.Event
			c, err := redlock.New(e.nodes, redlock.WithHooks(redlock.Hooks{CleanupAbandoned: func(ev redlock.Event) {
				mu.Lock()
				defer mu.Unlock()
				given = append(given, ev)
			}}))
			require.NoError(t, err)
			require.NoError(t, c.Warm(t.Context()))
			key := newKey(t)
			const ttl = 15 * time.Second
			require.NoError(t, e.servers[2].Pause())
			t.Cleanup(func() { _ = e.servers[2].Resume() })
			l, err := c.TryAcquire(t.Context(), key, ttl)
			require.NoError(t, err)
			require.NoError(t, l.Release(t.Context()))

			start := time.Now()
			err = c.Close(context.Background())
			took := time.Since(start)
			require.Less(t, took, closeWithNodeDownBound, "Close waited for the stopped node (%v)", err)
			require.ErrorIs(t, err, redlock.ErrCleanupAbandoned, "Close did not say it gave up the delete")
			require.NotErrorIs(t, err, context.DeadlineExceeded)
			var ne *redlock.NodeError
			require.ErrorAs(t, err, &ne)
			require.Equal(t, 2, ne.Node, "the node named: %v", err)
			require.ErrorIs(t, ne, redlock.ErrNoReply)
			require.Contains(t, err.Error(), "1 delete not confirmed, its key left to expire with its TTL")
			mu.Lock()
			require.Len(t, given, 1, "the hook's events: %v", given)
			require.Equal(t, key, given[0].Key)
			require.Equal(t, 2, given[0].Node)
			require.Equal(t, e.proxies[2].Addr(), given[0].Addr)
			require.ErrorIs(t, given[0].Err, redlock.ErrNoReply)
			mu.Unlock()

			require.NoError(t, e.servers[2].Resume())
			for i := range 2 {
				require.Empty(t, e.value(i, key), "node %d kept the released key", i)
			}
			if e.value(2, key) != "" {
				left, err := e.direct[2].PTTL(t.Context(), key).Result()
				require.NoError(t, err)
				require.Greater(t, left, time.Duration(0), "the key left has no TTL")
				require.LessOrEqual(t, left, ttl)
			}
		})
	}
}

// TestColdStartWithNodeStopped: a Client whose nodes it first meets with
// one of them stopped learns that from Warm, and its first calls do not
// each wait for that node's identification: each takes about what the
// others take. The node deadline is long, so that a call that waits for
// the stopped node is seen.
func TestColdStartWithNodeStopped(t *testing.T) {
	for _, cc := range clientConfigs {
		t.Run(cc.name, func(t *testing.T) {
			bed := testbed.Start(t, 5)
			require.NoError(t, bed.Servers[4].Pause())
			t.Cleanup(func() { _ = bed.Servers[4].Resume() })
			const nodeTimeout = 3 * time.Second
			c, err := redlock.New(bed.Clients(cc.o), redlock.WithNodeTimeout(nodeTimeout))
			require.NoError(t, err)
			wctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			err = c.Warm(wctx)
			cancel()
			var ne *redlock.NodeError
			require.ErrorAs(t, err, &ne, "Warm did not name the stopped node")
			require.Equal(t, 4, ne.Node)
			require.NotErrorIs(t, err, redlock.ErrInvalidArgument)

			// A key for each call: a Release returns at a quorum, and its
			// deletes to the other nodes may still be on their way when the
			// next call's writes reach them (seen under load).
			key := newKey(t)
			for i := range 40 {
				start := time.Now()
				l, err := c.TryAcquire(t.Context(), key+":"+strconv.Itoa(i), 10*time.Second)
				require.NoError(t, err, "call %d", i)
				require.NoError(t, l.Release(t.Context()), "call %d", i)
				require.Less(t, time.Since(start), nodeTimeout/6, "call %d waited for the stopped node", i)
			}
			// The releases' deletes to the stopped node are given up.
			err = c.Close(context.Background())
			require.ErrorIs(t, err, redlock.ErrCleanupAbandoned)
			require.ErrorAs(t, err, &ne)
			require.Equal(t, 4, ne.Node)
		})
	}
}

// TestCloseEndsSubscribersOfSilentNode: a waiter subscribes on every node;
// on a node that takes the connection but never answers (the proxy holds
// its bytes, as a stopped redis-server does), the subscription's handshake
// (HELLO) hangs. Close must still leave no goroutine behind: go-redis runs
// that handshake on the client's ReadTimeout, not the call's context, and
// sends it again MaxRetries times, so a subscriber once outlived Close by
// up to 12 s with default options (a nemesis worker process failed its
// goroutine check on it). Now each ends within its deadline of Close.
func TestCloseEndsSubscribersOfSilentNode(t *testing.T) {
	for _, cc := range clientConfigs {
		t.Run(cc.name, func(t *testing.T) {
			e := newEnv(t, 3, cc.o)
			holder := e.client()
			key := newKey(t)
			l, err := holder.TryAcquire(t.Context(), key, 10*time.Second)
			require.NoError(t, err)
			ignore := goleak.IgnoreCurrent()
			c, err := redlock.New(e.nodes, redlock.WithNodeTimeout(testNodeTimeout))
			require.NoError(t, err)
			require.NoError(t, c.Warm(t.Context()))
			e.proxies[0].SetBlackhole(true)
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
			_, err = c.Acquire(ctx, key, time.Second)
			cancel()
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			cctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			_ = c.Close(cctx)
			cancel()
			// The deletes given up end within their node deadline, a
			// subscriber within its own (the cleanup timeout, 1 s).
			proxy := "github.com/redlock-go/redlock/internal/faultproxy.(*Proxy)."
			require.NoError(t, findLeaks(3*time.Second, ignore, goleak.IgnoreAnyFunction(proxy+"handle"), goleak.IgnoreAnyFunction(proxy+"readClient"),
				goleak.IgnoreAnyFunction(proxy+"writeServer"), goleak.IgnoreAnyFunction(proxy+"copyReplies")))
			e.proxies[0].SetBlackhole(false)
			require.NoError(t, l.Release(t.Context()))
		})
	}
}
