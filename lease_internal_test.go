package redlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestRenewalFindsReleaseStarted: Release marks its lock as releasing, then
// ends the lease; a renewal can run, fail and settle in between. Its
// failure is no loss and no failed renewal: the lease ends with
// ErrReleased, the cause Release gives it, and the renewal error handler
// is not called.
func TestRenewalFindsReleaseStarted(t *testing.T) {
	var clients []redis.UniversalClient
	for _, s := range redistest.StartT(t, 3) {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		clients = append(clients, rc)
	}
	var mu sync.Mutex
	var failures []error
	c, err := New(clients, WithRenewErrorHandler(func(_ *Lock, err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, err)
	}))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		require.NoError(t, c.Close(ctx))
	})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "renewal-race", time.Minute)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)

	// Release's first step, then a renewal before its second.
	l.mu.Lock()
	l.releasing = true
	l.mu.Unlock()
	ls := l.currentLease()
	ls.mu.Lock()
	ls.running = true // as fire hands it to the renewal queue
	ls.mu.Unlock()
	ls.renew()

	require.ErrorIs(t, kctx.Err(), context.Canceled, "the renewal left the lease running")
	require.Equal(t, ErrReleased, context.Cause(kctx))
	mu.Lock()
	require.Empty(t, failures, "a renewal that found the lock released was reported as failed")
	mu.Unlock()
	require.NoError(t, l.Release(ctx))
	require.Equal(t, ErrReleased, context.Cause(kctx))
}
