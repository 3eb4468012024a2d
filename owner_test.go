package redlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/nodetest"
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

// lockPrefix is the Lock's own part of a lock's value: up to the dot before
// its generation, without what an owner's takeover replaced ("|" on).
func lockPrefix(v string) string {
	v, _, _ = strings.Cut(v, "|")
	return v[:strings.LastIndexByte(v, '.')+1]
}

// awaitOneLock waits until every server holds key for one and the same Lock
// and returns the values (heads): awaitHolders compares tokens, which every
// Lock of an owner shares, so a node may still hold an earlier Lock's value
// then.
func (e *env) awaitOneLock(key string) []string {
	e.t.Helper()
	var vals []string
	require.Eventually(e.t, func() bool {
		vals = e.rawValues(key)
		for _, v := range vals {
			if v == "" || strings.HasPrefix(v, "!") || lockPrefix(v) != lockPrefix(vals[0]) {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "not every node took the key for one Lock")
	return heads(vals)
}

// heads cuts from each value the chain an owner's takeover kept after "|",
// which the Lock drops in the background once it holds (or at its next
// extension, where a node answered late): what the Lock itself wrote.
func heads(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		v, _, _ = strings.Cut(v, ",") // the tombstone entries it carries
		out[i], _, _ = strings.Cut(v, "|")
	}
	return out
}

// TestStaleOwnerReleaseSparesNewerLock: a Lock of an owner that ran past its
// validity, released after the owner's retry took a new Lock, deletes
// nothing: the new Lock keeps the key on every node.
func TestStaleOwnerReleaseSparesNewerLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, other := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-1")

	l1, err := c.Acquire(ctx, key, 300*time.Millisecond, owner)
	require.NoError(t, err)
	time.Sleep(time.Until(l1.Until()) + 10*time.Millisecond)
	l2, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	require.NotSame(t, l1, l2, "a Lock past its validity was re-entered")
	held := e.awaitOneLock(key)

	require.ErrorIs(t, l1.Release(ctx), redlock.ErrNotHeld, "the stale Lock's Release reported success")
	assert.Equal(t, held, heads(e.rawValues(key)), "the stale Lock's Release deleted the new Lock's key")
	_, err = other.TryAcquire(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client got in while the new Lock held the key")
	require.NoError(t, l2.Extend(ctx, 10*time.Second))
	require.NoError(t, l2.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestOwnerBackgroundDeleteSparesNewerLock: the deletes that a Release
// could not get confirmed go on in the background; when the owner acquires
// again meanwhile, taking the old value over, they leave the new Lock's key
// alone.
func TestOwnerBackgroundDeleteSparesNewerLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, other := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-2")

	l1, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	e.awaitHolders(key, l1.Token())
	e.proxies[1].SetBlackhole(true)
	e.proxies[2].SetBlackhole(true)
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	require.ErrorIs(t, l1.Release(rctx), redlock.ErrReleaseUnconfirmed)
	cancel()
	e.resetFaults()

	l2, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	require.NotSame(t, l1, l2)
	held := e.awaitOneLock(key)
	quiet(t, c) // l1's deletes have had their tries
	assert.Equal(t, held, heads(e.rawValues(key)), "the released Lock's background delete removed the new Lock's key")
	_, err = other.TryAcquire(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client got in while the new Lock held the key")
	require.NoError(t, l2.Release(ctx))
}

// TestOwnerReentryRefusesLostLock: a Lock that KeepAlive reported lost is
// never re-entered, though its Until has not passed yet.
func TestOwnerReentryRefusesLostLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithRenewInterval(100 * time.Millisecond))
	elsewhere, third := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("order-7")

	l, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	// The same owner in another process takes the key over and frees it.
	l2, err := elsewhere.TryAcquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))
	select {
	case <-kctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("KeepAlive did not report the loss")
	}
	require.ErrorIs(t, context.Cause(kctx), redlock.ErrLockLost)
	l3, err := third.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.True(t, time.Now().Before(l.Until()), "the test needs the lost Lock within its Until")

	got, err := c.TryAcquire(ctx, key, 10*time.Second, owner)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "the owner re-entered a lost Lock while another client holds the key")
	require.Nil(t, got)
	require.NoError(t, l3.Release(ctx))
	_ = l.Release(ctx)
}

// TestOwnerConcurrentAcquires: two goroutines of one request acquire the
// key at once through one Client: they get one Lock with two holds, and the
// key is freed with the second Release only.
func TestOwnerConcurrentAcquires(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	for i := range 30 {
		key := newKey(t)
		owner := redlock.WithOwner("request-" + strconv.Itoa(i))
		var locks [2]*redlock.Lock
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range locks {
			wg.Go(func() {
				<-start
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				locks[g], errs[g] = c.Acquire(actx, key, 5*time.Second, owner)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0], "try %d", i)
		require.NoError(t, errs[1], "try %d", i)
		require.Same(t, locks[0], locks[1], "try %d: two Locks for one owner", i)
		require.NoError(t, locks[0].Release(ctx))
		require.GreaterOrEqual(t, e.holders(key, locks[0].Token()), c.Quorum(), "try %d: the first of two holds freed the key", i)
		require.NoError(t, locks[1].Release(ctx))
		e.eventuallyNoKey(key, 5*time.Second)
	}
}

// TestOwnerRetryIgnoresClocks: the owner's value left by a process whose
// writes carry a later generation (its clock ran ahead, say) is taken over
// at once by the owner's retry from another process; the earlier Lock is
// superseded.
func TestOwnerRetryIgnoresClocks(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	first, retry := e.client(), e.client()
	ctx := t.Context()
	for i := range 5 {
		key := newKey(t)
		owner := redlock.WithOwner("order-" + strconv.Itoa(i))
		a, err := first.TryAcquire(ctx, key, time.Hour, owner)
		require.NoError(t, err)
		e.awaitHolders(key, a.Token())
		// What a process whose clock runs 2s ahead would have written.
		for _, d := range e.direct {
			v := nodetest.Get(t, ctx, d, key)
			dot := strings.LastIndexByte(v, '.')
			gen, err := strconv.ParseUint(v[dot+1:], 10, 64)
			require.NoError(t, err, v)
			require.NoError(t, d.SetArgs(ctx, key, v[:dot+1]+strconv.FormatUint(gen+2_000_000, 10), redis.SetArgs{KeepTTL: true}).Err())
		}
		start := time.Now()
		b, err := retry.TryAcquire(ctx, key, time.Hour, owner)
		require.NoError(t, err, "try %d: the owner's retry was locked out", i)
		assert.Less(t, time.Since(start), 5*time.Second)
		require.ErrorIs(t, a.Extend(ctx, time.Hour), redlock.ErrNotHeld, "try %d: the superseded Lock still extends", i)
		require.NoError(t, b.Release(ctx))
		e.eventuallyNoKey(key, 5*time.Second)
	}
}

// TestOwnerReentryUnprovenDoesNotTakeOver: when the re-entry's extension
// cannot reach a quorum for a passing reason (nodes silent, not refusing),
// the Lock the owner holds is still valid: the Acquire fails without a new
// Lock of the owner taking the key over and, failing, deleting it from the
// nodes it reached. (The nemesis found this: the other client then got a
// quorum of freed nodes while the owner's Lock was valid.)
func TestOwnerReentryUnprovenDoesNotTakeOver(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(100 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-2")

	l, err := c.Acquire(ctx, key, 10*time.Second, owner)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	held := e.rawValues(key)
	e.proxies[1].SetBlackhole(true)
	e.proxies[2].SetBlackhole(true)
	got, err := c.TryAcquire(ctx, key, time.Second, owner)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Nil(t, got)
	quiet(t, c)
	// The re-entry's extension may have refreshed the value (a later
	// generation of the same Lock); the Lock's prefix must be there.
	prefix := held[0][:strings.LastIndexByte(held[0], '.')+1]
	assert.True(t, strings.HasPrefix(nodetest.Get(t, ctx, e.direct[0], key), prefix), "node 0's value was replaced or deleted")
	e.resetFaults()
	require.NoError(t, l.Extend(ctx, 10*time.Second), "the Lock is still held")
	require.NoError(t, l.Release(ctx))
}

// TestFailedOwnerTakeoverRestoresHolder: a Lock of an owner in one Client is
// valid on a bare quorum when another Client's Acquire for the same owner
// takes the key over on one node and misses its quorum. Its rollback must
// give that node back to the valid Lock, with at least the Lock's expiry,
// not delete it: a third client would otherwise get a quorum of freed nodes
// while the Lock is valid. (The nemesis found this, seed 983890.)
func TestFailedOwnerTakeoverRestoresHolder(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c1, c2, other := e.client(), e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("order-7")

	// The Lock holds on nodes 0 and 1: node 2 was down when it was taken.
	e.proxies[2].SetRefuse(true)
	a, err := c1.Acquire(ctx, key, 20*time.Second, owner)
	require.NoError(t, err)
	quiet(t, c1)
	e.resetFaults()
	held := e.rawValues(key)
	require.NotEmpty(t, held[0])
	require.NotEmpty(t, held[1])

	// The other Client's takeover reaches node 0 only, and fails.
	e.proxies[1].SetRefuse(true)
	e.proxies[2].SetRefuse(true)
	b, err := c2.TryAcquire(ctx, key, time.Second, owner)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Nil(t, b)
	quiet(t, c2)
	e.resetFaults()
	// The rollback may still be on its way to node 0.
	// What node 0 gives back may carry the failed takeover's tombstone
	// entry (lib.lua): heads compares the values.
	require.Eventually(t, func() bool {
		v := heads([]string{nodetest.Get(t, context.Background(), e.direct[0], key)})[0]
		return v == "" || v == held[0]
	}, 10*time.Second, 5*time.Millisecond, "the failed takeover's value stayed on node 0")

	assert.Equal(t, held[0], heads([]string{nodetest.Get(t, ctx, e.direct[0], key)})[0], "the failed takeover did not give node 0 back")
	pttl, err := e.direct[0].PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, 10*time.Second, "node 0 gave the Lock back with a shorter expiry than its own")
	_, err = other.TryAcquire(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client got in while the owner's Lock was valid")
	require.NoError(t, a.Extend(ctx, 10*time.Second), "the Lock is still held")
	require.NoError(t, a.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
}

// directClient is a lock client over the nodes' direct connections, which
// the proxies' faults do not touch.
func (e *env) directClient(opts ...redlock.Option) *redlock.Client {
	e.t.Helper()
	nodes := make([]redis.UniversalClient, len(e.direct))
	for i, d := range e.direct {
		nodes[i] = d
	}
	c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithNodeTimeout(testNodeTimeout)}, opts...)...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.settle(c) })
	require.NoError(e.t, c.Warm(e.t.Context()))
	return c
}

// TestFailedTakeoverSparesReleasedLock: B holds owner req-7's key for 2 s;
// A, the same owner in another process, retries with a 20 s TTL: its
// writes are held in the network while its call gives up (its context
// ends), then land on every node within their deadline, taking B's value
// over, and its rollback is held. B releases meanwhile, and must be
// confirmed; once A's rollback lands, B's value must not come back: the
// key is free by the end of B's TTL.
func TestFailedTakeoverSparesReleasedLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	cb := e.directClient()
	ca := e.client(redlock.WithNodeTimeout(5*time.Second), redlock.WithCleanupTimeout(10*time.Second))
	other := e.directClient()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-7")

	b, err := cb.Acquire(ctx, key, 2*time.Second, owner)
	require.NoError(t, err)
	bUntil := time.Now().Add(2 * time.Second)

	var writes []<-chan struct{}
	for _, p := range e.proxies {
		writes = append(writes, p.HoldNext([]byte(key)))
	}
	actx, cancel := context.WithCancel(ctx)
	failed := make(chan error, 1)
	go func() {
		_, err := ca.TryAcquire(actx, key, 20*time.Second, owner)
		failed <- err
	}()
	for i, ch := range writes {
		waitClosed(t, ch, "A's write reaching proxy "+string(rune('0'+i)))
	}
	cancel()
	require.ErrorIs(t, <-failed, redlock.ErrNotAcquired)
	releaseSHA := scriptSHA(t, "release_one.lua")
	var caught []<-chan struct{}
	for _, p := range e.proxies {
		caught = append(caught, p.HoldNext(releaseSHA))
		require.True(t, p.ReleaseFirst(), "A's write lands")
	}
	require.Eventually(t, func() bool {
		for _, v := range e.rawValues(key) {
			if !strings.Contains(v, "|") {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "A's writes did not take B's value over on every node")
	for i, ch := range caught {
		waitClosed(t, ch, "A's rollback reaching proxy "+string(rune('0'+i)))
	}

	require.NoError(t, b.Release(ctx), "B's Release while A's takeover is pending")
	for _, p := range e.proxies {
		p.ReleaseHeld()
	}
	quiet(t, ca)
	for i := range e.direct {
		assert.Empty(t, e.value(i, key), "node %d after A's rollback", i)
	}
	require.Eventually(t, func() bool {
		l, err := other.TryAcquire(ctx, key, time.Second)
		if err != nil {
			return false
		}
		require.NoError(t, l.Release(ctx))
		return true
	}, time.Until(bUntil)+3*time.Second, 20*time.Millisecond, "another owner is still refused after B's TTL")
}

// TestOwnerTakeoversDoNotGrow: two Clients take one owner's key over from
// each other again and again; a takeover that succeeded keeps nothing of
// what it replaced, so the value does not grow.
func TestOwnerTakeoversDoNotGrow(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clients := []*redlock.Client{e.client(), e.client()}
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("order-9")
	var first int
	for i := range 60 {
		c := clients[i%2]
		_, err := c.Acquire(ctx, key, 20*time.Second, owner)
		require.NoError(t, err, "takeover %d", i)
		var vals []string
		require.Eventually(t, func() bool {
			vals = e.rawValues(key)
			return !slices.ContainsFunc(vals, func(v string) bool { return strings.Contains(v, "|") })
		}, 10*time.Second, time.Millisecond, "takeover %d kept a chain", i)
		for n, v := range vals {
			if first == 0 {
				first = len(v)
			}
			require.LessOrEqual(t, len(v), first+2, "takeover %d: node %d's value grew", i, n)
		}
	}
}
