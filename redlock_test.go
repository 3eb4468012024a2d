package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
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

// TestQuorumSubsets fails every subset of nodes, in each way a node can fail,
// and checks that the lock is granted exactly when a quorum is healthy, that
// a granted lock is on every healthy node, and that a refused one leaves no
// key anywhere once the nodes are back.
func TestQuorumSubsets(t *testing.T) {
	faults := []struct {
		name  string
		apply func(e *env, i int)
	}{
		{"refused", func(e *env, i int) { e.proxies[i].SetRefuse(true) }},
		{"blackholed", func(e *env, i int) { e.proxies[i].SetBlackhole(true) }},
		{"reply-lost", func(e *env, i int) { e.proxies[i].SetDropReplies(true) }},
		{"held-by-other", func(e *env, i int) {}}, // set up per key below
	}
	for _, n := range []int{1, 3, 5} {
		e := newEnv(t, n, fastClients)
		c := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
		for _, f := range faults {
			for mask := 0; mask < 1<<n; mask++ {
				t.Run(fmt.Sprintf("n=%d/%s/failed=%0*b", n, f.name, n, mask), func(t *testing.T) {
					ctx := t.Context()
					key := newKey(t)
					for i := range n {
						if mask&(1<<i) == 0 {
							continue
						}
						if f.name == "held-by-other" {
							require.NoError(t, e.direct[i].Set(ctx, key, "someone-else", time.Minute).Err())
						}
						f.apply(e, i)
					}
					healthy := n - bits.OnesCount(uint(mask))

					l, err := c.TryAcquire(ctx, key, 10*time.Second)
					if healthy >= n/2+1 {
						require.NoError(t, err)
						// Acquire returned at quorum; the other healthy
						// nodes answer just after.
						require.Eventually(t, func() bool {
							for i := range n {
								if mask&(1<<i) == 0 && e.value(i, key) != l.Token() {
									return false
								}
							}
							return true
						}, 5*time.Second, time.Millisecond, "a healthy node lacks the key")
						e.resetFaults()
						require.NoError(t, l.Release(ctx))
					} else {
						require.ErrorIs(t, err, redlock.ErrNotAcquired)
						var qe *redlock.QuorumError
						require.ErrorAs(t, err, &qe)
						assert.Less(t, qe.OK, qe.Quorum)
						e.resetFaults()
					}
					// Every node answers again: nothing of ours may be left.
					require.Eventually(t, func() bool {
						for i := range n {
							v := e.value(i, key)
							if v != "" && v != "someone-else" {
								return false
							}
						}
						return true
					}, 5*time.Second, 5*time.Millisecond, "a key of ours was left behind")
					if f.name == "held-by-other" {
						for i := range n {
							if mask&(1<<i) != 0 {
								assert.Equal(t, "someone-else", e.value(i, key), "another holder's key was touched on node %d", i)
							}
						}
					}
				})
			}
		}
	}
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
				sets := e.calls(0, "set")
				e.proxies[0].SetDropReplies(true)
				start := time.Now()
				_, err := c.TryAcquire(t.Context(), key, 2*time.Hour)
				require.ErrorIs(t, err, redlock.ErrNotAcquired)
				require.ErrorIs(t, err, redlock.ErrNoReply)
				assert.Less(t, time.Since(start), time.Second, "the per-node deadline, not go-redis's read timeout, bounds the wait")
				e.proxies[0].Reset()
				e.settle(c)
				// Two SETs: the write, which landed although its reply was
				// lost, and the rollback's tombstone in its place (a copy of
				// the write that go-redis sent again may still be on its way).
				assert.Equal(t, sets+2, e.calls(0, "set"), "the write should have landed although its reply was lost")
				assert.True(t, strings.HasPrefix(rawKey(t, t.Context(), e.direct[0], key), "!"), "the rollback left no tombstone")
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

// TestStalledNodeBounded stalls real servers with SIGSTOP, with clients left
// at go-redis's defaults (reads bounded only by a 3s ReadTimeout), where the
// outcome needs the stalled node: the wait must end at the per-node deadline.
func TestStalledNodeBounded(t *testing.T) {
	const nodeTimeout = 100 * time.Millisecond
	const bound = nodeTimeout + 400*time.Millisecond // far below the 3s read timeout
	// Release waits for a quorum of confirmed deletes up to the cleanup
	// timeout: that is its bound.
	const cleanupTimeout = 200 * time.Millisecond
	e := newEnv(t, 3, defaultClients)
	c := e.client(redlock.WithNodeTimeout(nodeTimeout), redlock.WithCleanupTimeout(cleanupTimeout))
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)

	require.NoError(t, e.servers[1].Pause())
	require.NoError(t, e.servers[2].Pause())
	t.Cleanup(func() { _ = e.servers[1].Resume(); _ = e.servers[2].Resume() })

	start := time.Now()
	err = l.Extend(ctx, time.Minute)
	assert.Less(t, time.Since(start), bound, "extend")
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, redlock.ErrNoReply)

	start = time.Now()
	err = l.Release(ctx)
	assert.Less(t, time.Since(start), cleanupTimeout+bound, "release")
	require.ErrorIs(t, err, redlock.ErrNotHeld)

	start = time.Now()
	_, err = c.TryAcquire(ctx, newKey(t), time.Minute)
	assert.Less(t, time.Since(start), bound, "acquire")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)

	require.NoError(t, e.servers[1].Resume())
	require.NoError(t, e.servers[2].Resume())
	// The release queued behind the stalled calls reaches the nodes later.
	e.settle(c)
	e.requireNoKey(key)
}

// TestStalledNodeDoesNotPileUp retries for a while against a SIGSTOPped node
// with go-redis's default options, where each call given up on stays blocked
// for the client's read timeout. Queued calls that have become useless must
// be dropped: at most one call of the lock is in flight on the node, and
// once the node is back the background work ends within about one read
// timeout, not one per retry.
func TestStalledNodeDoesNotPileUp(t *testing.T) {
	e := newEnv(t, 3, defaultClients)
	c := e.client(redlock.WithNodeTimeout(20*time.Millisecond), redlock.WithRetry(redlock.ExponentialBackoff(time.Millisecond, 5*time.Millisecond)))
	ctx := t.Context()
	key := newKey(t)
	// Another holder on node 1: no quorum is possible without node 0.
	require.NoError(t, e.direct[1].Set(ctx, key, "other", time.Minute).Err())
	require.NoError(t, e.servers[0].Pause())
	t.Cleanup(func() { _ = e.servers[0].Resume() })

	stop := make(chan struct{})
	maxInFlight := make(chan int, 1)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				maxInFlight <- most
				return
			case <-time.After(time.Millisecond):
				most = max(most, c.Nodes()[0].InFlight)
			}
		}
	}()
	attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Acquire(attemptCtx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(stop)
	// At most one write and one delete given up on (go-redis holds each
	// until its read timeout) and one delete being tried again: a bound
	// that does not grow with the number of retries.
	assert.LessOrEqual(t, <-maxInFlight, 3, "calls piled up on the stalled node")

	require.NoError(t, e.servers[0].Resume())
	start := time.Now()
	e.settle(c)
	assert.Less(t, time.Since(start), 12*time.Second, "background work grew with the number of retries")
	assert.Equal(t, "other", e.value(1, key))
	assert.Empty(t, e.value(0, key))
	assert.Empty(t, e.value(2, key))
}

// TestUntil checks the validity window against an injected clock: exactly
// start + ttl - drift, and an acquisition that used up its TTL is refused
// and rolled back.
func TestUntil(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clock := &fakeClock{}
	c := e.client(redlock.WithClock(clock))
	ctx := t.Context()
	ttl := 10 * time.Second
	drift := time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst

	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock.set(start, 0)
	l, err := c.TryAcquire(ctx, newKey(t), ttl)
	require.NoError(t, err)
	assert.Equal(t, start.Add(ttl-drift), l.Until())

	// Extend from a later start moves Until by the same rule.
	clock.set(start.Add(time.Second), 0)
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	drift20 := time.Duration(float64(20*time.Second)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst
	assert.Equal(t, start.Add(time.Second+20*time.Second-drift20), l.Until())
	require.NoError(t, l.Release(ctx))

	// Each clock read advances just past the validity budget.
	key := newKey(t)
	clock.set(start, ttl-drift)
	_, err = c.TryAcquire(ctx, key, ttl)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.GreaterOrEqual(t, qe.OK, qe.Quorum, "a quorum confirmed, yet no validity was left")
	assert.Equal(t, ttl-drift, qe.Elapsed)
	e.eventuallyNoKey(key, 5*time.Second)

	// An expired lock cannot be extended, and nothing is sent.
	clock.set(start, 0)
	l, err = c.TryAcquire(ctx, key, ttl)
	require.NoError(t, err)
	clock.set(l.Until(), 0)
	require.ErrorIs(t, l.Extend(ctx, ttl), redlock.ErrNotHeld)
	require.NoError(t, l.Release(ctx))
}

// TestUntilRealClock checks that Until is never later than start+ttl-drift
// with the real clock, over many acquisitions and extensions.
func TestUntilRealClock(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	ttl := 3 * time.Second
	drift := time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst
	// The library's start lies between before and after: Until must be
	// within [before, after] + ttl - drift, so never later than the
	// start + ttl - drift of any send time.
	within := func(before, after, until time.Time) {
		t.Helper()
		assert.False(t, until.After(after.Add(ttl-drift)), "Until later than start+ttl-drift")
		assert.False(t, until.Before(before.Add(ttl-drift)), "Until earlier than the rule gives")
	}
	for range 50 {
		before := time.Now()
		l, err := c.Acquire(ctx, key, ttl)
		after := time.Now()
		require.NoError(t, err)
		within(before, after, l.Until())
		before = time.Now()
		require.NoError(t, l.Extend(ctx, ttl))
		within(before, time.Now(), l.Until())
		require.NoError(t, l.Release(ctx))
	}
}

func TestReleaseOutcomes(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	// Node 0 lost the key, node 1 was taken by someone else, node 2 is ours.
	require.NoError(t, e.direct[0].Del(ctx, key).Err())
	require.NoError(t, e.direct[1].Set(ctx, key, "other", time.Minute).Err())

	err = l.Release(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	causes := map[int]error{}
	for _, ne := range nodeErrors(err) {
		causes[ne.Node] = ne.Err
	}
	assert.ErrorIs(t, causes[0], redlock.ErrKeyAbsent)
	assert.ErrorIs(t, causes[1], redlock.ErrHeldByOther)
	assert.Equal(t, "other", e.value(1, key), "release must never delete another holder's key")
	// The outcome was decided before node 2 answered; it is released all
	// the same.
	e.settle(c)
	assert.Empty(t, e.value(2, key))
	c = e.client()

	// Releasing again is harmless: still not held, still not touching node 1.
	l2, err := c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))
	require.ErrorIs(t, l.Release(ctx), redlock.ErrNotHeld)
	assert.Equal(t, "other", e.value(1, key))
}

// nodeErrors collects the NodeErrors in err's tree.
func nodeErrors(err error) []*redlock.NodeError {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return nil
	}
	return qe.Nodes
}

func TestExtend(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	first := l.Until()

	// Node 0 lost the key (a restart): the other two still hold our value,
	// so Extend succeeds and then puts the key back on node 0.
	require.NoError(t, e.direct[0].Del(ctx, key).Err())
	require.NoError(t, l.Extend(ctx, time.Minute))
	assert.True(t, l.Until().After(first.Add(50*time.Second)))
	// A quorum may answer before node 0's "absent" is read; the next
	// extension then restores it.
	require.Eventually(t, func() bool {
		return e.holders(key, l.Token()) == 3 || l.Extend(ctx, time.Minute) != nil
	}, 5*time.Second, 20*time.Millisecond)
	e.awaitHolders(key, l.Token())
	ttl, err := e.direct[2].PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 50*time.Second)

	// Node 1 belongs to someone else: Extend must not take it.
	require.NoError(t, e.direct[1].Set(ctx, key, "other", time.Minute).Err())
	require.NoError(t, l.Extend(ctx, time.Minute))
	assert.Equal(t, "other", e.value(1, key))

	// Without a quorum the extension fails, Until does not move later, and
	// nothing is re-created.
	require.NoError(t, e.direct[2].Del(ctx, key).Err())
	until := l.Until()
	err = l.Extend(ctx, time.Hour)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.False(t, l.Until().After(until))
	assert.Empty(t, e.value(2, key), "a failed Extend re-created the key")
	assert.Equal(t, "other", e.value(1, key))

	require.NoError(t, e.direct[1].Del(ctx, key).Err())
	require.ErrorIs(t, l.Release(ctx), redlock.ErrNotHeld)
	require.ErrorIs(t, l.Extend(ctx, time.Minute), redlock.ErrNotHeld, "extend after release")
	e.settle(c)
	e.requireNoKey(key)
}

func TestAcquireWaits(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)

	// While held: Acquire gives up when ctx ends, with both causes.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(short, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A limited retry policy gives up on its own.
	limited, err := redlock.New(e.nodes, redlock.WithNodeTimeout(testNodeTimeout), redlock.WithRetry(redlock.LimitRetry(redlock.ExponentialBackoff(time.Millisecond, 5*time.Millisecond), 3)))
	require.NoError(t, err)
	t.Cleanup(func() { e.settle(limited) })
	_, err = limited.Acquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NotErrorIs(t, err, context.DeadlineExceeded)

	// Acquire gets the lock once it is released.
	got := make(chan *redlock.Lock, 1)
	go func() {
		l2, err := c.Acquire(ctx, key, time.Minute)
		assert.NoError(t, err)
		got <- l2
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, l.Release(ctx))
	l2 := <-got
	require.NotNil(t, l2)
	require.NoError(t, l2.Release(ctx))
}

// TestMutualExclusion runs contending clients on one key with a counter
// that is read, held and written back inside the critical section: a second
// holder at any moment shows up as a lost update.
func TestMutualExclusion(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	key := newKey(t)
	counter := key + ":counter"
	const workers, rounds = 6, 15
	var wg sync.WaitGroup
	for range workers {
		c := e.client()
		wg.Go(func() {
			ctx := t.Context()
			for range rounds {
				l, err := c.Acquire(ctx, key, 5*time.Second)
				if !assert.NoError(t, err) {
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

func TestBadInput(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	calls := []struct {
		name string
		ctx  context.Context
		key  string
		ttl  time.Duration
		want []error
	}{
		{"empty key", ctx, "", time.Second, []error{redlock.ErrInvalidArgument}},
		{"zero ttl", ctx, "k", 0, []error{redlock.ErrInvalidArgument}},
		{"negative ttl", ctx, "k", -time.Second, []error{redlock.ErrInvalidArgument}},
		{"sub-millisecond ttl", ctx, "k", 500 * time.Microsecond, []error{redlock.ErrInvalidArgument}},
		{"ttl within drift", ctx, "k", 2 * time.Millisecond, []error{redlock.ErrInvalidArgument}},
		{"nil context", nil, "k", time.Second, []error{redlock.ErrInvalidArgument}},
		{"cancelled context", cancelled, "k", time.Second, []error{redlock.ErrNotAcquired, context.Canceled}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			for _, try := range []func(context.Context, string, time.Duration, ...redlock.AcquireOption) (*redlock.Lock, error){c.Acquire, c.TryAcquire} {
				l, err := try(tc.ctx, tc.key, tc.ttl)
				require.Nil(t, l)
				for _, want := range tc.want {
					require.ErrorIs(t, err, want)
				}
			}
		})
	}
	for i := range e.direct {
		n, err := e.direct[i].DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "bad input wrote to node %d", i)
	}

	var typedNil *redis.Client
	other := redis.NewClient(&redis.Options{Addr: e.servers[0].Addr()})
	t.Cleanup(func() { _ = other.Close() })
	configs := []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []redlock.Option
	}{
		{"no nodes", nil, nil},
		{"nil node", []redis.UniversalClient{e.nodes[0], nil}, nil},
		{"typed nil node", []redis.UniversalClient{e.nodes[0], typedNil}, nil},
		{"same client twice", []redis.UniversalClient{e.nodes[0], e.nodes[1], e.nodes[0]}, nil},
		{"same server twice", []redis.UniversalClient{e.direct[0], other}, nil},
		{"nil option", e.nodes, []redlock.Option{nil}},
		{"nil retry", e.nodes, []redlock.Option{redlock.WithRetry(nil)}},
		{"nil limited retry", e.nodes, []redlock.Option{redlock.WithRetry(redlock.LimitRetry(nil, 3))}},
		{"nil clock", e.nodes, []redlock.Option{redlock.WithClock(nil)}},
		{"negative node timeout", e.nodes, []redlock.Option{redlock.WithNodeTimeout(-time.Second)}},
		{"zero cleanup timeout", e.nodes, []redlock.Option{redlock.WithCleanupTimeout(0)}},
		{"zero node timeout", e.nodes, []redlock.Option{redlock.WithNodeTimeout(0)}},
		{"zero restart guard", e.nodes, []redlock.Option{redlock.WithRestartGuard(0)}},
		{"zero renew interval", e.nodes, []redlock.Option{redlock.WithRenewInterval(0)}},
		{"nil renewal error handler", e.nodes, []redlock.Option{redlock.WithRenewErrorHandler(nil)}},
		{"nil logger", e.nodes, []redlock.Option{redlock.WithLogger(nil)}},
		{"no attempts", e.nodes, []redlock.Option{redlock.WithRetry(redlock.LimitRetry(redlock.NoRetry(), 0))}},
		{"zero unavailable timeout", e.nodes, []redlock.Option{redlock.WithUnavailableTimeout(0)}},
		{"drift factor 1", e.nodes, []redlock.Option{redlock.WithDrift(1, 0)}},
		{"negative drift", e.nodes, []redlock.Option{redlock.WithDrift(0.01, -time.Millisecond)}},
	}
	for _, tc := range configs {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redlock.New(tc.nodes, tc.opts...)
			require.Nil(t, c)
			require.ErrorIs(t, err, redlock.ErrInvalidArgument)
		})
	}

	var nilLock *redlock.Lock
	require.ErrorIs(t, nilLock.Release(ctx), redlock.ErrInvalidArgument)
	require.ErrorIs(t, nilLock.Extend(ctx, time.Second), redlock.ErrInvalidArgument)

	l, err := c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	require.ErrorIs(t, l.Extend(ctx, 0), redlock.ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the input under test
	require.ErrorIs(t, l.Extend(nil, time.Second), redlock.ErrInvalidArgument)
	require.ErrorIs(t, l.Extend(cancelled, time.Second), context.Canceled)
	// Release must release even with a cancelled or nil context; a nil one
	// is reported all the same.
	require.NoError(t, l.Release(cancelled))
	l, err = c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	//lint:ignore SA1012 a nil context is the input under test
	require.ErrorIs(t, l.Release(nil), redlock.ErrInvalidArgument)
	e.settle(c)
	e.requireNoKey(l.Key())
}

func TestClose(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, err := redlock.New(e.nodes, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token()) // TryAcquire returns at a quorum

	// An Acquire waiting for the held lock is woken by Close.
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, key, time.Minute)
		done <- err
	}()
	time.Sleep(30 * time.Millisecond)
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.Close(closeCtx))
	err = <-done
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrClosed)

	_, err = c.TryAcquire(ctx, newKey(t), time.Minute)
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	// Close left the lock to its holder, whose Release still works.
	assert.Equal(t, 3, e.holders(key, l.Token()), "Close took the lock from its holder")
	require.NoError(t, l.Release(ctx))
	require.NoError(t, c.Close(closeCtx)) // waits for the release's background work
	e.requireNoKey(key)
}

// cancelClock cancels the caller's context on its second reading and jumps
// an hour ahead: the attempt fails for want of validity at the very moment
// the context ends.
type cancelClock struct {
	n      atomic.Int32
	cancel context.CancelFunc
}

func (c *cancelClock) Now() time.Time {
	if c.n.Add(1) == 2 {
		c.cancel()
		return time.Now().Add(time.Hour)
	}
	return time.Now()
}

// TestAcquireErrorsTellWhoseDeadline: an error matches the caller's context
// error exactly when the caller's context ended, never because a node's own
// deadline passed.
func TestAcquireErrorsTellWhoseDeadline(t *testing.T) {
	e := newEnv(t, 3, fastClients)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := e.client(redlock.WithClock(&cancelClock{cancel: cancel}))
	_, err := c.Acquire(ctx, newKey(t), time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.Canceled, "the context ended while an attempt failed for another reason")

	// Nodes that miss their deadline, with clients that give up at it
	// themselves: the caller's context is fine.
	c = e.client(redlock.WithNodeTimeout(50 * time.Millisecond))
	e.proxies[0].SetBlackhole(true)
	e.proxies[1].SetBlackhole(true)
	_, err = c.TryAcquire(t.Context(), newKey(t), time.Minute)
	require.ErrorIs(t, err, redlock.ErrNoReply)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "a node's deadline is not the caller's")
	e.resetFaults()
}
