package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// TestOwnerReentrantWithinClient: an owner that acquires a key it holds gets
// the same Lock back with one more hold, and the key leaves the nodes only
// with the last Release. Another owner is refused meanwhile.
func TestOwnerReentrantWithinClient(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	a, err := c.TryAcquire(ctx, key, time.Minute, redlock.WithOwner("request-1"))
	require.NoError(t, err)
	e.awaitHolders(key, a.Token())
	b, err := c.TryAcquire(ctx, key, time.Minute, redlock.WithOwner("request-1"))
	require.NoError(t, err)
	assert.Same(t, a, b, "reentry returns the held Lock")

	_, err = c.TryAcquire(ctx, key, time.Minute, redlock.WithOwner("request-2"))
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another owner got in")
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "a call without owner got in")

	require.NoError(t, b.Release(ctx))
	assert.Equal(t, 3, e.holders(key, a.Token()), "the first Release of two freed the key")
	require.NoError(t, a.Extend(ctx, time.Minute), "the remaining hold is still a lock")
	require.NoError(t, a.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)

	// Released for good: the next Acquire of the owner is a new lock.
	n, err := c.TryAcquire(ctx, key, time.Minute, redlock.WithOwner("request-1"))
	require.NoError(t, err)
	assert.NotSame(t, a, n)
	require.NoError(t, n.Release(ctx))
}

// TestOwnerAcrossClients: the same id from another Client (another process)
// is the same holder for taking the key: a retried request takes it over at
// once instead of waiting for its own TTL. The earlier Lock is superseded:
// its Extend and Release are refused and leave the new Lock's key alone.
func TestOwnerAcrossClients(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	first, second := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)

	a, err := first.TryAcquire(ctx, key, time.Hour, redlock.WithOwner("order-42"))
	require.NoError(t, err)
	e.awaitHolders(key, a.Token())
	// The first process "crashed" holding it for an hour; the retry comes
	// from another one.
	start := time.Now()
	b, err := second.TryAcquire(ctx, key, time.Hour, redlock.WithOwner("order-42"))
	require.NoError(t, err, "the retried request was locked out by itself")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, a.Token(), b.Token())
	_, err = second.TryAcquire(ctx, key, time.Hour, redlock.WithOwner("order-43"))
	require.ErrorIs(t, err, redlock.ErrNotAcquired)

	// The later Acquire took the key over: its Extend works, the earlier
	// Lock's does not, and the earlier Lock's Release deletes nothing.
	require.NoError(t, b.Extend(ctx, time.Hour))
	require.ErrorIs(t, a.Extend(ctx, time.Hour), redlock.ErrNotHeld)
	require.ErrorIs(t, a.Release(ctx), redlock.ErrNotHeld)
	assert.Equal(t, 3, e.holders(key, b.Token()), "the superseded Lock's Release deleted the new Lock's key")
	_, err = second.TryAcquire(ctx, key, time.Minute, redlock.WithOwner("order-43"))
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, b.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
	l, err := second.TryAcquire(ctx, key, time.Minute, redlock.WithOwner("order-43"))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

// TestOwnerInvalid: bad ids are refused before anything is sent, and leave
// nothing behind.
func TestOwnerInvalid(t *testing.T) {
	e := newEnv(t, 1, fastClients)
	c := e.client()
	ctx := context.Background()
	key := newKey(t)
	for _, id := range []string{"", strings.Repeat("x", redlock.MaxOwnerLen+1)} {
		_, err := c.TryAcquire(ctx, key, time.Minute, redlock.WithOwner(id))
		require.ErrorIs(t, err, redlock.ErrInvalidArgument)
		_, err = c.Acquire(ctx, key, time.Minute, redlock.WithOwner(id))
		require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	}
	_, err := c.TryAcquire(ctx, key, time.Minute, nil)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	e.requireNoKey(key)
	l, err := c.TryAcquire(ctx, key, time.Minute, redlock.WithOwner(strings.Repeat("x", redlock.MaxOwnerLen)))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

// TestOwnerReentrantDo: a Do inside a Do of the same owner re-enters; when
// the inner one returns, the lock stays held and kept alive for the outer
// one, and the outer one's return frees it.
func TestOwnerReentrantDo(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("job-7")
	err := c.Do(ctx, key, 600*time.Millisecond, func(outer context.Context, _ *redlock.Lock) error {
		err := c.Do(ctx, key, 600*time.Millisecond, func(inner context.Context, _ *redlock.Lock) error {
			return inner.Err()
		}, owner)
		if err != nil {
			return err
		}
		// Past the TTL: only renewal keeps it.
		time.Sleep(1500 * time.Millisecond)
		if outer.Err() != nil {
			return context.Cause(outer)
		}
		other := e.client()
		if _, err := other.TryAcquire(ctx, key, time.Second); err == nil {
			t.Error("another holder got in while the outer Do held the lock")
		}
		return nil
	}, owner)
	require.NoError(t, err)
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestOwnerReentrantDoStopsRenewing: a Do that re-entered a lock its owner
// holds without renewal renews it only while it runs.
func TestOwnerReentrantDoStopsRenewing(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("job-8")
	outer, err := c.Acquire(ctx, key, 600*time.Millisecond, owner)
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, key, 600*time.Millisecond, func(context.Context, *redlock.Lock) error { return nil }, owner))
	e.eventuallyNoKey(key, 3*time.Second) // expired: nothing renews it any more
	_ = outer.Release(ctx)
}
