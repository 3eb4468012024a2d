package redlock_test

import (
	"context"
	"slices"
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

// TestInspectShowsMetadata: what WithMetadata stores goes with the Lock's
// value to every node it writes, whatever its text, and Inspect shows it per
// node for each primitive: an exclusive Lock, an owner's (and the owner's
// takeover from another Client), shared Locks, permits, several keys, and a
// value that Extend put back on a node that had lost it.
func TestInspectShowsMetadata(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, other := e.client(), e.client()
	ctx := t.Context()
	md := "web-3 pid 42 ~|,:!. été"
	// shows waits until a quorum of nodes shows md for key (exclusive, or
	// among the shares or permits), and fails if a node shows metadata
	// outside md and also: a node a write missed (Acquire returns at a
	// quorum, and on a loaded machine the rest may miss their deadline)
	// keeps what it had, never anything else.
	shows := func(key, md string, also ...string) {
		t.Helper()
		require.Eventually(t, func() bool {
			st, err := c.Inspect(ctx, key)
			if !assert.NoError(t, err) {
				return false
			}
			on := 0
			for i, n := range st.Nodes {
				mds := []string{}
				if n.Held && len(n.Shared) == 0 && len(n.Permits) == 0 {
					mds = append(mds, n.Metadata)
				}
				for _, h := range n.Shared {
					mds = append(mds, h.Metadata)
				}
				for _, h := range n.Permits {
					mds = append(mds, h.Metadata)
				}
				for _, m := range mds {
					assert.Contains(t, append([]string{md}, also...), m, "node %d of %q", i, key)
				}
				if slices.Contains(mds, md) {
					on++
				}
			}
			return on >= c.Quorum()
		}, 10*time.Second, 5*time.Millisecond, "%q: metadata %q not on a quorum", key, md)
	}

	key := newKey(t)
	l, err := c.Acquire(ctx, key, 10*time.Second, redlock.WithMetadata(md))
	require.NoError(t, err)
	require.Equal(t, md, l.Metadata())
	shows(key, md)
	st, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(l.Token(), st.Nodes[0].Holder), "the holder shown is the token's start, not the metadata")
	// Extend puts the value back, metadata and all, on a node that lost it
	// (an Extend returns at a quorum: extend again until node 0 took it).
	require.NoError(t, e.direct[0].Del(ctx, key).Err())
	require.Eventually(t, func() bool {
		if !assert.NoError(t, l.Extend(ctx, 10*time.Second)) {
			return false
		}
		st, err := c.Inspect(ctx, key)
		if !assert.NoError(t, err) {
			return false
		}
		n := st.Nodes[0]
		assert.False(t, n.Held && n.Metadata != md, "node 0 holds the value Extend put back with metadata %q", n.Metadata)
		return n.Held
	}, 10*time.Second, 50*time.Millisecond, "Extend did not put the value back on node 0")
	require.NoError(t, l.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)

	// An owner's Lock, and another Client's takeover for the same owner.
	key = newKey(t)
	a, err := c.Acquire(ctx, key, 10*time.Second, redlock.WithOwner("req-1"), redlock.WithMetadata("first"))
	require.NoError(t, err)
	shows(key, "first")
	b, err := other.TryAcquire(ctx, key, 10*time.Second, redlock.WithOwner("req-1"), redlock.WithMetadata("retry"))
	require.NoError(t, err)
	shows(key, "retry", "first") // a node the takeover missed keeps the first
	require.NoError(t, b.Release(ctx))
	_ = a.Release(ctx)

	// Shared Locks, each its own.
	key = newKey(t)
	r1, err := c.Acquire(ctx, key, 10*time.Second, redlock.Shared(), redlock.WithMetadata("reader 1"))
	require.NoError(t, err)
	r2, err := other.Acquire(ctx, key, 10*time.Second, redlock.Shared())
	require.NoError(t, err)
	shows(key, "reader 1", "")
	shows(key, "", "reader 1")
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, r2.Release(ctx))

	// Permits.
	key = newKey(t)
	p, err := c.Acquire(ctx, key, 10*time.Second, redlock.Permits(2), redlock.WithMetadata("worker 9"))
	require.NoError(t, err)
	shows(key, "worker 9")
	require.NoError(t, p.Release(ctx))

	// Several keys.
	keys := []string{newKey(t), newKey(t)}
	all, err := c.AcquireAll(ctx, keys, 10*time.Second, redlock.WithMetadata("batch 3"))
	require.NoError(t, err)
	for _, k := range keys {
		shows(k, "batch 3")
	}
	require.NoError(t, all.Release(ctx))
}

// TestMetadataRefused: metadata over MaxMetadataLen, not UTF-8 or with a
// control character fails every acquiring call with ErrInvalidArgument, and
// nothing is written.
func TestMetadataRefused(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	for _, md := range []string{strings.Repeat("x", redlock.MaxMetadataLen+1), "bad \xff byte", "two\nlines"} {
		key := newKey(t)
		sent := e.calls(0, "evalsha")
		opt := redlock.WithMetadata(md)
		_, err := c.Acquire(ctx, key, time.Second, opt)
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "Acquire, %q", md)
		_, err = c.TryAcquire(ctx, key, time.Second, opt)
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "TryAcquire, %q", md)
		_, err = c.AcquireAll(ctx, []string{key}, time.Second, opt)
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "AcquireAll, %q", md)
		err = c.Do(ctx, key, time.Second, func(context.Context, *redlock.Lock) error { return nil }, opt)
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "Do, %q", md)
		e.requireNoKey(key)
		assert.Equal(t, sent, e.calls(0, "evalsha"), "a refused call went to the nodes")
	}
	l, err := c.Acquire(ctx, newKey(t), time.Second, redlock.WithMetadata(strings.Repeat("é", redlock.MaxMetadataLen/2)))
	require.NoError(t, err, "MaxMetadataLen bytes")
	require.NoError(t, l.Release(ctx))
}
