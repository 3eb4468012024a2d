package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// awaitSubscribers waits until every node counts n subscribers of key's
// release channel: the waiters of n Clients watch it.
func (e *env) awaitSubscribers(key string, n int64) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		for _, d := range e.direct {
			subs, err := d.PubSubNumSub(context.Background(), "redlock:released:"+key).Result()
			if err != nil || subs["redlock:released:"+key] != n {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the waiters did not subscribe")
}

// commandTotals sums each command's calls over every node.
func (e *env) commandTotals() map[string]int {
	e.t.Helper()
	out := make(map[string]int)
	for _, d := range e.direct {
		for k, v := range commandCalls(e.t, context.Background(), d) {
			out[k] += v
		}
	}
	return out
}

// TestHandoverOneRound: when the next waiter is an Acquire of the same
// Client, Release hands it the key in the same round: one script per node
// for the release and the acquire together, no announcement, and the
// waiter's own token on every node, valid for its own TTL.
func TestHandoverOneRound(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	a, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	got := make(chan *redlock.Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, key, 4*time.Second)
		assert.NoError(t, err)
		got <- l
	}()
	e.awaitSubscribers(key, 1)
	time.Sleep(200 * time.Millisecond) // its attempt after subscribing was refused: it waits

	before := e.commandTotals()
	start := time.Now()
	require.NoError(t, a.Release(ctx))
	var b *redlock.Lock
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
	require.NotNil(t, b)
	e.awaitHolders(key, b.Token()) // the rounds return at a quorum
	after := e.commandTotals()
	for k, v := range after {
		if v != before[k] {
			t.Logf("%s: %d", k, v-before[k])
		}
	}
	assert.Equal(t, 3, after["evalsha"]-before["evalsha"], "release and acquire took more than one script per node")
	assert.Equal(t, 0, after["publish"]-before["publish"], "a handover announced a release")
	assert.Equal(t, 0, after["del"]-before["del"])
	assert.WithinRange(t, b.Until(), start.Add(3*time.Second), start.Add(4*time.Second))

	require.NoError(t, b.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
	assert.NoError(t, a.Release(ctx), "a later Release of the handed-over lock reports the first one's outcome")
}

// TestHandoverStreakAcrossClients: while a waiter of another Client
// (another process) watches the key, a Client hands the key to its own
// waiters at most three times in a row; the next Release announces it and
// the waiters of both Clients contend, so the other Client's waiter gets
// its chance after each streak.
func TestHandoverStreakAcrossClients(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	mine, other := e.client(slowRetry), e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	a, err := mine.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var order []string
	var published []int // announcements so far, at each acquisition
	take := func(c *redlock.Client, name string) {
		l, err := c.Acquire(ctx, key, 10*time.Second)
		if !assert.NoError(t, err) {
			return
		}
		mu.Lock()
		order = append(order, name)
		published = append(published, e.commandTotals()["publish"])
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		assert.NoError(t, l.Release(context.Background()))
	}
	for range 5 {
		wg.Go(func() { take(mine, "mine") })
	}
	e.awaitSubscribers(key, 1)
	wg.Go(func() { take(other, "other") })
	e.awaitSubscribers(key, 2)
	time.Sleep(200 * time.Millisecond) // every waiter has been refused and waits

	before := e.commandTotals()
	require.NoError(t, a.Release(ctx))
	wg.Wait()
	t.Logf("order after the first release: %v", order)
	require.Len(t, order, 6)
	assert.Equal(t, []string{"mine", "mine", "mine"}, order[:3], "the first releases hand over within the Client")
	assert.Equal(t, before["publish"], published[2], "a release of the streak was announced")
	assert.GreaterOrEqual(t, published[3]-before["publish"], 3, "the release after the streak was not announced on every node")
	assert.Contains(t, order, "other")
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestHandoverWithoutQuorum: another holder's value replaced the leaving
// holder's on a majority of nodes (a's had expired there, say): the waiter
// is not handed a lock it would hold on one node, its value there is rolled
// back, the Release reports what the nodes said, and the waiter takes the
// key once the other holder's value expires.
func TestHandoverWithoutQuorum(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	a, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, a.Token())
	got := make(chan *redlock.Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, key, 4*time.Second)
		assert.NoError(t, err)
		got <- l
	}()
	e.awaitSubscribers(key, 1)
	time.Sleep(200 * time.Millisecond)
	for _, i := range []int{0, 1} {
		require.NoError(t, e.direct[i].Set(ctx, key, "intruder.1", 700*time.Millisecond).Err())
	}

	released := time.Now()
	err = a.Release(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	var b *redlock.Lock
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
	assert.Greater(t, time.Since(released), 500*time.Millisecond, "acquired while the intruder held a majority")
	e.awaitHolders(key, b.Token())
	require.NoError(t, b.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestHandoverWaiterCancelled: waiters whose contexts end at random moments,
// some while a Release hands them the key, leave no key behind and never
// hold at once.
func TestHandoverWaiterCancelled(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside := 0
	for g := range 6 {
		wg.Go(func() {
			for i := range 30 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(1+(g*7+i*3)%9)*time.Millisecond)
				l, err := c.Acquire(ctx, key, 5*time.Second)
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, redlock.ErrNotAcquired)
					continue
				}
				mu.Lock()
				inside++
				assert.Equal(t, 1, inside, "two holders at once")
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				assert.NoError(t, l.Release(context.Background()))
			}
		})
	}
	wg.Wait()
	e.settle(c)
	e.requireNoKey(key)
}

// TestHandoverToWaiterThatGaveUp: the waiter's context ends while a
// Release is handing it the key (the handover scripts are held back on
// their way to the nodes). The Release still succeeds, the waiter's Acquire
// fails with its context's error, and the key it was handed is deleted, not
// left for its TTL.
func TestHandoverToWaiterThatGaveUp(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry, redlock.WithNodeTimeout(3*time.Second))
	ctx := t.Context()
	key := newKey(t)
	sum := sha1.Sum([]byte(scriptSource(t, "scripts/handover.lua")))

	a, err := c.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 1)
	go func() {
		l, err := c.Acquire(wctx, key, time.Minute)
		if err == nil {
			_ = l.Release(context.Background())
		}
		failed <- err
	}()
	e.awaitSubscribers(key, 1)
	time.Sleep(200 * time.Millisecond)

	for _, p := range e.proxies {
		p.HoldNext([]byte(hex.EncodeToString(sum[:])))
	}
	released := make(chan error, 1)
	go func() { released <- a.Release(context.Background()) }()
	require.Eventually(t, func() bool {
		for _, p := range e.proxies {
			if p.HeldCount() == 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the handover was not sent")
	cancel()
	time.Sleep(50 * time.Millisecond) // the waiter has seen its context end
	for _, p := range e.proxies {
		p.ReleaseHeld()
	}
	require.NoError(t, <-released)
	err = <-failed
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.Canceled)
	e.eventuallyNoKey(key, 5*time.Second)
}
