package redlock_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// fakeClock is a Clock that moves only when told, or by step on every read.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

func (c *fakeClock) set(now time.Time, step time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.step = now, step
}

// TestUntil checks the validity window against an injected clock: exactly
// start + ttl - drift, and an acquisition that used up its TTL is refused
// and rolled back.
func TestUntil(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clock := &fakeClock{}
	c := e.client(redlock.WithClock(clock))
	ctx := t.Context()
	ttl := 10 * time.Second
	drift := time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst

	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock.set(start, 0)
	l, err := c.TryAcquire(ctx, newKey(t), ttl)
	require.NoError(t, err)
	assert.Equal(t, start.Add(ttl-drift), l.Until())

	// Extend from a later start moves Until by the same rule.
	clock.set(start.Add(time.Second), 0)
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	drift20 := time.Duration(float64(20*time.Second)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst
	assert.Equal(t, start.Add(time.Second+20*time.Second-drift20), l.Until())
	require.NoError(t, l.Release(ctx))

	// Each clock read advances just past the validity budget.
	key := newKey(t)
	clock.set(start, ttl-drift)
	_, err = c.TryAcquire(ctx, key, ttl)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.GreaterOrEqual(t, qe.OK, qe.Quorum, "a quorum confirmed, yet no validity was left")
	assert.Equal(t, ttl-drift, qe.Elapsed)
	e.eventuallyNoKey(key, 5*time.Second)

	// An expired lock cannot be extended, and nothing is sent.
	clock.set(start, 0)
	l, err = c.TryAcquire(ctx, key, ttl)
	require.NoError(t, err)
	clock.set(l.Until(), 0)
	require.ErrorIs(t, l.Extend(ctx, ttl), redlock.ErrNotHeld)
	require.NoError(t, l.Release(ctx))
}

// TestUntilRealClock checks that Until is never later than start+ttl-drift
// with the real clock, over many acquisitions and extensions.
func TestUntilRealClock(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	ttl := 3 * time.Second
	drift := time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst
	// The library's start lies between before and after: Until must be
	// within [before, after] + ttl - drift, so never later than the
	// start + ttl - drift of any send time.
	within := func(before, after, until time.Time) {
		t.Helper()
		assert.False(t, until.After(after.Add(ttl-drift)), "Until later than start+ttl-drift")
		assert.False(t, until.Before(before.Add(ttl-drift)), "Until earlier than the rule gives")
	}
	for range 50 {
		before := time.Now()
		l, err := c.Acquire(ctx, key, ttl)
		after := time.Now()
		require.NoError(t, err)
		within(before, after, l.Until())
		before = time.Now()
		require.NoError(t, l.Extend(ctx, ttl))
		within(before, time.Now(), l.Until())
		require.NoError(t, l.Release(ctx))
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

// TestDeleteRetriesFollowDrift: a delete with no definite answer is tried
// again until the key it targets would have expired by the Client's own
// bound, the TTL plus twice its drift allowance (WithDrift), and no longer.
// The bound used to be ttl + ttl/50 + 2ms whatever WithDrift said, so a
// Client allowing for more drift gave up while its key could still live.
func TestDeleteRetriesFollowDrift(t *testing.T) {
	const (
		ttl         = 2 * time.Second
		factor      = 0.45
		nodeTimeout = 50 * time.Millisecond
	)
	e := newEnv(t, 3, fastClients)
	var mu sync.Mutex
	var last time.Time
	c := e.client(redlock.WithDrift(factor, 0), redlock.WithNodeTimeout(nodeTimeout),
		redlock.WithCleanupTimeout(100*time.Millisecond),
		redlock.WithHooks(redlock.Hooks{CleanupRetry: func(redlock.Event) {
			mu.Lock()
			last = time.Now()
			mu.Unlock()
		}}))
	ctx := t.Context()
	key := newKey(t)
	before := time.Now()
	l, err := c.Acquire(ctx, key, ttl)
	require.NoError(t, err)
	acquired := time.Now()
	e.awaitHolders(key, l.Token())
	e.proxies[2].SetBlackhole(true)
	require.NoError(t, l.Release(ctx))

	// The key written at the acquire's start lives ttl by the node's clock,
	// which may run slow by the drift: 2×0.45×2s more on ours, at most.
	oldBound := before.Add(ttl + ttl/50 + 2*time.Millisecond)
	newBound := acquired.Add(nodeTimeout + ttl + 2*time.Duration(factor*float64(ttl)))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return last.After(oldBound)
	}, 10*time.Second, 10*time.Millisecond, "no delete retried past ttl+ttl/50: WithDrift ignored")
	require.Eventually(t, func() bool { return c.Nodes()[2].PendingCleanups == 0 }, 15*time.Second, 10*time.Millisecond,
		"the delete kept retrying")
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, last.Before(newBound), "a retry was scheduled %v after the key's expiry bound", last.Sub(newBound))
	e.resetFaults()
}
