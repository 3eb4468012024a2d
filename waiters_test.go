package redlock_test

import (
	"context"
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

// slowRetry would make a waiter sleep for seconds between attempts: a test
// that sees it acquire sooner saw it woken.
var slowRetry = redlock.WithRetry(redlock.ExponentialBackoff(3*time.Second, 3*time.Second))

// TestWaitersNeverOverlap: goroutines of two Clients contend for one key
// with a short critical section; no two are ever inside it at once, and
// every one gets its turn.
func TestWaitersNeverOverlap(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clients := []*redlock.Client{e.client(), e.client()}
	key := newKey(t)
	const perGoroutine, goroutines = 15, 8
	var inside, most atomic.Int32
	var acquired atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		c := clients[g%len(clients)]
		wg.Go(func() {
			for range perGoroutine {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				l, err := c.Acquire(ctx, key, 5*time.Second)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				acquired.Add(1)
				assert.NoError(t, l.Release(context.Background()))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "two holders inside at once")
	assert.Equal(t, int64(perGoroutine*goroutines), acquired.Load())
}

// failedAttempts counts the failed attempts of a Client's Acquire and
// TryAcquire calls, through its hooks: pass the option to the Client.
func failedAttempts() (redlock.Option, *atomic.Int32) {
	var n atomic.Int32
	return redlock.WithHooks(redlock.Hooks{Attempt: func(a redlock.AttemptInfo) {
		if !a.Acquired {
			n.Add(1)
		}
	}}), &n
}

// awaitWaiting waits until a waiter whose failed attempts count counts has
// subscribed to key's release channel and been refused again after the
// subscription took effect: it now waits for a release hint (or its
// fallback), and a release is what wakes it.
func (e *env) awaitWaiting(key string, count *atomic.Int32) {
	e.t.Helper()
	e.awaitSubscribers(key, 1)
	require.Eventually(e.t, func() bool { return count.Load() >= 2 }, 10*time.Second, time.Millisecond,
		"the waiter was not refused after subscribing (%d failed attempts)", count.Load())
}

// TestWaitersWokenByRelease: a waiter in another Client (another process)
// acquires as soon as the holder releases, not after its retry wait.
func TestWaitersWokenByRelease(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	counting, failed := failedAttempts()
	holder, waiter := e.client(), e.client(slowRetry, counting)
	ctx := t.Context()
	key := newKey(t)

	h, err := holder.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key, 10*time.Second)
		if assert.NoError(t, err) {
			got <- time.Now()
			assert.NoError(t, l.Release(context.Background()))
		}
	}()
	e.awaitWaiting(key, failed)
	released := time.Now()
	require.NoError(t, h.Release(ctx))
	select {
	case at := <-got:
		t.Logf("acquired %v after the release", at.Sub(released))
		assert.Less(t, at.Sub(released), time.Second, "the waiter was not woken by the release")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
}

// TestWaitersLocalFIFO: within one Client, waiters for a key get it in the
// order they came, each woken by the previous one's Release.
func TestWaitersLocalFIFO(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	first, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			l, err := c.Acquire(ctx, key, 10*time.Second)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, l.Release(context.Background()))
		})
		time.Sleep(50 * time.Millisecond) // arrive in order
	}
	start := time.Now()
	require.NoError(t, first.Release(ctx))
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
	assert.Less(t, time.Since(start), 2*time.Second, "the waiters were not woken by the releases")
}

// TestWaitersLoseRaceKeepSubscription: a woken waiter that loses the race
// to another client goes back to waiting on its one subscription per node.
// The rival talks to the nodes directly and the waiter through the proxies,
// which delay its commands once it waits: the rival, taking the key back
// as soon as it released it, is always ahead of the woken waiter.
func TestWaitersLoseRaceKeepSubscription(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	direct := make([]redis.UniversalClient, len(e.direct))
	for i, d := range e.direct {
		direct[i] = d
	}
	rival, err := redlock.New(direct, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { e.settle(rival) })
	counting, failed := failedAttempts()
	waiter := e.client(slowRetry, counting)
	ctx := t.Context()
	key := newKey(t)
	subsBefore := make([]int, len(e.direct))
	for i, d := range e.direct {
		subsBefore[i] = commandCalls(t, ctx, d)["subscribe"]
	}

	h, err := rival.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	e.awaitWaiting(key, failed)
	for _, p := range e.proxies {
		p.SetDelay(200 * time.Millisecond)
	}
	lost := 0
	for range 5 {
		// Release and take it straight back: the rival is ahead of the
		// waiter's wake-up, whose attempt is then refused.
		before := failed.Load()
		require.NoError(t, h.Release(ctx))
		h, err = rival.TryAcquire(ctx, key, 10*time.Second)
		if err != nil { // the waiter won this one: then it is done
			h = nil
			break
		}
		require.Eventually(t, func() bool { return failed.Load() > before || len(done) > 0 }, 10*time.Second,
			time.Millisecond, "the waiter did not try again after the release")
		if failed.Load() == before { // it won, and released, before the rival came back
			break
		}
		lost++
	}
	e.resetFaults()
	if h != nil {
		require.NoError(t, h.Release(ctx))
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
	t.Logf("the waiter lost %d races", lost)
	require.Positive(t, lost, "the waiter never lost a race: the test saw nothing")
	for i, d := range e.direct {
		assert.Equal(t, 1, commandCalls(t, ctx, d)["subscribe"]-subsBefore[i], "node %d: subscriptions", i)
	}
}

// TestWaitersCrashedHolder: a holder that never releases costs a waiter at
// most its TTL and one capped wait.
func TestWaitersCrashedHolder(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	crashed, waiter := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	const ttl = time.Second

	_, err := crashed.Acquire(ctx, key, ttl)
	require.NoError(t, err)
	start := time.Now()
	l, err := waiter.Acquire(ctx, key, ttl)
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("acquired %v after the crash", took)
	assert.Less(t, took, ttl+redlock.DefaultRetryMax+300*time.Millisecond)
	require.NoError(t, l.Release(ctx))
}

// TestWaitersCancelled: a waiter whose context ends leaves the queue at
// once, the next one moves up, and the last one out leaves no subscription
// (and, by TestMain's goleak, no goroutine once the Client is closed).
func TestWaitersCancelled(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	h, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(short, key, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A waiter queued behind a cancelled one is not stuck behind it.
	queued, cancelQueued := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { _, err := c.Acquire(queued, key, 10*time.Second); first <- err }()
	time.Sleep(100 * time.Millisecond)
	second := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Release(context.Background())
		}
		second <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancelQueued()
	require.ErrorIs(t, <-first, context.Canceled)
	require.NoError(t, h.Release(ctx))
	require.NoError(t, <-second)

	channel := "redlock:released:" + key
	require.Eventually(t, func() bool {
		for _, d := range e.direct {
			n, err := d.PubSubNumSub(ctx, channel).Result()
			if err != nil || n[channel] != 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "a subscription outlived its waiters")
}

// TestWaitersWithoutPubSub: with an ACL that refuses pub/sub, waiting falls
// back to polling bounded by the holder's TTL and the retry wait, and
// releases still work.
func TestWaitersWithoutPubSub(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	ctx := t.Context()
	require.NoError(t, s.Client().Do(ctx, "ACL", "SETUSER", "locker", "on", ">pw", "resetchannels", "-@all",
		"+evalsha", "+eval", "+get", "+set", "+pexpire", "+pttl", "+del", "~lock:*").Err())
	nodes := func() []redis.UniversalClient {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "locker", Password: "pw", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		return []redis.UniversalClient{rc}
	}
	newClient := func(opts ...redlock.Option) *redlock.Client {
		c, err := redlock.New(nodes(), opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	holder := newClient()
	waiter := newClient(redlock.WithRetry(redlock.ExponentialBackoff(50*time.Millisecond, 100*time.Millisecond)))
	key := "lock:" + newKey(t)

	h, err := holder.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	require.NoError(t, h.Release(ctx), "the release script must not fail on a refused PUBLISH")
	select {
	case err := <-got:
		require.NoError(t, err)
		assert.Less(t, time.Since(released), time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired without pub/sub")
	}
}
