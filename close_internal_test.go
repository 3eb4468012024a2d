package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/redistest"
)

// heldCount is how many Locks c keeps for Close to release.
func heldCount(c *Client) int {
	c.nodes.life.mu.Lock()
	defer c.nodes.life.mu.Unlock()
	return len(c.nodes.life.held)
}

// TestUnreleasedLocksForgotten: a Lock its holder never released is
// forgotten by later Acquires once it can no longer hold its key, so the
// Client does not keep every Lock it ever handed out; a Lock still valid
// is kept.
func TestUnreleasedLocksForgotten(t *testing.T) {
	var clients []redis.UniversalClient
	for _, s := range redistest.StartT(t, 3) {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		clients = append(clients, rc)
	}
	c, err := New(clients)
	require.NoError(t, err)
	ctx := t.Context()
	valid, err := c.TryAcquire(ctx, "kept", time.Minute)
	require.NoError(t, err)
	var leaked []*Lock
	for i := range 20 {
		l, err := c.TryAcquire(ctx, fmt.Sprint("leaked:", i), 100*time.Millisecond)
		require.NoError(t, err)
		leaked = append(leaked, l)
	}
	require.Equal(t, 21, heldCount(c))
	require.Eventually(t, func() bool {
		for _, l := range leaked {
			if !c.gone(l) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the leaked locks' keys did not expire")
	require.False(t, c.gone(valid))

	for i := 0; heldCount(c) > 1; i++ {
		require.Less(t, i, 1000, "%d Locks kept after %d Acquires", heldCount(c), i)
		l, err := c.TryAcquire(ctx, "other", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	c.nodes.life.mu.Lock()
	_, kept := c.nodes.life.held[valid]
	c.nodes.life.mu.Unlock()
	require.True(t, kept, "a valid Lock was forgotten")

	closeCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, c.Close(closeCtx))
	n, err := clients[0].Exists(ctx, "kept").Result()
	require.NoError(t, err)
	require.Zero(t, n, "Close left the valid Lock's key")
}
