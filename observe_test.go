package redlock_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestObserve: the hooks see attempts, calls, node refusals and rollbacks,
// and the logger writes them without ever writing a token, a value or
// holder metadata, nor does any event or error carry the metadata.
func TestObserve(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	var mu sync.Mutex
	counts := map[string]int{}
	var ops, events []string
	hook := func(name string) { mu.Lock(); counts[name]++; mu.Unlock() }
	seen := func(ev redlock.Event) { mu.Lock(); events = append(events, fmt.Sprintf("%+v", ev)); mu.Unlock() }
	const md = "host db-7 user alice"
	var logs syncBuffer
	c := e.client(
		redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		redlock.WithHooks(redlock.Hooks{
			Attempt: func(a redlock.Event) {
				seen(a)
				hook("attempt")
				assert.Positive(t, a.Attempt)
			},
			Done: func(o redlock.Event) {
				seen(o)
				mu.Lock()
				ops = append(ops, o.Op)
				mu.Unlock()
			},
			NodeError: func(n redlock.Event) {
				seen(n)
				assert.Error(t, n.Err)
				if errors.Is(n.Err, redlock.ErrHeldByOther) { // the refused TryAcquire
					hook("node")
				}
			},
			Rollback: func(r redlock.Event) { seen(r); hook("rollback") },
		}))
	other := e.client()
	ctx := t.Context()
	key := newKey(t)

	// Node 0 is held by another holder: the attempt confirms on 1 and 2.
	o, err := other.TryAcquire(ctx, key, time.Minute, redlock.WithMetadata(md))
	require.NoError(t, err)
	_, err = c.TryAcquire(ctx, key, time.Minute, redlock.WithMetadata(md)) // refused everywhere
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NotContains(t, err.Error(), md)
	require.NoError(t, o.Release(ctx))
	l, err := c.Acquire(ctx, key, time.Minute, redlock.WithMetadata(md))
	require.NoError(t, err)
	require.NoError(t, l.Extend(ctx, time.Minute))
	require.NoError(t, l.Release(ctx))
	e.settle(c)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"try-acquire", "acquire", "extend", "release"}, ops)
	assert.Equal(t, 2, counts["attempt"])
	assert.Equal(t, 1, counts["rollback"])
	assert.Positive(t, counts["node"], "the refusals reached no hook")
	out := logs.String()
	for _, want := range []string{"redlock: attempt", "redlock: rollback", "redlock: release", key} {
		assert.Contains(t, out, want)
	}
	for _, secret := range []string{l.Token(), o.Token()} {
		assert.NotContains(t, out, secret, "a token in the log")
	}
	assert.False(t, strings.Contains(out, l.Token()[:10]))
	assert.NotContains(t, out, "db-7", "holder metadata in the log")
	assert.NotEmpty(t, events)
	for _, ev := range events {
		assert.NotContains(t, ev, "db-7", "holder metadata in an event")
	}
}

// TestObserveLease: renewals and a lost lock reach the hooks.
func TestObserveLease(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	var mu sync.Mutex
	renewals, lost := 0, 0
	c := e.client(redlock.WithHooks(redlock.Hooks{
		Renewal: func(r redlock.Event) { mu.Lock(); renewals++; mu.Unlock() },
		LockLost: func(l redlock.Event) {
			mu.Lock()
			lost++
			mu.Unlock()
			assert.ErrorIs(t, l.Err, redlock.ErrLockLost)
		},
	}))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 900*time.Millisecond)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	time.Sleep(700 * time.Millisecond)
	for i := range 2 {
		require.NoError(t, e.direct[i].Del(ctx, key).Err())
	}
	select {
	case <-kctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not found lost")
	}
	_ = l.Release(ctx)
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, renewals, 2)
	assert.Equal(t, 1, lost)
}

// TestObserveCleanupRetry: a delete with no definite answer is tried again,
// and the hook sees each retry.
func TestObserveCleanupRetry(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	var retries atomic.Int32
	c := e.client(redlock.WithCleanupTimeout(100*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond),
		redlock.WithHooks(redlock.Hooks{CleanupRetry: func(ci redlock.Event) {
			retries.Add(1)
			assert.Equal(t, 2, ci.Node)
			assert.Positive(t, ci.Wait)
		}}))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	e.proxies[2].SetBlackhole(true)
	require.NoError(t, l.Release(ctx))
	require.Eventually(t, func() bool { return retries.Load() > 0 }, 5*time.Second, 10*time.Millisecond)
	e.resetFaults()
	e.eventuallyNoKey(key, 10*time.Second)
}
