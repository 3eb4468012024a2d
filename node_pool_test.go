package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// TestStalledNodeBounded stalls real servers with SIGSTOP, with clients left
// at go-redis's defaults (reads bounded only by a 3s ReadTimeout), where the
// outcome needs the stalled node: the wait must end at the per-node deadline.
func TestStalledNodeBounded(t *testing.T) {
	const nodeTimeout = 100 * time.Millisecond
	const bound = nodeTimeout + 400*time.Millisecond // far below the 3s read timeout
	// Release waits for a quorum of confirmed deletes up to the cleanup
	// timeout: that is its bound.
	const cleanupTimeout = 200 * time.Millisecond
	e := newEnv(t, 3, defaultClients)
	c := e.client(redlock.WithNodeTimeout(nodeTimeout), redlock.WithCleanupTimeout(cleanupTimeout))
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)

	require.NoError(t, e.servers[1].Pause())
	require.NoError(t, e.servers[2].Pause())
	t.Cleanup(func() { _ = e.servers[1].Resume(); _ = e.servers[2].Resume() })

	start := time.Now()
	err = l.Extend(ctx, time.Minute)
	assert.Less(t, time.Since(start), bound, "extend")
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, redlock.ErrNoReply)

	start = time.Now()
	err = l.Release(ctx)
	assert.Less(t, time.Since(start), cleanupTimeout+bound, "release")
	require.ErrorIs(t, err, redlock.ErrReleaseUnconfirmed)
	require.NotErrorIs(t, err, redlock.ErrNotHeld)

	start = time.Now()
	_, err = c.TryAcquire(ctx, newKey(t), time.Minute)
	assert.Less(t, time.Since(start), bound, "acquire")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)

	require.NoError(t, e.servers[1].Resume())
	require.NoError(t, e.servers[2].Resume())
	// The release queued behind the stalled calls reaches the nodes later.
	e.settle(c)
	e.requireNoKey(key)
}

// TestStalledNodeDoesNotPileUp retries for a while against a SIGSTOPped node
// with go-redis's default options, where each call given up on stays blocked
// for the client's read timeout. Queued calls that have become useless must
// be dropped: at most one call of the lock is in flight on the node, and
// once the node is back the background work ends within about one read
// timeout, not one per retry.
func TestStalledNodeDoesNotPileUp(t *testing.T) {
	e := newEnv(t, 3, defaultClients)
	c := e.client(redlock.WithNodeTimeout(20*time.Millisecond), redlock.WithRetry(redlock.ExponentialBackoff(time.Millisecond, 5*time.Millisecond)))
	ctx := t.Context()
	key := newKey(t)
	// Another holder on node 1: no quorum is possible without node 0.
	require.NoError(t, e.direct[1].Set(ctx, key, "other", time.Minute).Err())
	require.NoError(t, e.servers[0].Pause())
	t.Cleanup(func() { _ = e.servers[0].Resume() })

	stop := make(chan struct{})
	maxInFlight := make(chan int, 1)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				maxInFlight <- most
				return
			case <-time.After(time.Millisecond):
				most = max(most, c.Nodes()[0].InFlight)
			}
		}
	}()
	attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Acquire(attemptCtx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(stop)
	// At most one write and one delete given up on (go-redis holds each
	// until its read timeout) and one delete being tried again, and as
	// many of the waiting Acquire's entry in the key's waiting room (its
	// renewals every 250 ms, its removal; announce.go): a bound that does
	// not grow with the number of retries, nor of renewals.
	assert.LessOrEqual(t, <-maxInFlight, 6, "calls piled up on the stalled node")

	require.NoError(t, e.servers[0].Resume())
	start := time.Now()
	e.settle(c)
	assert.Less(t, time.Since(start), 12*time.Second, "background work grew with the number of retries")
	assert.Equal(t, "other", e.value(1, key))
	assert.Empty(t, e.value(0, key))
	assert.Empty(t, e.value(2, key))
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
	require.ErrorIs(t, err, redlock.ErrReleaseUnconfirmed)
	require.NotErrorIs(t, err, redlock.ErrNotHeld)
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
