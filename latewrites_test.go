package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// Each test here is a way for a key to outlive the Lock that justified it,
// reproduced on real nodes through the fault proxy, and fails without its
// fix (docs/late-writes.md).

// scriptSHA is the hash the library sends for scripts/ file f.
func scriptSHA(t *testing.T, f string) []byte {
	t.Helper()
	sum := sha1.Sum([]byte(scriptSource(t, f)))
	return []byte(hex.EncodeToString(sum[:]))
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

// TestLateRestoreAfterRelease: an Extend puts the key back on a node that
// lost it; that restore is held in the network past its deadline, and the
// Lock is released and its Client closed meanwhile. When the restore lands
// at last, the tombstone Release left refuses it: nothing puts a released
// Lock's key back.
func TestLateRestoreAfterRelease(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 20*time.Second)
	require.NoError(t, err)
	quiet(t, c)
	require.NoError(t, e.direct[2].Del(ctx, key).Err()) // node 2 lost the key

	// Node 0 answers last, so the Extend hears node 2 say the key is
	// absent and restores it there.
	e.proxies[0].SetDelay(50 * time.Millisecond)
	caught := e.proxies[2].HoldNext(scriptSHA(t, "scripts/restore.lua"))
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	waitClosed(t, caught, "the restore reaching node 2's proxy")
	e.proxies[0].SetDelay(0)
	require.NoError(t, l.Release(ctx))
	require.NoError(t, c.Close(ctx))

	before := e.calls(2, "evalsha")
	e.proxies[2].ReleaseHeld()
	require.Eventually(t, func() bool { return e.calls(2, "evalsha") > before },
		10*time.Second, time.Millisecond, "the held restore did not run")
	assert.Empty(t, e.value(2, key), "the late restore put the released Lock back on node 2")
	e.eventuallyNoKey(key, 3*time.Second)
}

// TestTombstoneCoversEveryAttempt: one Acquire retries while every write of
// it to node 2 is held in the network past its deadline (another client
// holds nodes 0 and 1). Each attempt's rollback finds node 2 empty; the
// tombstone there must cover the latest attempt, not the first, so that
// none of the held writes keeps the key once they land.
func TestTombstoneCoversEveryAttempt(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(50 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	for i := range 2 {
		require.NoError(t, e.direct[i].Set(ctx, key, "someone-else.1", 30*time.Second).Err())
	}

	acquireSHA := scriptSHA(t, "scripts/acquire.lua")
	stop := make(chan struct{})
	holding := make(chan struct{})
	go func() {
		defer close(holding)
		for {
			caught := e.proxies[2].HoldNext(acquireSHA)
			select {
			case <-caught:
			case <-stop:
				return
			}
		}
	}()
	actx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err := c.Acquire(actx, key, 20*time.Second)
	cancel()
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, c.Close(ctx))
	close(stop)
	<-holding
	held := e.proxies[2].HeldCount()
	require.GreaterOrEqual(t, held, 2, "fewer than two attempts were held: nothing was tried")

	before := e.calls(2, "evalsha")
	e.proxies[2].ReleaseHeld()
	require.Eventually(t, func() bool { return e.calls(2, "evalsha") >= before+held },
		10*time.Second, time.Millisecond, "the held writes did not all run")
	assert.Empty(t, e.value(2, key), "a held attempt's write kept the key on node 2 (%d held)", held)
	require.Eventually(t, func() bool { return rawKey(t, ctx, e.direct[2], key) == "" },
		3*time.Second, 5*time.Millisecond, "node 2 kept something under the key")
}

// TestFailedTakeoverSparesReleasedLock: B holds owner req-7's key for 2 s;
// A, the same owner in another process, retries with a 20 s TTL through a
// slow network: its writes land on every node after its attempt failed,
// taking B's value over, and its rollback is held. B releases meanwhile,
// and must be confirmed; once A's rollback lands, B's value must not come
// back: the key is free by the end of B's TTL.
func TestFailedTakeoverSparesReleasedLock(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	cb := e.directClient()
	ca := e.client(redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithCleanupTimeout(10*time.Second))
	other := e.directClient()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("req-7")

	b, err := cb.Acquire(ctx, key, 2*time.Second, owner)
	require.NoError(t, err)
	bUntil := time.Now().Add(2 * time.Second)

	releaseSHA := scriptSHA(t, "scripts/release.lua")
	var caught []<-chan struct{}
	for _, p := range e.proxies {
		caught = append(caught, p.HoldNext(releaseSHA))
		p.SetDelay(700 * time.Millisecond)
	}
	_, err = ca.TryAcquire(ctx, key, 20*time.Second, owner)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
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
		p.SetDelay(0)
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

// TestReservedKeys: no Client locks a name the library keeps its own values
// under, and a guarded acquire never writes over a value found under the
// marker's name.
func TestReservedKeys(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	plain, guarded := e.client(), e.client(redlock.WithRestartGuard(time.Second))
	ctx := t.Context()
	for _, c := range []*redlock.Client{plain, guarded} {
		for _, key := range []string{"redlock:boot", "{orders}:redlock:fence", "orders:redlock:fence:abcd"} {
			_, err := c.TryAcquire(ctx, key, time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalidArgument, key)
		}
	}
	// A value under the marker's name that is not a marker (an older
	// client's lock, say) is left alone, and the node does not vote
	// meanwhile.
	const foreign = "OLDTOKEN.7"
	require.NoError(t, e.direct[0].Set(ctx, "redlock:boot", foreign, 30*time.Second).Err())
	key := newKey(t)
	var l *redlock.Lock
	require.Eventually(t, func() bool {
		var err error
		l, err = guarded.TryAcquire(ctx, key, 10*time.Second)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "nodes 1 and 2 never passed their guard")
	defer func() { require.NoError(t, l.Release(ctx)) }()
	assert.Equal(t, foreign, rawKey(t, ctx, e.direct[0], "redlock:boot"), "the guard wrote over a value under its marker's name")
	assert.Empty(t, e.value(0, key), "a node whose marker's name holds another value voted")
}

// waitClosed waits for ch with a generous bound.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
