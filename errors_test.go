package redlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// refusedAddr is an address where nothing listens: a dial there is refused
// at once, the way a stopped server's is.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// requireTruthful checks the rules every error message follows: it never
// names a context error that errors.Is denies, and shows no monotonic clock
// reading.
func requireTruthful(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, context.DeadlineExceeded.Error()) {
		require.ErrorIs(t, err, context.DeadlineExceeded, "the message claims the deadline: %v", err)
	}
	if strings.Contains(msg, context.Canceled.Error()) {
		require.ErrorIs(t, err, context.Canceled, "the message claims a cancellation: %v", err)
	}
	require.NotContains(t, msg, "m=+", "a monotonic clock reading")
}

// TestAcquireUnavailable: with a majority of nodes refusing connections,
// Acquire with a context that has no deadline gives up after the default
// bound, with an error that names the refusals.
func TestAcquireUnavailable(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	nodes := []redis.UniversalClient{}
	for _, addr := range []string{s.Addr(), refusedAddr(t), refusedAddr(t)} {
		rdb := redis.NewClient(&redis.Options{Addr: addr}) // go-redis's defaults, as users leave them
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
	}
	c, err := redlock.New(nodes)
	require.NoError(t, err)
	closeAtCleanup(t, c)

	start := time.Now()
	returnsWithin(t, redlock.DefaultUnavailableTimeout+10*time.Second, "Acquire with nodes refusing", func() {
		_, err = c.Acquire(context.Background(), newKey(t), 10*time.Second)
	})
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrUnavailable)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "the nodes' real error is named: %v", err)
	assert.Contains(t, err.Error(), "connection refused")
	assert.GreaterOrEqual(t, took, redlock.DefaultUnavailableTimeout, "gave up before the bound")
	assert.Less(t, took, redlock.DefaultUnavailableTimeout+5*time.Second, "the bound did not hold")
	requireTruthful(t, err)
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)

	// Acquires queued for one key behind one another do not each wait
	// the bound again, and a later Acquire on nodes still down makes one
	// attempt.
	key := newKey(t)
	errs := make(chan error, 4)
	start = time.Now()
	for range cap(errs) {
		go func() {
			_, err := c.Acquire(context.Background(), key, 10*time.Second)
			errs <- err
		}()
	}
	returnsWithin(t, 2*redlock.DefaultUnavailableTimeout, "the queued Acquires", func() {
		for range cap(errs) {
			assert.ErrorIs(t, <-errs, redlock.ErrUnavailable)
		}
	})
	assert.Less(t, time.Since(start), 3*time.Second, "queued Acquires waited the bound one after another")

	// One attempt says the same, without waiting.
	_, err = c.TryAcquire(context.Background(), newKey(t), 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrUnavailable)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)
	requireTruthful(t, err)
	// Each refusing node is shown with the client's error, which is what
	// happened; that the call's deadline passed first is said after it.
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, ne := range qe.Nodes {
		if ne.Node == 0 {
			continue
		}
		assert.Regexp(t, `^node \d \(.*\): dial tcp .*connection refused`, ne.Error())
		assert.ErrorIs(t, ne, syscall.ECONNREFUSED)
		if errors.Is(ne, redlock.ErrNoReply) {
			assert.Contains(t, ne.Error(), "connection refused (no reply within node timeout)")
		}
	}
}

// TestAcquireUnavailableBlackholed: nodes that accept connections and never
// answer are unavailable too, within WithUnavailableTimeout.
func TestAcquireUnavailableBlackholed(t *testing.T) {
	for _, opts := range clientConfigs {
		t.Run(opts.name, func(t *testing.T) {
			e := newEnv(t, 3, opts.o)
			const bound = time.Second
			c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithUnavailableTimeout(bound))
			e.proxies[1].SetBlackhole(true)
			e.proxies[2].SetBlackhole(true)
			start := time.Now()
			var err error
			returnsWithin(t, bound+10*time.Second, "Acquire with nodes blackholed", func() {
				_, err = c.Acquire(context.Background(), newKey(t), 10*time.Second)
			})
			took := time.Since(start)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			require.ErrorIs(t, err, redlock.ErrUnavailable)
			require.ErrorIs(t, err, redlock.ErrNoReply)
			assert.GreaterOrEqual(t, took, bound)
			assert.Less(t, took, bound+5*time.Second)
			requireTruthful(t, err)
			e.resetFaults()
		})
	}
}

// TestUnavailableDecidedEarly: an attempt is decided as soon as a quorum
// can no longer confirm, and a node it did not wait for then is not known to
// have failed. When that node's latest calls failed, it counts as failed: a
// majority of nodes down is unavailable even when the one node left refuses
// first. CI saw the other reading: 4 Acquires queued on one key, with 2 of 3
// nodes refusing connections, took 5.2s instead of giving up at once, since
// one saw "held" (another's write on node 0 and one refusal decided it) and
// restarted the unavailability bound.
func TestUnavailableDecidedEarly(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(200 * time.Millisecond))
	ctx := t.Context()

	// Node 2 goes silent, and its failing record is seen.
	e.proxies[2].SetBlackhole(true)
	l, err := c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.Nodes()[2].ConsecutiveFailures > 0 }, 10*time.Second, 10*time.Millisecond)

	// Another holds key on node 0; node 1 fails at once (the key is of
	// the wrong type there), before node 2's silence is in.
	key := newKey(t)
	require.NoError(t, e.direct[0].Set(ctx, key, "someone-else", time.Hour).Err())
	require.NoError(t, e.direct[1].HSet(ctx, key, "f", "v").Err())
	t.Cleanup(func() {
		// Lets the rollback's retried delete through before Close waits
		// for it.
		require.NoError(t, e.direct[1].Del(context.Background(), key).Err())
		e.resetFaults()
		require.NoError(t, l.Release(context.Background()))
	})
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrUnavailable, "%v", err)
	assert.Contains(t, err.Error(), "its latest calls failed", "the message says why node 2 counts")
	requireTruthful(t, err)
}

// TestBusyIsNotUnavailable: a lock held elsewhere never matches
// ErrUnavailable, also with a minority of nodes down, and Acquire waits for
// it as long as its context lets it, past the unavailability bound.
func TestBusyIsNotUnavailable(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithUnavailableTimeout(100 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	held, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, held.Token())

	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NotErrorIs(t, err, redlock.ErrUnavailable)

	e.proxies[2].SetBlackhole(true)
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Acquire(actx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, redlock.ErrUnavailable)
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "a busy key is waited for until ctx ends")
	requireTruthful(t, err)
	e.resetFaults()
	require.NoError(t, held.Release(ctx))
}

// TestErrorShowsRealCause: a node that answers with an error before its
// deadline is shown with that error, not as a timeout.
func TestErrorShowsRealCause(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	ctx := t.Context()
	require.NoError(t, s.Client().Do(ctx, "ACL", "SETUSER", "nolock", "on", ">pw", "-@all", "+hello", "+ping").Err())
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "nolock", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := redlock.New([]redis.UniversalClient{rdb}, redlock.WithNodeTimeout(2*time.Second))
	require.NoError(t, err)
	closeAtCleanup(t, c)
	_, err = c.TryAcquire(ctx, newKey(t), time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrUnavailable)
	assert.Contains(t, err.Error(), "NOPERM")
	assert.NotContains(t, err.Error(), "timeout")
	require.NotErrorIs(t, err, redlock.ErrNoReply)
	requireTruthful(t, err)
}

// TestErrorNotAwaited: a node whose reply was not needed, because refusals
// decided the outcome first, is described as such and not as a timeout.
func TestErrorNotAwaited(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(5 * time.Second))
	ctx := t.Context()
	key := newKey(t)
	held, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, held.Token())
	e.proxies[2].SetBlackhole(true)

	start := time.Now()
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.Less(t, time.Since(start), 2*time.Second, "two refusals decide the outcome")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Len(t, qe.Nodes, 3)
	last := qe.Nodes[2]
	require.ErrorIs(t, last, redlock.ErrNotAwaited)
	require.NotErrorIs(t, last, redlock.ErrNoReply)
	assert.NotContains(t, last.Error(), "timeout")
	assert.NotContains(t, err.Error(), "timeout", "no node of this error timed out: %v", err)
	assert.NotContains(t, err.Error(), "not awaited", "the message names a node the outcome did not need")
	assert.NotContains(t, err.Error(), "node 2", "the message names a node the outcome did not need")
	requireTruthful(t, err)
	e.resetFaults()
	require.NoError(t, held.Release(ctx))
}

// TestErrorNoMonotonicClock: an expired lock's error gives its end as a
// time of day, without Go's monotonic clock reading.
func TestErrorNoMonotonicClock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, newKey(t), 50*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(time.Until(l.Until()) + 10*time.Millisecond)
	err = l.Extend(ctx, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.Contains(t, err.Error(), "expired at")
	requireTruthful(t, err)
	requireTruthful(t, context.Cause(l.KeepAlive(ctx)))
}

// TestErrorLongKey: a long key is shortened in messages; the error still
// carries the whole key in QuorumError.Key.
func TestErrorLongKey(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t) + strings.Repeat("x", 1<<20)
	held, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, held.Token())
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.Less(t, len(err.Error()), 1000, "the whole key is in the message")
	assert.Contains(t, err.Error(), "bytes")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, key, qe.Key)
	require.NoError(t, held.Release(ctx))
	err = held.Extend(ctx, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.Less(t, len(err.Error()), 1000)
	// Do's nil function, with the key in an invalid-argument message.
	err = c.Do(ctx, key, time.Second, nil)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	assert.Less(t, len(err.Error()), 1000)
}

// TestAcquireErrorsTellWhoseDeadline: an error matches the caller's context
// error exactly when the caller's context ended, never because a node's own
// deadline passed.
func TestAcquireErrorsTellWhoseDeadline(t *testing.T) {
	e := newEnv(t, 3, fastClients)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := e.client(redlock.WithClock(&cancelClock{cancel: cancel}))
	_, err := c.Acquire(ctx, newKey(t), time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.Canceled, "the context ended while an attempt failed for another reason")

	// Nodes that miss their deadline, with clients that give up at it
	// themselves: the caller's context is fine.
	c = e.client(redlock.WithNodeTimeout(50 * time.Millisecond))
	e.proxies[0].SetBlackhole(true)
	e.proxies[1].SetBlackhole(true)
	_, err = c.TryAcquire(t.Context(), newKey(t), time.Minute)
	require.ErrorIs(t, err, redlock.ErrNoReply)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "a node's deadline is not the caller's")
	e.resetFaults()
}

// cancelClock cancels the caller's context on its second reading and jumps
// an hour ahead: the attempt fails for want of validity at the very moment
// the context ends.
type cancelClock struct {
	n      atomic.Int32
	cancel context.CancelFunc
}

func (c *cancelClock) Now() time.Time {
	if c.n.Add(1) == 2 {
		c.cancel()
		return time.Now().Add(time.Hour)
	}
	return time.Now()
}

// TestMaxSharedIsItsOwnReason: a key that holds MaxShared shared Locks
// refuses one more with a reason of its own, still a held key (a shared
// Acquire waits for it), not another holder's token.
func TestMaxSharedIsItsOwnReason(t *testing.T) {
	e := newEnv(t, 1, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	var shares []*redlock.Lock
	for i := range redlock.MaxShared {
		l, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
		require.NoError(t, err, "share %d", i)
		shares = append(shares, l)
	}
	_, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrMaxShared)
	require.ErrorIs(t, err, redlock.ErrHeldByOther, "a full key is a held key")
	require.NotErrorIs(t, err, redlock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "MaxShared")
	assert.NotContains(t, err.Error(), "another token")
	for _, l := range shares {
		require.NoError(t, l.Release(ctx))
	}
}
