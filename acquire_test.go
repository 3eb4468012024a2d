package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/nodetest"
)

func TestAcquireRelease(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, key, l.Key())
	assert.Len(t, l.Token(), 26, "130-bit base32 token")
	e.awaitHolders(key, l.Token())
	assert.Zero(t, l.Fence(), "no fence without WithFencing")

	_, err = c.TryAcquire(ctx, key, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, 2, qe.Quorum)
	assert.Equal(t, 3, e.holders(key, l.Token()), "a refused attempt must not touch the holder's keys")

	require.NoError(t, l.Release(ctx))
	// Release returned at quorum; the last node's delete lands just after.
	e.eventuallyNoKey(key, 5*time.Second)
	require.NoError(t, l.Release(ctx), "a second release is a no-op")

	l2, err := c.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	assert.NotEqual(t, l.Token(), l2.Token())
	require.NoError(t, l2.Release(ctx))
}

// TestLostReply is the incident the library exists for: SET landed, its
// reply was lost. The holder must not be locked out on retry, and a failed
// acquire must leave no key behind.
func TestLostReply(t *testing.T) {
	t.Run("failed acquire leaves no key", func(t *testing.T) {
		for _, opts := range clientConfigs {
			t.Run(opts.name, func(t *testing.T) {
				e := newEnv(t, 1, opts.o)
				c := e.client()
				key := newKey(t)
				sets, drops := e.calls(0, "set"), e.calls(0, "del")
				e.proxies[0].SetDropReplies(true)
				start := time.Now()
				_, err := c.TryAcquire(t.Context(), key, 2*time.Hour)
				require.ErrorIs(t, err, redlock.ErrNotAcquired)
				require.ErrorIs(t, err, redlock.ErrNoReply)
				assert.Less(t, time.Since(start), time.Second, "the per-node deadline, not go-redis's read timeout, bounds the wait")
				e.proxies[0].Reset()
				// The write landed although its reply was lost, and the
				// rollback deletes it (a DEL), and where it came before
				// the write's deadline leaves the Lock's refusal too (a
				// second SET): settling waits for go-redis to give up on
				// calls whose replies were dropped (5 s with its defaults).
				require.Eventually(t, func() bool {
					return e.calls(0, "set") >= sets+1 && e.calls(0, "del") >= drops+1 && e.value(0, key) == ""
				}, 10*time.Second, 2*time.Millisecond, "the rollback did not delete the write that landed")
				e.settle(c)
				assert.Contains(t, []int{sets + 1, sets + 2}, e.calls(0, "set"), "the write and the rollback's refusal")
				assert.Equal(t, drops+1, e.calls(0, "del"), "the rollback's delete")
				e.requireNoKey(key)
			})
		}
	})
	t.Run("retry is not locked out", func(t *testing.T) {
		e := newEnv(t, 3, defaultClients)
		c := e.client(redlock.WithNodeTimeout(50 * time.Millisecond))
		key := newKey(t)
		for _, p := range e.proxies {
			p.SetDropReplies(true)
		}
		// Restore the replies once the first writes have landed.
		go func() {
			for e.direct[0].Exists(context.Background(), key).Val() == 0 {
				time.Sleep(time.Millisecond)
			}
			e.resetFaults()
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		l, err := c.Acquire(ctx, key, 2*time.Hour)
		require.NoError(t, err, "the holder locked itself out")
		e.awaitHolders(key, l.Token())
		require.NoError(t, l.Release(t.Context()))
	})
}

// TestRollbackAfterCancel cancels the caller while its writes are still on
// their way; they land, and must be deleted all the same.
func TestRollbackAfterCancel(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(time.Second))
	key := newKey(t)
	for _, p := range e.proxies {
		p.SetDelay(150 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, key, time.Hour)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return e.value(0, key) != "" }, 5*time.Second, time.Millisecond, "the delayed write should land")
	e.settle(c)
	e.requireNoKey(key)
}

// TestMutualExclusion runs contending clients on one key with a counter
// that is read, held and written back inside the critical section: a second
// holder at any moment shows up as a lost update. Each Acquire waits at
// most acquireBound: the key is busy for milliseconds at a time, and only
// writes left behind (a failed attempt whose rollback did not run) keep it
// busy for seconds.
func TestMutualExclusion(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	key := newKey(t)
	counter := key + ":counter"
	const workers, rounds = 6, 15
	const ttl, acquireBound = 5 * time.Second, 10 * time.Second
	var wg sync.WaitGroup
	for range workers {
		c := e.client()
		wg.Go(func() {
			ctx := t.Context()
			for range rounds {
				actx, cancel := context.WithTimeout(ctx, acquireBound)
				l, err := c.Acquire(actx, key, ttl)
				cancel()
				if !assert.NoError(t, err, "no lock within %v while the others hold it for a millisecond at a time: "+
					"a failed attempt left its writes on the nodes (did its rollback run?)", acquireBound) {
					return
				}
				v, _ := e.direct[0].Get(ctx, counter).Int()
				time.Sleep(time.Millisecond)
				assert.NoError(t, e.direct[0].Set(ctx, counter, v+1, 0).Err())
				assert.NoError(t, l.Release(ctx))
			}
		})
	}
	wg.Wait()
	v, err := e.direct[0].Get(t.Context(), counter).Int()
	require.NoError(t, err)
	assert.Equal(t, workers*rounds, v, "lost updates: two holders overlapped")
}

// TestCleanupPersists is the seed incident: three of five nodes stop
// answering for 300 ms around a failed TryAcquire with a 30 s TTL. Their
// writes landed; the rollback must keep trying until it has removed them,
// with either client configuration.
func TestCleanupPersists(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 5, cfg.o)
			c := e.client(redlock.WithNodeTimeout(50 * time.Millisecond))
			key := newKey(t)
			start := time.Now()
			for _, p := range e.proxies[:3] {
				p.SetDropReplies(true)
			}
			_, err := c.TryAcquire(t.Context(), key, 30*time.Second)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			time.Sleep(300*time.Millisecond - time.Since(start))
			require.NotEmpty(t, e.value(0, key), "the write should have landed")
			e.resetFaults()
			e.eventuallyNoKey(key, 1500*time.Millisecond)
			e.settle(c)
			for _, n := range c.Nodes() {
				assert.Zero(t, n.PendingCleanups, "node %d", n.Index)
			}
		})
	}

	// Release's deletes persist too.
	e := newEnv(t, 5, fastClients)
	c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithCleanupTimeout(100*time.Millisecond))
	key := newKey(t)
	l, err := c.TryAcquire(t.Context(), key, 30*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	for _, p := range e.proxies[3:] {
		p.SetBlackhole(true)
	}
	require.NoError(t, l.Release(t.Context()))
	require.Eventually(t, func() bool { return c.Nodes()[3].PendingCleanups == 1 }, 2*time.Second, time.Millisecond,
		"the unanswered delete should wait for another try")
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, 1, c.Nodes()[3].PendingCleanups, "at most one pending cleanup per lock and node")
	e.resetFaults()
	e.eventuallyNoKey(key, 1500*time.Millisecond)
}

// TestRollbackSparesLaterAttempt: the rollback of a failed attempt is held
// back on its connection until the next attempt has been counted, then
// lands. It must not delete the later attempt's key.
func TestRollbackSparesLaterAttempt(t *testing.T) {
	e := newEnv(t, 3, func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.MaxRetries = -1 })
	c := e.client(redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithCleanupTimeout(100*time.Millisecond),
		redlock.WithRetry(redlock.ExponentialBackoff(20*time.Millisecond, 40*time.Millisecond)))
	ctx := t.Context()
	key := newKey(t)
	caught := e.proxies[0].HoldNext(scriptSHA(t, "release_one.lua"))

	// Another holder on nodes 1 and 2, for a little while: the first attempt
	// fails, takes node 0 and is rolled back there; a later one succeeds.
	for i := 1; i < 3; i++ {
		require.NoError(t, e.direct[i].Set(ctx, key, "other", 300*time.Millisecond).Err())
	}
	l, err := c.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	select {
	case <-caught:
	default:
		t.Fatal("no rollback was held back: the test did not set up the race")
	}
	// Node 0, where the stale rollback waits, holds the later attempt's
	// value. (Node 2 may not: the other holder's key there can expire a
	// moment after node 1's, and the attempt that lands between them wins
	// on nodes 0 and 1.)
	require.Eventually(t, func() bool { return e.value(0, key) == l.Token() }, 5*time.Second, time.Millisecond,
		"node 0 did not take the later attempt's key")
	before := e.calls(0, "evalsha")
	e.proxies[0].ReleaseHeld()
	require.Eventually(t, func() bool { return e.calls(0, "evalsha") > before }, 2*time.Second, time.Millisecond,
		"the held delete should land")
	assert.Equal(t, l.Token(), e.value(0, key), "a stale rollback deleted the later attempt's key")
	require.NoError(t, l.Release(ctx))
}

// TestLateWriteAfterRollback: another holder has nodes 0 and 1; our write
// to node 2 is held back in the network while our rollback reaches the node
// first and finds nothing, then the write lands. It must not leave our key
// there for its TTL, whatever the client's options.
func TestLateWriteAfterRollback(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 3, cfg.o)
			c := e.client()
			ctx := t.Context()
			key := newKey(t)
			for i := range 2 {
				require.NoError(t, e.direct[i].Set(ctx, key, "someone-else.1", 30*time.Second).Err())
			}
			before := e.calls(2, "evalsha")
			caught := e.proxies[2].HoldNext([]byte(key))
			_, err := c.TryAcquire(ctx, key, 30*time.Second)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			<-caught
			// The rollback reached node 2 and found the key absent.
			require.Eventually(t, func() bool { return e.calls(2, "evalsha") > before },
				10*time.Second, time.Millisecond, "the rollback did not reach node 2")
			if cfg.name == "context-timeouts" {
				// The write was given up on: everything that follows it in
				// the client has run.
				require.NoError(t, c.Close(ctx))
			}
			require.Empty(t, e.value(2, key))

			landed := e.calls(2, "evalsha")
			e.proxies[2].ReleaseHeld()
			require.Eventually(t, func() bool { return e.calls(2, "evalsha") > landed },
				10*time.Second, time.Millisecond, "the held write did not land")
			require.Eventually(t, func() bool { return e.value(2, key) == "" },
				1500*time.Millisecond, time.Millisecond, "the late write left our key on node 2")
			require.Eventually(t, func() bool { return nodetest.Get(t, ctx, e.direct[2], key) == "" },
				2500*time.Millisecond, 5*time.Millisecond, "node 2 kept something under the key")
		})
	}
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

	acquireSHA := scriptSHA(t, "acquire.lua")
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
	require.Eventually(t, func() bool { return nodetest.Get(t, ctx, e.direct[2], key) == "" },
		3*time.Second, 5*time.Millisecond, "node 2 kept something under the key")
}

// TestReservedKeys: no Client locks a name the library keeps its own values
// under, and a guarded acquire never writes over a value found under the
// marker's name.
func TestReservedKeys(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	plain, guarded := e.client(), e.client(redlock.WithRestartGuard(time.Second))
	ctx := t.Context()
	for _, c := range []*redlock.Client{plain, guarded} {
		for _, key := range []string{"redlock:boot", "{orders}:redlock:fence", "orders:redlock:fence:abcd", "{orders}:redlock:leaders"} {
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
	assert.Equal(t, foreign, nodetest.Get(t, ctx, e.direct[0], "redlock:boot"), "the guard wrote over a value under its marker's name")
	assert.Empty(t, e.value(0, key), "a node whose marker's name holds another value voted")
}
