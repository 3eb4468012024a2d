package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// keysOf returns n keys of one test, in sorted order.
func keysOf(t *testing.T, n int) []string {
	base := newKey(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%02d", base, i)
	}
	return keys
}

// TestAcquireAllExclusion: while a Lock holds {a, b}, no other Lock holds a
// or b, single-key or multi-key, also with a minority node blackholed,
// delayed or dropping replies; once it is released both can be taken.
func TestAcquireAllExclusion(t *testing.T) {
	for _, fault := range []struct {
		name string
		set  func(e *env)
	}{
		{"none", func(*env) {}},
		{"blackhole", func(e *env) { e.proxies[2].SetBlackhole(true) }},
		{"delay", func(e *env) { e.proxies[2].SetDelay(100 * time.Millisecond) }},
		{"drop-replies", func(e *env) { e.proxies[2].SetDropReplies(true) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			e := newEnv(t, 3, fastClients)
			c := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
			ctx := t.Context()
			k := keysOf(t, 3) // a, b, c
			fault.set(e)
			ab, err := c.TryAcquireAll(ctx, []string{k[1], k[0], k[1]}, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, []string{k[0], k[1]}, ab.Keys(), "distinct and sorted")
			assert.Equal(t, k[0], ab.Key(), "the first key")

			_, err = c.TryAcquire(ctx, k[0], time.Minute)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			_, err = c.TryAcquire(ctx, k[1], time.Minute)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			_, err = c.TryAcquireAll(ctx, []string{k[1], k[2]}, time.Minute)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			require.NotErrorIs(t, err, redlock.ErrUnavailable)
			// The refused {b, c} left nothing under c.
			require.Eventually(t, func() bool { return e.value(0, k[2])+e.value(1, k[2]) == "" }, 10*time.Second, 5*time.Millisecond)

			require.NoError(t, ab.Extend(ctx, time.Minute))
			require.NoError(t, ab.Release(ctx))
			bc, err := c.TryAcquireAll(ctx, []string{k[2], k[1]}, time.Minute)
			require.NoError(t, err)
			a, err := c.TryAcquire(ctx, k[0], time.Minute)
			require.NoError(t, err)
			require.NoError(t, bc.Release(ctx))
			require.NoError(t, a.Release(ctx))
			e.resetFaults()
		})
	}
}

// TestAcquireAllAllOrNothing: a node that holds one of the keys for
// someone else takes none of them, so it never holds part of the set; with
// two such nodes the Lock is refused and, once the rollback ran, no node
// holds any of its keys.
func TestAcquireAllAllOrNothing(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	k := keysOf(t, 2)
	require.NoError(t, e.direct[0].Set(ctx, k[1], "someone-else", time.Minute).Err())

	l, err := c.TryAcquireAll(ctx, k, time.Minute)
	require.NoError(t, err, "a quorum (nodes 1 and 2) took both")
	assert.Empty(t, e.value(0, k[0]), "node 0 took a although it holds b for another")
	require.NoError(t, l.Release(ctx))
	e.eventuallyNoKey(k[0], 10*time.Second)

	require.NoError(t, e.direct[1].Set(ctx, k[1], "someone-else", time.Minute).Err())
	_, err = c.TryAcquireAll(ctx, k, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	// The refusals of nodes 0 and 1 decide before node 2 may have
	// answered, and its rollback runs in the background: settle waits for
	// it, and fails if node 2 did not confirm it. Waiting for a to go
	// could end before node 2's write landed.
	e.settle(c)
	for i := range e.direct {
		assert.Empty(t, e.value(i, k[0]), "node %d", i)
		if i < 2 {
			assert.Equal(t, "someone-else", e.bed.Get(i, k[1]), "node %d: the other holder's b is untouched", i)
		} else {
			assert.Empty(t, e.value(i, k[1]), "node %d", i)
		}
	}
}

// TestAcquireAllReversedOrders: callers that name the same keys in opposite
// orders, in loops, each finish every call within its deadline, and never
// hold at once.
func TestAcquireAllReversedOrders(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c1, c2 := e.client(), e.client()
	k := keysOf(t, 2)
	var inside atomic.Int32
	var wg sync.WaitGroup
	const rounds = 15
	for _, run := range []struct {
		c    *redlock.Client
		keys []string
	}{{c1, []string{k[0], k[1]}}, {c2, []string{k[1], k[0]}}} {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				err := run.c.DoAll(ctx, run.keys, 10*time.Second, func(context.Context, *redlock.Lock) error {
					if inside.Add(1) != 1 {
						return errors.New("two holders")
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					return nil
				})
				cancel()
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
}

// TestAcquireAllFencing: the fence of a Lock of several keys is above the
// fences of the earlier holders of each key, and the later holders of any
// of its keys get a higher one.
func TestAcquireAllFencing(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing())
	ctx := t.Context()
	k := keysOf(t, 2)
	var highB uint64
	for range 3 { // b's fences run ahead of a's
		l, err := c.TryAcquire(ctx, k[1], time.Minute)
		require.NoError(t, err)
		highB = l.Fence()
		require.NoError(t, l.Release(ctx))
	}
	a, err := c.TryAcquire(ctx, k[0], time.Minute)
	require.NoError(t, err)
	highA := a.Fence()
	require.NoError(t, a.Release(ctx))
	// A Release returns at a quorum: a delete still on its way to one node
	// for each key (a different node for each) would refuse the next
	// acquire on two nodes (seen 2 in 200 runs).
	quiet(t, c)

	ab, err := c.TryAcquireAll(ctx, k, time.Minute)
	require.NoError(t, err)
	f := ab.Fence()
	assert.Greater(t, f, highA)
	assert.Greater(t, f, highB)
	require.NoError(t, ab.Extend(ctx, time.Minute))
	assert.Equal(t, f, ab.Fence())
	require.NoError(t, ab.Release(ctx))
	quiet(t, c)
	for _, key := range k {
		l, err := c.TryAcquire(ctx, key, time.Minute)
		require.NoError(t, err)
		assert.Greater(t, l.Fence(), f, "a later holder of %s", key)
		require.NoError(t, l.Release(ctx))
	}
}

// TestAcquireAllRenewal: an Extend that finds one key gone from a node puts
// it back there once a quorum confirmed all of them; one that finds a key
// gone from a quorum (another holder may have taken it) loses the Lock.
func TestAcquireAllRenewal(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	k := keysOf(t, 3)
	l, err := c.TryAcquireAll(ctx, k, time.Minute)
	require.NoError(t, err)
	for _, key := range k {
		e.awaitHolders(key, l.Token())
	}
	require.NoError(t, e.direct[0].Del(ctx, k[1]).Err())
	// Extend returns at a quorum: node 0's answer may come after it, and
	// then the next Extend, which reads it, restores there.
	require.Eventually(t, func() bool {
		require.NoError(t, l.Extend(ctx, time.Minute))
		return e.value(0, k[1]) == l.Token()
	}, 10*time.Second, 50*time.Millisecond, "restored")

	require.NoError(t, e.direct[0].Del(ctx, k[2]).Err())
	require.NoError(t, e.direct[1].Set(ctx, k[2], "someone-else", time.Minute).Err())
	err = l.Extend(ctx, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.Equal(t, "someone-else", e.bed.Get(1, k[2]))
	_ = l.Release(ctx)
}

// TestAcquireAllInspect: Inspect of any of the keys shows the holder.
func TestAcquireAllInspect(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	k := keysOf(t, 2)
	l, err := c.TryAcquireAll(ctx, k, time.Minute)
	require.NoError(t, err)
	for _, key := range k {
		e.awaitHolders(key, l.Token())
		st, err := c.Inspect(ctx, key)
		require.NoError(t, err)
		assert.True(t, st.Held, key)
		assert.True(t, strings.HasPrefix(l.Token(), st.Nodes[0].Holder), key)
	}
	require.NoError(t, l.Release(ctx))
}

// TestAcquireAllBadInput: bad input is ErrInvalidArgument, before anything
// is sent, and leaves nothing locked.
func TestAcquireAllBadInput(t *testing.T) {
	e := newEnv(t, 1, fastClients)
	c := e.client()
	ctx := t.Context()
	k := keysOf(t, 2)
	many := make([]string, redlock.MaxKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf("%s:%d", k[0], i)
	}
	for name, call := range map[string]func() error{
		"no keys":    func() error { _, err := c.AcquireAll(ctx, nil, time.Minute); return err },
		"empty key":  func() error { _, err := c.TryAcquireAll(ctx, []string{k[0], ""}, time.Minute); return err },
		"too many":   func() error { _, err := c.TryAcquireAll(ctx, many, time.Minute); return err },
		"reserved":   func() error { _, err := c.TryAcquireAll(ctx, []string{k[0], "redlock:boot"}, time.Minute); return err },
		"owner":      func() error { _, err := c.TryAcquireAll(ctx, k, time.Minute, redlock.WithOwner("o")); return err },
		"bad ttl":    func() error { _, err := c.TryAcquireAll(ctx, k, -time.Second); return err },
		"nil fn":     func() error { return c.DoAll(ctx, k, time.Minute, nil) },
		"nil ctx":    tryAllNilCtx(c, k),
		"nil option": func() error { _, err := c.TryAcquireAll(ctx, k, time.Minute, nil); return err },
	} {
		err := call()
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, name)
	}
	assert.Zero(t, e.calls(0, "evalsha"), "nothing was sent")
	require.NoError(t, c.DoAll(ctx, many[:redlock.MaxKeys], time.Minute, func(context.Context, *redlock.Lock) error { return nil }), "MaxKeys keys")

	// One distinct key is Acquire's Lock, owners included.
	l, err := c.TryAcquireAll(ctx, []string{k[0], k[0]}, time.Minute, redlock.WithOwner("o"))
	require.NoError(t, err)
	assert.Equal(t, []string{k[0]}, l.Keys())
	require.NoError(t, l.Release(ctx))
}

// tryAllNilCtx is TryAcquireAll with a nil context, the bad input under test.
func tryAllNilCtx(c *redlock.Client, keys []string) func() error {
	return func() error {
		//lint:ignore SA1012 a nil context is the input under test
		_, err := c.TryAcquireAll(nil, keys, time.Minute)
		return err
	}
}

// TestAcquireAllCrossSlot: on a Redis Cluster node, keys of different hash
// slots are refused before anything is sent, not counted as contention;
// keys with one hash tag are taken.
func TestAcquireAllCrossSlot(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true })
	t.Cleanup(func() { _ = cc.Close() })
	c, err := redlock.New([]redis.UniversalClient{cc})
	require.NoError(t, err)
	closeAtCleanup(t, c)
	ctx := t.Context()
	_, err = c.TryAcquireAll(ctx, []string{"a:" + t.Name(), "b:" + t.Name()}, time.Minute)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "hash tag")
	_, err = c.AcquireAll(ctx, []string{"a:" + t.Name(), "b:" + t.Name()}, time.Minute)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)

	for _, opts := range [][]redlock.Option{nil, {redlock.WithFencing()}} {
		c, err := redlock.New([]redis.UniversalClient{cc}, opts...)
		require.NoError(t, err)
		l, err := c.TryAcquireAll(ctx, []string{"{acct}:1", "{acct}:2"}, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Extend(ctx, time.Minute))
		require.NoError(t, l.Release(ctx))
		require.NoError(t, c.Close(ctx))
	}
}

// TestAcquireAllWokenOnRelease: a waiting AcquireAll is woken when one of
// its keys is released, by a Lock of another Client (the release hint) or
// of its own (at once), long before its backoff or the holder's TTL.
func TestAcquireAllWokenOnRelease(t *testing.T) {
	for _, same := range []bool{false, true} {
		t.Run(fmt.Sprintf("same-client=%v", same), func(t *testing.T) {
			e := newEnv(t, 3, fastClients)
			waiterC := e.client(redlock.WithRetry(redlock.ExponentialBackoff(30*time.Second, 30*time.Second)))
			holderC := waiterC
			if !same {
				holderC = e.client()
			}
			ctx := t.Context()
			k := keysOf(t, 2)
			held, err := holderC.TryAcquire(ctx, k[1], time.Minute)
			require.NoError(t, err)

			got := make(chan time.Time, 1)
			go func() {
				actx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				l, err := waiterC.AcquireAll(actx, k, time.Minute)
				if assert.NoError(t, err) {
					got <- time.Now()
					assert.NoError(t, l.Release(context.Background()))
				}
				close(got)
			}()
			// The waiter watches b's release channel on every node.
			require.Eventually(t, func() bool {
				for _, d := range e.direct {
					n, err := d.PubSubNumSub(ctx, "redlock:released:"+k[1]).Result()
					if err != nil || n["redlock:released:"+k[1]] == 0 {
						return false
					}
				}
				return true
			}, 10*time.Second, 5*time.Millisecond, "the waiter did not subscribe")
			released := time.Now()
			require.NoError(t, held.Release(ctx))
			at, ok := <-got
			require.True(t, ok, "AcquireAll failed")
			assert.Less(t, at.Sub(released), 3*time.Second, "not woken by the release")
		})
	}
}

// TestAcquireAllRestartGuard: with WithRestartGuard, nodes new to the
// guard refuse an AcquireAll, fenced or not, with ErrRestartGuard (the
// guarded scripts' reply has the acquire's shape), and nothing is left;
// once the guard has passed the keys are taken.
func TestAcquireAllRestartGuard(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			t.Parallel() // most of it is waiting for the guard
			e := newEnv(t, 3, fastClients)
			opts := []redlock.Option{redlock.WithRestartGuard(testGuard)}
			if fenced {
				opts = append(opts, redlock.WithFencing())
			}
			c := e.client(opts...)
			ctx := t.Context()
			k := keysOf(t, 3)
			start := time.Now()
			_, err := c.TryAcquireAll(ctx, k, testGuard)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			assert.GreaterOrEqual(t, guardRefusals(t, err), 2, "%v", err)
			for _, key := range k {
				e.requireNoKey(key)
			}
			time.Sleep(time.Until(start.Add(testGuard + 50*time.Millisecond)))
			require.Eventually(t, func() bool {
				l, err := c.TryAcquireAll(ctx, k, testGuard)
				if err != nil {
					return false
				}
				if fenced {
					assert.Positive(t, l.Fence())
				}
				assert.NoError(t, l.Release(ctx))
				return true
			}, 10*time.Second, 20*time.Millisecond, "the guard did not end")
		})
	}
}

// TestAcquireAllLateWrite: a failed AcquireAll whose write reaches a slow
// node after the attempt gave up on it leaves nothing there: the rollback
// follows the write on the node's lane, and where it finds the keys absent
// it leaves tombstones that refuse the late write.
func TestAcquireAllLateWrite(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(100 * time.Millisecond))
	ctx := t.Context()
	k := keysOf(t, 2)
	for i := range 2 { // b is another's on nodes 0 and 1: the attempt fails
		require.NoError(t, e.direct[i].Set(ctx, k[1], "someone-else", time.Minute).Err())
	}
	sets := e.calls(2, "evalsha")
	e.proxies[2].SetDelay(400 * time.Millisecond)
	_, err := c.TryAcquireAll(ctx, k, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	// The late write, then the rollback, land on node 2.
	require.Eventually(t, func() bool { return e.calls(2, "evalsha") >= sets+2 }, 10*time.Second, 5*time.Millisecond)
	e.resetFaults()
	e.settle(c)
	for _, key := range k {
		assert.Empty(t, e.value(2, key), "node 2 kept %s", key)
	}
	assert.Empty(t, e.value(0, k[0]))
	assert.Empty(t, e.value(1, k[0]))
}

// TestAcquireAllStaleAndSkewed: an AcquireAll whose clock says the
// validity was used up is refused and rolled back on every key; a released
// Lock's handle extends nothing and puts no key back; an Extend racing the
// Release leaves no key behind either way.
func TestAcquireAllStaleAndSkewed(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clock := &fakeClock{}
	skewed := e.client(redlock.WithClock(clock))
	c := e.client()
	ctx := t.Context()
	ttl := 10 * time.Second
	drift := time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst

	k := keysOf(t, 3)
	clock.set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ttl-drift) // each read jumps past the budget
	_, err := skewed.TryAcquireAll(ctx, k, ttl)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	for _, key := range k {
		e.eventuallyNoKey(key, 10*time.Second)
	}

	l, err := c.TryAcquireAll(ctx, k, ttl)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, l.Extend(ctx, ttl), redlock.ErrNotHeld)
	for _, key := range k {
		e.eventuallyNoKey(key, 10*time.Second)
	}

	for range 10 {
		l, err := c.TryAcquireAll(ctx, k, ttl)
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() { _ = l.Extend(ctx, ttl) })
		wg.Go(func() { assert.NoError(t, l.Release(ctx)) })
		wg.Wait()
		for _, key := range k {
			e.eventuallyNoKey(key, 10*time.Second)
		}
	}
}
