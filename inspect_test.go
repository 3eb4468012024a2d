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

func TestInspect(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing())
	ctx := t.Context()
	key := newKey(t)

	st, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, key, st.Key)
	require.False(t, st.Held)
	require.Len(t, st.Nodes, 3)
	for i, n := range st.Nodes {
		require.NoError(t, n.Err, "node %d", i)
		assert.False(t, n.Held)
		assert.Empty(t, n.Holder)
		assert.Zero(t, n.TTL)
		assert.Equal(t, e.proxies[i].Addr(), n.Addr)
	}

	l, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, e.value(0, key))
	st, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	require.True(t, st.Held)
	for i, n := range st.Nodes {
		require.NoError(t, n.Err, "node %d", i)
		assert.True(t, n.Held, "node %d", i)
		assert.NotEmpty(t, n.Holder)
		assert.True(t, strings.HasPrefix(l.Token(), n.Holder), "node %d: holder %q is not a prefix of the token", i, n.Holder)
		assert.Less(t, len(n.Holder), len(l.Token()), "the whole token is shown")
		assert.Greater(t, n.TTL, 5*time.Second)
		assert.LessOrEqual(t, n.TTL, 10*time.Second)
		assert.LessOrEqual(t, n.Fence, l.Fence(), "node %d", i)
	}
	fenced := 0
	for _, n := range st.Nodes {
		if n.Fence == l.Fence() {
			fenced++
		}
	}
	assert.GreaterOrEqual(t, fenced, c.Quorum(), "a quorum's counters hold the fence")

	// A node that does not answer is named; the others still tell.
	e.proxies[2].SetBlackhole(true)
	st, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	require.True(t, st.Held)
	require.ErrorIs(t, st.Nodes[2].Err, redlock.ErrNoReply)
	e.resetFaults()
	require.NoError(t, l.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second) // Release returns at a quorum; node 2 may come later

	// Two holders, one node each: no quorum holds the key.
	require.NoError(t, e.direct[0].Set(ctx, key, "AAAAAAAAAAAAAAAA.1", time.Minute).Err())
	require.NoError(t, e.direct[1].Set(ctx, key, "BBBBBBBBBBBBBBBB.1", time.Minute).Err())
	st, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	require.False(t, st.Held)
	assert.Equal(t, "AAAAAAAA", st.Nodes[0].Holder)
	assert.Equal(t, "BBBBBBBB", st.Nodes[1].Holder)
	assert.False(t, st.Nodes[2].Held)

	// A tombstone (docs/late-writes.md) is an absent key.
	require.NoError(t, e.direct[2].Set(ctx, key, "!0123456789abcdef:3", time.Minute).Err())
	st, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.False(t, st.Nodes[2].Held, "a tombstone read as a holder")
	assert.Empty(t, st.Nodes[2].Holder)

	_, err = c.Inspect(ctx, "")
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the input under test
	_, err = c.Inspect(nil, key)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
}

func TestLockTTL(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)

	left, err := l.TTL(ctx)
	require.NoError(t, err)
	assert.Greater(t, left, 5*time.Second)
	assert.LessOrEqual(t, left, 10*time.Second)

	require.NoError(t, l.Extend(ctx, 30*time.Second))
	left, err = l.TTL(ctx)
	require.NoError(t, err)
	assert.Greater(t, left, 25*time.Second)

	// Another holder's value on two nodes: ours is on a minority.
	e.awaitHolders(key, e.value(0, key))
	require.NoError(t, e.direct[0].Set(ctx, key, "other.1", time.Minute).Err())
	require.NoError(t, e.direct[1].Del(ctx, key).Err())
	_, err = l.TTL(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, redlock.ErrHeldByOther)
	require.ErrorIs(t, err, redlock.ErrKeyAbsent)
	require.NoError(t, e.direct[0].Del(ctx, key).Err())

	l, err = c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	_, err = l.TTL(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld, "after Release")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	l, err = c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	_, err = l.TTL(cancelled)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, l.Release(ctx))
}
