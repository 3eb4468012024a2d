package redlock_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Each test here is one way to two holders (or to a key left behind) that
// was seen on real nodes, and fails without its fix.

// rawValues returns what every server holds under key.
func (e *env) rawValues(key string) []string {
	e.t.Helper()
	out := make([]string, len(e.direct))
	for i, d := range e.direct {
		out[i] = rawKey(e.t, context.Background(), d, key)
	}
	return out
}

// lockPrefix is the Lock's own part of a lock's value: up to the dot before
// its generation, without what an owner's takeover replaced ("|" on).
func lockPrefix(v string) string {
	v, _, _ = strings.Cut(v, "|")
	return v[:strings.LastIndexByte(v, '.')+1]
}

// awaitOneLock waits until every server holds key for one and the same Lock
// and returns the values: awaitHolders compares tokens, which every Lock of
// an owner shares, so a node may still hold an earlier Lock's value then.
func (e *env) awaitOneLock(key string) []string {
	e.t.Helper()
	var vals []string
	require.Eventually(e.t, func() bool {
		vals = e.rawValues(key)
		for _, v := range vals {
			if v == "" || strings.HasPrefix(v, "!") || lockPrefix(v) != lockPrefix(vals[0]) {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "not every node took the key for one Lock")
	return vals
}

// quiet waits until c has nothing in flight and no delete waiting to be
// tried again on any node.
func quiet(t *testing.T, c *redlock.Client) {
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

// TestStaleOwnerReleaseSparesNewerLock: a Lock of an owner that ran past its
// validity, released after the owner's retry took a new Lock, deletes
// nothing: the new Lock keeps the key on every node.
func TestStaleOwnerReleaseSparesNewerLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, other := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-1")

	l1, err := c.Acquire(ctx, key, 300*time.Millisecond, owner)
	require.NoError(t, err)
	time.Sleep(time.Until(l1.Until()) + 10*time.Millisecond)
	l2, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	require.NotSame(t, l1, l2, "a Lock past its validity was re-entered")
	held := e.awaitOneLock(key)

	require.ErrorIs(t, l1.Release(ctx), redlock.ErrNotHeld, "the stale Lock's Release reported success")
	assert.Equal(t, held, e.rawValues(key), "the stale Lock's Release deleted the new Lock's key")
	_, err = other.TryAcquire(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client got in while the new Lock held the key")
	require.NoError(t, l2.Extend(ctx, 10*time.Second))
	require.NoError(t, l2.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestOwnerBackgroundDeleteSparesNewerLock: the deletes that a Release
// could not get confirmed go on in the background; when the owner acquires
// again meanwhile, taking the old value over, they leave the new Lock's key
// alone.
func TestOwnerBackgroundDeleteSparesNewerLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, other := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-2")

	l1, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	e.awaitHolders(key, l1.Token())
	e.proxies[1].SetBlackhole(true)
	e.proxies[2].SetBlackhole(true)
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	require.ErrorIs(t, l1.Release(rctx), redlock.ErrNotHeld)
	cancel()
	e.resetFaults()

	l2, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	require.NotSame(t, l1, l2)
	held := e.awaitOneLock(key)
	quiet(t, c) // l1's deletes have had their tries
	assert.Equal(t, held, e.rawValues(key), "the released Lock's background delete removed the new Lock's key")
	_, err = other.TryAcquire(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client got in while the new Lock held the key")
	require.NoError(t, l2.Release(ctx))
}

// TestOwnerReentryRefusesLostLock: a Lock that KeepAlive reported lost is
// never re-entered, though its Until has not passed yet.
func TestOwnerReentryRefusesLostLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithRenewInterval(100 * time.Millisecond))
	elsewhere, third := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("order-7")

	l, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	// The same owner in another process takes the key over and frees it.
	l2, err := elsewhere.TryAcquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))
	select {
	case <-kctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("KeepAlive did not report the loss")
	}
	require.ErrorIs(t, context.Cause(kctx), redlock.ErrLockLost)
	l3, err := third.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.True(t, time.Now().Before(l.Until()), "the test needs the lost Lock within its Until")

	got, err := c.TryAcquire(ctx, key, 10*time.Second, owner)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "the owner re-entered a lost Lock while another client holds the key")
	require.Nil(t, got)
	require.NoError(t, l3.Release(ctx))
	_ = l.Release(ctx)
}

// TestOwnerConcurrentAcquires: two goroutines of one request acquire the
// key at once through one Client: they get one Lock with two holds, and the
// key is freed with the second Release only.
func TestOwnerConcurrentAcquires(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	for i := range 30 {
		key := newKey(t)
		owner := redlock.WithOwner("request-" + strconv.Itoa(i))
		var locks [2]*redlock.Lock
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range locks {
			wg.Go(func() {
				<-start
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				locks[g], errs[g] = c.Acquire(actx, key, 5*time.Second, owner)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0], "try %d", i)
		require.NoError(t, errs[1], "try %d", i)
		require.Same(t, locks[0], locks[1], "try %d: two Locks for one owner", i)
		require.NoError(t, locks[0].Release(ctx))
		require.GreaterOrEqual(t, e.holders(key, locks[0].Token()), c.Quorum(), "try %d: the first of two holds freed the key", i)
		require.NoError(t, locks[1].Release(ctx))
		e.eventuallyNoKey(key, 5*time.Second)
	}
}

// TestOwnerRetryIgnoresClocks: the owner's value left by a process whose
// writes carry a later generation (its clock ran ahead, say) is taken over
// at once by the owner's retry from another process; the earlier Lock is
// superseded.
func TestOwnerRetryIgnoresClocks(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	first, retry := e.client(), e.client()
	ctx := t.Context()
	for i := range 5 {
		key := newKey(t)
		owner := redlock.WithOwner("order-" + strconv.Itoa(i))
		a, err := first.TryAcquire(ctx, key, time.Hour, owner)
		require.NoError(t, err)
		e.awaitHolders(key, a.Token())
		// What a process whose clock runs 2s ahead would have written.
		for _, d := range e.direct {
			v := rawKey(t, ctx, d, key)
			dot := strings.LastIndexByte(v, '.')
			gen, err := strconv.ParseUint(v[dot+1:], 10, 64)
			require.NoError(t, err, v)
			require.NoError(t, d.SetArgs(ctx, key, v[:dot+1]+strconv.FormatUint(gen+2_000_000, 10), redis.SetArgs{KeepTTL: true}).Err())
		}
		start := time.Now()
		b, err := retry.TryAcquire(ctx, key, time.Hour, owner)
		require.NoError(t, err, "try %d: the owner's retry was locked out", i)
		assert.Less(t, time.Since(start), 5*time.Second)
		require.ErrorIs(t, a.Extend(ctx, time.Hour), redlock.ErrNotHeld, "try %d: the superseded Lock still extends", i)
		require.NoError(t, b.Release(ctx))
		e.eventuallyNoKey(key, 5*time.Second)
	}
}

// TestLateWriteAfterRollback: another holder has nodes 0 and 1; our write
// to node 2 is held back in the network while our rollback reaches the node
// first and finds nothing, then the write lands. It must not leave our key
// there for its TTL, whatever the client's options.
func TestLateWriteAfterRollback(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 3, cfg.o)
			c := e.client()
			ctx := t.Context()
			key := newKey(t)
			for i := range 2 {
				require.NoError(t, e.direct[i].Set(ctx, key, "someone-else.1", 30*time.Second).Err())
			}
			before := e.calls(2, "evalsha")
			caught := e.proxies[2].HoldNext([]byte(key))
			_, err := c.TryAcquire(ctx, key, 30*time.Second)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			<-caught
			// The rollback reached node 2 and found the key absent.
			require.Eventually(t, func() bool { return e.calls(2, "evalsha") > before },
				10*time.Second, time.Millisecond, "the rollback did not reach node 2")
			if cfg.name == "context-timeouts" {
				// The write was given up on: everything that follows it in
				// the client has run.
				require.NoError(t, c.Close(ctx))
			}
			require.Empty(t, e.value(2, key))

			landed := e.calls(2, "evalsha")
			e.proxies[2].ReleaseHeld()
			require.Eventually(t, func() bool { return e.calls(2, "evalsha") > landed },
				10*time.Second, time.Millisecond, "the held write did not land")
			require.Eventually(t, func() bool { return e.value(2, key) == "" },
				1500*time.Millisecond, time.Millisecond, "the late write left our key on node 2")
			require.Eventually(t, func() bool { return rawKey(t, ctx, e.direct[2], key) == "" },
				2500*time.Millisecond, 5*time.Millisecond, "node 2 kept something under the key")
		})
	}
}

// TestDuplicateServerDownAtFirstContact: two addresses of one server
// (127.0.0.1 and localhost) and another server. The first operations run
// while the shared server is down; once it is back and the other server is
// cut off, its two addresses must not make a quorum of one server.
func TestDuplicateServerDownAtFirstContact(t *testing.T) {
	servers := redistest.StartT(t, 2)
	loadScripts(t, servers[0].Addr(), servers[1].Addr())
	var proxies []*faultproxy.Proxy
	for _, s := range servers {
		p, err := faultproxy.New(s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		proxies = append(proxies, p)
	}
	_, port, _ := strings.Cut(proxies[0].Addr(), ":")
	addrs := []string{"127.0.0.1:" + port, "localhost:" + port, proxies[1].Addr()}
	newClient := func() *redlock.Client {
		var nodes []redis.UniversalClient
		for _, a := range addrs {
			rc := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { _ = rc.Close() })
			nodes = append(nodes, rc)
		}
		c, err := redlock.New(nodes, redlock.WithNodeTimeout(300*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = c.Close(ctx)
		})
		return c
	}
	ctx := t.Context()
	x, y := newClient(), newClient()
	key := newKey(t)

	proxies[0].SetRefuse(true)
	for _, c := range []*redlock.Client{x, y} {
		_, err := c.TryAcquire(ctx, key, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
	}
	proxies[0].SetRefuse(false)
	proxies[1].SetBlackhole(true)
	for _, c := range []*redlock.Client{x, y} {
		var err error
		for try := 0; try < 50 && !errors.Is(err, redlock.ErrInvalidArgument); try++ {
			var l *redlock.Lock
			l, err = c.TryAcquire(ctx, key, 10*time.Second)
			require.Error(t, err, "one server's two addresses made a quorum")
			require.Nil(t, l)
			time.Sleep(20 * time.Millisecond)
		}
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "the duplicate server was never found")
	}
}

// TestHugeDurations: durations near the largest time.Duration are refused
// before anything is sent, and a backoff with a huge cap never waits 0.
func TestHugeDurations(t *testing.T) {
	e := newEnv(t, 1, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	_, err := c.TryAcquire(ctx, key, time.Duration(math.MaxInt64))
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	_, err = c.Acquire(ctx, key, redlock.MaxTTL+time.Millisecond)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	e.requireNoKey(key)
	l, err := c.TryAcquire(ctx, key, redlock.MaxTTL)
	require.NoError(t, err)
	require.ErrorIs(t, l.Extend(ctx, time.Duration(math.MaxInt64)), redlock.ErrInvalidArgument)
	require.NoError(t, l.Release(ctx))
	e.requireNoKey(key)

	for _, o := range []redlock.Option{
		redlock.WithNodeTimeout(time.Duration(math.MaxInt64)),
		redlock.WithCleanupTimeout(time.Duration(math.MaxInt64)),
		redlock.WithFenceHorizon(time.Duration(math.MaxInt64)),
		redlock.WithRestartGuard(time.Duration(math.MaxInt64)),
		redlock.WithRenewInterval(time.Duration(math.MaxInt64)),
		redlock.WithDrift(0.01, time.Duration(math.MaxInt64)),
	} {
		_, err := redlock.New(e.nodes, o)
		require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	}

	b := redlock.ExponentialBackoff(time.Millisecond, time.Duration(math.MaxInt64))
	for failed := 1; failed <= 300; failed++ {
		d, ok := b.Backoff(failed)
		require.True(t, ok)
		require.Positive(t, d, "failed %d", failed)
	}
}

// TestReleaseWaitsForSlowNodes: nodes slower than the per-node deadline
// still confirm the Release's deletes, and Release waits for them rather
// than reporting a lock that is being freed as not held.
func TestReleaseWaitsForSlowNodes(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 5, cfg.o)
			c := e.client(redlock.WithNodeTimeout(25 * time.Millisecond))
			ctx := t.Context()
			key := newKey(t)
			l, err := c.Acquire(ctx, key, 5*time.Second)
			require.NoError(t, err)
			e.awaitHolders(key, l.Token())
			for _, p := range e.proxies {
				p.SetDelay(150 * time.Millisecond)
			}
			require.NoError(t, l.Release(context.Background()), "Release gave up on nodes that were only slow")
			e.resetFaults()
			e.eventuallyNoKey(key, 5*time.Second)
		})
	}
}

// TestReleaseBound: with a majority of nodes silent, Release keeps trying
// for the cleanup timeout, then reports which nodes did not answer.
func TestReleaseBound(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client(redlock.WithCleanupTimeout(700 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 5*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	for _, i := range []int{2, 3, 4} {
		e.proxies[i].SetBlackhole(true)
	}
	start := time.Now()
	err = l.Release(context.Background())
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.GreaterOrEqual(t, took, 600*time.Millisecond, "Release gave up before its bound")
	assert.Less(t, took, 5*time.Second, "Release outlived its bound")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	var silent []int
	for _, n := range qe.Nodes {
		if errors.Is(n.Err, redlock.ErrNoReply) {
			silent = append(silent, n.Node)
		}
	}
	assert.Equal(t, []int{2, 3, 4}, silent, "%v", err)
	e.resetFaults()
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestOwnerReentryUnprovenDoesNotTakeOver: when the re-entry's extension
// cannot reach a quorum for a passing reason (nodes silent, not refusing),
// the Lock the owner holds is still valid: the Acquire fails without a new
// Lock of the owner taking the key over and, failing, deleting it from the
// nodes it reached. (The nemesis found this: the other client then got a
// quorum of freed nodes while the owner's Lock was valid.)
func TestOwnerReentryUnprovenDoesNotTakeOver(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(100 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-2")

	l, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	held := e.rawValues(key)
	e.proxies[1].SetBlackhole(true)
	e.proxies[2].SetBlackhole(true)
	got, err := c.TryAcquire(ctx, key, time.Second, owner)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Nil(t, got)
	quiet(t, c)
	// The re-entry's extension may have refreshed the value (a later
	// generation of the same Lock); the Lock's prefix must be there.
	prefix := held[0][:strings.LastIndexByte(held[0], '.')+1]
	assert.True(t, strings.HasPrefix(rawKey(t, ctx, e.direct[0], key), prefix), "node 0's value was replaced or deleted")
	e.resetFaults()
	require.NoError(t, l.Extend(ctx, 10*time.Second), "the Lock is still held")
	require.NoError(t, l.Release(ctx))
}

// TestFailedOwnerTakeoverRestoresHolder: a Lock of an owner in one Client is
// valid on a bare quorum when another Client's Acquire for the same owner
// takes the key over on one node and misses its quorum. Its rollback must
// give that node back to the valid Lock, with at least the Lock's expiry,
// not delete it: a third client would otherwise get a quorum of freed nodes
// while the Lock is valid. (The nemesis found this, seed 983890.)
func TestFailedOwnerTakeoverRestoresHolder(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c1, c2, other := e.client(), e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("order-7")

	// The Lock holds on nodes 0 and 1: node 2 was down when it was taken.
	e.proxies[2].SetRefuse(true)
	a, err := c1.Acquire(ctx, key, 20*time.Second, owner)
	require.NoError(t, err)
	quiet(t, c1)
	e.resetFaults()
	held := e.rawValues(key)
	require.NotEmpty(t, held[0])
	require.NotEmpty(t, held[1])

	// The other Client's takeover reaches node 0 only, and fails.
	e.proxies[1].SetRefuse(true)
	e.proxies[2].SetRefuse(true)
	b, err := c2.TryAcquire(ctx, key, time.Second, owner)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Nil(t, b)
	quiet(t, c2)
	e.resetFaults()
	// The rollback may still be on its way to node 0.
	require.Eventually(t, func() bool {
		v := rawKey(t, context.Background(), e.direct[0], key)
		return v == "" || v == held[0]
	}, 10*time.Second, 5*time.Millisecond, "the failed takeover's value stayed on node 0")

	assert.Equal(t, held[0], rawKey(t, ctx, e.direct[0], key), "the failed takeover did not give node 0 back")
	pttl, err := e.direct[0].PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, 10*time.Second, "node 0 gave the Lock back with a shorter expiry than its own")
	_, err = other.TryAcquire(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client got in while the owner's Lock was valid")
	require.NoError(t, a.Extend(ctx, 10*time.Second), "the Lock is still held")
	require.NoError(t, a.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
}
