package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestExtendReleaseRace: a keep-alive goroutine extends while the holder
// releases. Extend must never bring the key back once Release has started.
func TestExtendReleaseRace(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	for round := range 40 {
		key := fmt.Sprintf("%s:%d", newKey(t), round)
		l, err := c.TryAcquire(ctx, key, 10*time.Second)
		require.NoError(t, err)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = l.Extend(ctx, 10*time.Second)
			}
		})
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		require.NoError(t, l.Release(ctx), "round %d", round)
		close(stop)
		wg.Wait()
		require.NoError(t, l.Release(ctx), "a second Release")
		e.eventuallyNoKey(key, 2*time.Second)
		time.Sleep(20 * time.Millisecond) // a late Extend would land now
		e.requireNoKey(key)
	}
}

// TestFailedExtendMovesUntil: an Extend to a shorter TTL fails because three
// of five nodes answer late, but its writes land: Until must not be later
// than the expiry they set.
func TestFailedExtendMovesUntil(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client(redlock.WithNodeTimeout(50 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	for _, p := range e.proxies[:3] {
		p.SetDelay(150 * time.Millisecond)
	}
	start := time.Now()
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrNotHeld)
	assert.False(t, l.Until().After(start.Add(time.Second)), "Until %v is later than the 1s the nodes now apply", time.Until(l.Until()))
	e.resetFaults()
	require.Eventually(t, func() bool {
		ttl := e.direct[0].PTTL(ctx, key).Val()
		return ttl > 0 && ttl <= time.Second
	}, 2*time.Second, 5*time.Millisecond, "the late extension should land")

	// Two Extends at once with different TTLs: whatever order they reach
	// the nodes in, a quorum keeps the key at least until Until.
	l, err = c.TryAcquire(ctx, newKey(t), 10*time.Second)
	require.NoError(t, err)
	for range 20 {
		var wg sync.WaitGroup
		for _, ttl := range []time.Duration{10 * time.Second, time.Second} {
			wg.Go(func() { _ = l.Extend(ctx, ttl) })
		}
		wg.Wait()
		until := l.Until()
		holding := 0
		for i := range e.direct {
			if ttl := e.direct[i].PTTL(ctx, l.Key()).Val(); ttl > 0 && !time.Now().Add(ttl).Before(until) {
				holding++
			}
		}
		require.GreaterOrEqual(t, holding, c.Quorum(), "fewer than a quorum keep the key until Until")
	}
	require.NoError(t, l.Release(ctx))
}

// TestExtendAfterMajorityLoss: the key is lost on three of five nodes,
// another client takes the lock and releases it; our Extend must report the
// loss, not re-create the keys.
func TestExtendAfterMajorityLoss(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	for i := range 3 {
		require.NoError(t, e.direct[i].Del(ctx, key).Err())
	}
	other, err := e.client().TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err, "the lost majority lets another client in")
	require.NoError(t, other.Release(ctx))
	require.Eventually(t, func() bool { return e.holders(key, other.Token()) == 0 }, 2*time.Second, time.Millisecond)

	err = l.Extend(ctx, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.LessOrEqual(t, qe.OK, 2, "only the two nodes that kept our value may confirm")
	for i := range 3 {
		assert.Empty(t, e.value(i, key), "Extend re-created the key on node %d", i)
	}
}

// TestCleanupPersists is the seed incident: three of five nodes stop
// answering for 300 ms around a failed TryAcquire with a 30 s TTL. Their
// writes landed; the rollback must keep trying until it has removed them,
// with either client configuration.
func TestCleanupPersists(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 5, cfg.o)
			c := e.client(redlock.WithNodeTimeout(50 * time.Millisecond))
			key := newKey(t)
			start := time.Now()
			for _, p := range e.proxies[:3] {
				p.SetDropReplies(true)
			}
			_, err := c.TryAcquire(t.Context(), key, 30*time.Second)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			time.Sleep(300*time.Millisecond - time.Since(start))
			require.NotEmpty(t, e.value(0, key), "the write should have landed")
			e.resetFaults()
			e.eventuallyNoKey(key, 1500*time.Millisecond)
			e.settle(c)
			for _, n := range c.Nodes() {
				assert.Zero(t, n.PendingCleanups, "node %d", n.Index)
			}
		})
	}

	// Release's deletes persist too.
	e := newEnv(t, 5, fastClients)
	c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithCleanupTimeout(100*time.Millisecond))
	key := newKey(t)
	l, err := c.TryAcquire(t.Context(), key, 30*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	for _, p := range e.proxies[3:] {
		p.SetBlackhole(true)
	}
	require.NoError(t, l.Release(t.Context()))
	require.Eventually(t, func() bool { return c.Nodes()[3].PendingCleanups == 1 }, 2*time.Second, time.Millisecond,
		"the unanswered delete should wait for another try")
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, 1, c.Nodes()[3].PendingCleanups, "at most one pending cleanup per lock and node")
	e.resetFaults()
	e.eventuallyNoKey(key, 1500*time.Millisecond)
}

// TestRollbackSparesLaterAttempt: the rollback of a failed attempt is held
// back on its connection until the next attempt has been counted, then
// lands. It must not delete the later attempt's key.
func TestRollbackSparesLaterAttempt(t *testing.T) {
	e := newEnv(t, 3, func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.MaxRetries = -1 })
	c := e.client(redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithCleanupTimeout(100*time.Millisecond),
		redlock.WithRetry(redlock.ExponentialBackoff(20*time.Millisecond, 40*time.Millisecond)))
	ctx := t.Context()
	key := newKey(t)
	caught := e.proxies[0].HoldNext(scriptSHA(t, "scripts/release.lua"))

	// Another holder on nodes 1 and 2, for a little while: the first attempt
	// fails, takes node 0 and is rolled back there; a later one succeeds.
	for i := 1; i < 3; i++ {
		require.NoError(t, e.direct[i].Set(ctx, key, "other", 300*time.Millisecond).Err())
	}
	l, err := c.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	select {
	case <-caught:
	default:
		t.Fatal("no rollback was held back: the test did not set up the race")
	}
	// Node 0, where the stale rollback waits, holds the later attempt's
	// value. (Node 2 may not: the other holder's key there can expire a
	// moment after node 1's, and the attempt that lands between them wins
	// on nodes 0 and 1.)
	require.Eventually(t, func() bool { return e.value(0, key) == l.Token() }, 5*time.Second, time.Millisecond,
		"node 0 did not take the later attempt's key")
	before := e.calls(0, "evalsha")
	e.proxies[0].ReleaseHeld()
	require.Eventually(t, func() bool { return e.calls(0, "evalsha") > before }, 2*time.Second, time.Millisecond,
		"the held delete should land")
	assert.Equal(t, l.Token(), e.value(0, key), "a stale rollback deleted the later attempt's key")
	require.NoError(t, l.Release(ctx))
}

// TestOneServerOneVote: two nodes that are one server must never both count.
func TestOneServerOneVote(t *testing.T) {
	down := redistest.StartT(t, 1)[0]
	downAddr := down.Addr()
	require.NoError(t, down.Stop())
	dead := redis.NewClient(&redis.Options{Addr: downAddr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = dead.Close() })

	check := func(t *testing.T, a, b redis.UniversalClient, wantAddr string) {
		t.Helper()
		c, err := redlock.New([]redis.UniversalClient{a, b, dead}, redlock.WithNodeTimeout(time.Second))
		require.NoError(t, err, "New sends nothing and cannot know yet")
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		for range 2 { // and it stays refused
			_, err = c.TryAcquire(t.Context(), newKey(t), time.Minute)
			require.ErrorIs(t, err, redlock.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "nodes 0 (")
			assert.Contains(t, err.Error(), "and 1 (")
		}
		if wantAddr != "" {
			assert.Equal(t, wantAddr, c.Nodes()[0].Addr)
			assert.Contains(t, err.Error(), wantAddr)
		}
	}
	t.Run("two addresses", func(t *testing.T) {
		s := redistest.StartT(t, 1)[0]
		_, port, _ := strings.Cut(s.Addr(), ":")
		a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, ContextTimeoutEnabled: true})
		b := redis.NewClient(&redis.Options{Addr: "localhost:" + port, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		check(t, a, b, "")
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3)
		check(t, cl.Client(), cl.Client(), "")
	})
	t.Run("sentinel", func(t *testing.T) {
		s := redistest.StartSentinel(t)
		check(t, s.FailoverClient(), s.FailoverClient(), s.MasterAddr())
	})
}

// TestReleaseAndNilSmalls covers the smaller items: a failed Release still
// stops the lock and a later Release reports the background cleanup's
// outcome; concurrent Releases agree; nil locks do not panic; a retry with
// no wait is refused; per-node errors are exported ones.
func TestReleaseAndNilSmalls(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithCleanupTimeout(100*time.Millisecond))
	ctx := t.Context()

	l, err := c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	e.awaitHolders(l.Key(), l.Token())
	e.proxies[0].SetBlackhole(true)
	e.proxies[1].SetBlackhole(true)
	err = l.Release(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, ne := range qe.Nodes {
		assert.True(t, errors.Is(ne, redlock.ErrNoReply) || errors.Is(ne, redlock.ErrKeyAbsent) || errors.Is(ne, redlock.ErrHeldByOther),
			"node %d: %v is not an exported cause", ne.Node, ne.Err)
	}
	require.ErrorIs(t, l.Extend(ctx, time.Minute), redlock.ErrNotHeld, "a failed Release still ends the lock")
	e.resetFaults()
	e.eventuallyNoKey(l.Key(), 2*time.Second)
	require.Eventually(t, func() bool { return l.Release(ctx) == nil }, 2*time.Second, 10*time.Millisecond,
		"once the background deletes are confirmed, Release reports the lock released")

	l, err = c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = l.Release(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "concurrent Release %d", i)
	}

	var nilLock *redlock.Lock
	assert.Zero(t, nilLock.Fence())
	assert.True(t, nilLock.Until().IsZero())
	assert.Empty(t, nilLock.Key())
	assert.Empty(t, nilLock.Token())

	for _, s := range []redlock.RetryStrategy{
		redlock.ExponentialBackoff(0, 0),
		redlock.ExponentialBackoff(time.Second, time.Millisecond),
		redlock.LimitRetry(redlock.ExponentialBackoff(0, time.Second), 3),
	} {
		_, err := redlock.New(e.nodes, redlock.WithRetry(s))
		require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	}
}

// TestLoneNodeDefaultsDeadline: one node with go-redis defaults (no
// ContextTimeoutEnabled), whose calls the caller makes itself on a clone of
// the client that honours the deadline: a blackholed node still costs each
// call its node deadline, not go-redis's 3 s ReadTimeout, and once the node
// answers again locks work.
func TestLoneNodeDefaultsDeadline(t *testing.T) {
	e := newEnv(t, 1, defaultClients)
	// Release waits for a confirmed delete up to the cleanup timeout.
	c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithCleanupTimeout(300*time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)

	e.proxies[0].SetBlackhole(true)
	began := time.Now()
	err = l.Release(ctx)
	took := time.Since(began)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.Less(t, took, time.Second, "Release waited past its node deadline")
	began = time.Now()
	_, err = c.TryAcquire(ctx, newKey(t), 10*time.Second)
	took = time.Since(began)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.Less(t, took, time.Second, "TryAcquire waited past its node deadline")

	e.resetFaults()
	require.Eventually(t, func() bool {
		k := newKey(t)
		l, err := c.TryAcquire(ctx, k, 10*time.Second)
		if err != nil {
			return false
		}
		return l.Release(ctx) == nil
	}, 10*time.Second, 10*time.Millisecond, "no lock after the node came back")
}

// TestLoneNodeDefaultsNoScript: the same lone node with go-redis defaults
// forgets its scripts (SCRIPT FLUSH, as after a restart) before every call:
// each call loads its script again and succeeds.
func TestLoneNodeDefaultsNoScript(t *testing.T) {
	e := newEnv(t, 1, defaultClients)
	c := e.client()
	ctx := t.Context()
	for range 5 {
		key := newKey(t)
		require.NoError(t, e.direct[0].ScriptFlush(ctx).Err())
		l, err := c.TryAcquire(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, e.direct[0].ScriptFlush(ctx).Err())
		require.NoError(t, l.Release(ctx))
		e.requireNoKey(key)
	}
}
