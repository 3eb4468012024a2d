package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
	"github.com/redlock-go/redlock/internal/nodetest"
)

// endOf records when ctx ends, as close to the moment as a test can see it.
type endOf struct {
	done chan struct{}
	at   time.Time
}

func watchEnd(ctx context.Context) *endOf {
	w := &endOf{done: make(chan struct{})}
	context.AfterFunc(ctx, func() {
		w.at = time.Now()
		close(w.done)
	})
	return w
}

// wait returns when ctx ended, or fails the test after within.
func (w *endOf) wait(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	select {
	case <-w.done:
		return w.at
	case <-time.After(within):
		require.FailNow(t, "the KeepAlive context did not end", "within %v", within)
		return time.Time{}
	}
}

// awaitRenewals waits until KeepAlive has renewed l n times, so that the
// connections and scripts a renewal uses are warm before a fault.
func awaitRenewals(t *testing.T, l *redlock.Lock, n int, within time.Duration) {
	t.Helper()
	last := l.Until()
	deadline := time.Now().Add(within)
	for seen := 0; seen < n; {
		require.True(t, time.Now().Before(deadline), "%d of %d renewals within %v", seen, n, within)
		time.Sleep(2 * time.Millisecond)
		if u := l.Until(); u.After(last) {
			last = u
			seen++
		}
	}
}

// TestKeepAliveHoldsLock: a 600 ms lock stays held for 3 s under KeepAlive
// while another client keeps trying to take it.
func TestKeepAliveHoldsLock(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c, other := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, 600*time.Millisecond)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	first := l.Until()

	tries := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); tries++ {
		o, err := other.TryAcquire(ctx, key, time.Second)
		if err == nil {
			_ = o.Release(ctx)
			require.FailNow(t, "another client took the kept lock", "after %v", time.Since(end.Add(-3*time.Second)))
		}
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.NoError(t, kctx.Err(), "the KeepAlive context ended: %v", context.Cause(kctx))
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, l.Until().After(first.Add(2*time.Second)), "Until did not move with the renewals")
	assert.Greater(t, tries, 50)
	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, context.Cause(kctx), redlock.ErrReleased)
}

// leaseLate is how late a KeepAlive context may end past its lock's Until
// on a machine short of CPU, the bound of docs/lease.md: its timer fires a
// margin before Until, but a starved process runs it late (a context
// live 138 ms past Until was seen in the nemesis, with the load average at
// 10 on 2 cores).
const leaseLate = 250 * time.Millisecond

// TestKeepAliveLostOnFault: with 3 of 5 nodes killed or blackholed, the
// context ends with ErrLockLost no later than the Until read at the fault,
// give or take what a starved CPU adds (leaseLate).
func TestKeepAliveLostOnFault(t *testing.T) {
	type fault struct {
		name   string
		client func(*redis.Options)
		inject func(e *env, i int)
	}
	faults := []fault{
		{"kill", fastClients, func(e *env, i int) { require.NoError(e.t, e.servers[i].Kill()) }},
		{"blackhole", fastClients, func(e *env, i int) { e.proxies[i].SetBlackhole(true) }},
		{"blackhole/go-redis-defaults", defaultClients, func(e *env, i int) { e.proxies[i].SetBlackhole(true) }},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			e := newEnv(t, 5, f.client)
			c := e.client()
			ctx := t.Context()
			l, err := c.TryAcquire(ctx, newKey(t), time.Second)
			require.NoError(t, err)
			kctx := l.KeepAlive(ctx)
			end := watchEnd(kctx)
			awaitRenewals(t, l, 2, 3*time.Second)

			until := l.Until()
			faultAt := time.Now()
			for i := range 3 {
				f.inject(e, i)
			}
			at := end.wait(t, 3*time.Second)
			cause := context.Cause(kctx)
			require.ErrorIs(t, cause, redlock.ErrLockLost)
			assert.False(t, at.After(until.Add(leaseLate)), "ended %v after the Until read at the fault (%v allowed)",
				at.Sub(until), leaseLate)
			t.Logf("lost %v after the fault, %v before Until; cause: %v", at.Sub(faultAt), until.Sub(at), cause)
			e.resetFaults()
			_ = l.Release(ctx)
		})
	}
}

// TestKeepAliveLostWhenKeyDeleted: our value deleted on 3 of 5 nodes ends the
// context within one renewal interval.
func TestKeepAliveLostWhenKeyDeleted(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	var failures atomic.Int32
	var failure atomic.Pointer[error]
	c := e.client(redlock.WithRenewErrorHandler(func(l *redlock.Lock, err error) {
		failures.Add(1)
		failure.Store(&err)
	}))
	ctx := t.Context()
	key := newKey(t)
	const ttl = 900 * time.Millisecond
	interval := ttl / 3
	l, err := c.TryAcquire(ctx, key, ttl)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	end := watchEnd(kctx)
	awaitRenewals(t, l, 1, 2*time.Second)
	e.awaitHolders(key, l.Token())

	deleted := time.Now()
	for i := range 3 {
		require.NoError(t, e.direct[i].Del(ctx, key).Err())
	}
	at := end.wait(t, 2*time.Second)
	cause := context.Cause(kctx)
	require.ErrorIs(t, cause, redlock.ErrLockLost)
	require.ErrorIs(t, cause, redlock.ErrNotHeld, "the cause carries the refused renewal")
	var qe *redlock.QuorumError
	require.ErrorAs(t, cause, &qe)
	assert.LessOrEqual(t, at.Sub(deleted), interval+100*time.Millisecond, "loss seen late")
	t.Logf("lost %v after the delete (renewal interval %v); cause: %v", at.Sub(deleted), interval, cause)
	require.Eventually(t, func() bool { return failures.Load() == 1 }, time.Second, time.Millisecond,
		"the hook saw %d failed renewals, not the one", failures.Load())
	require.ErrorIs(t, *failure.Load(), redlock.ErrKeyAbsent, "the hook's error")
	// A later KeepAlive on the lost lock is over at once, with the same cause.
	again := l.KeepAlive(ctx)
	require.Error(t, again.Err())
	require.Equal(t, cause, context.Cause(again))
	require.ErrorIs(t, l.Release(ctx), redlock.ErrNotHeld)
}

// TestKeepAliveReleaseStopsRenewal: Release, racing with renewals every 333 ms,
// ends the context with ErrReleased at once, and no renewal brings the key
// back or pushes its expiry afterwards.
func TestKeepAliveReleaseStopsRenewal(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	for round := range 30 {
		key := fmt.Sprintf("%s:%d", newKey(t), round)
		start := time.Now()
		l, err := c.TryAcquire(ctx, key, time.Second)
		require.NoError(t, err)
		kctx := l.KeepAlive(ctx)
		time.Sleep(time.Duration(round%7) * 60 * time.Millisecond)
		require.NoError(t, l.Release(ctx), "round %d, released %v after the acquire started", round, time.Since(start))
		select {
		case <-kctx.Done():
		default:
			require.FailNow(t, "the KeepAlive context outlived Release", "round %d", round)
		}
		require.Equal(t, redlock.ErrReleased, context.Cause(kctx), "round %d", round)
		e.eventuallyNoKey(key, 2*time.Second)
		// A renewal that landed now would bring the key back, or push the
		// expiry of what a late one wrote; the tombstone a Release leaves
		// lives min(ttl, 2s) at most and is never renewed.
		for range 6 {
			time.Sleep(40 * time.Millisecond)
			for i := range e.direct {
				require.Empty(t, e.value(i, key), "round %d: node %d holds the key again after Release", round, i)
				pttl, err := e.direct[i].PTTL(ctx, key).Result()
				require.NoError(t, err)
				require.LessOrEqual(t, pttl, time.Second, "round %d: node %d: something pushed the expiry of what the Release left", round, i)
			}
		}
	}
	// Nothing is sent any more: every released lock's renewal is over.
	before := make([]int, len(e.direct))
	for i := range e.direct {
		before[i] = e.calls(i, "evalsha")
	}
	time.Sleep(500 * time.Millisecond)
	for i := range e.direct {
		assert.Equal(t, before[i], e.calls(i, "evalsha"), "node %d ran scripts after every lock was released", i)
	}
}

// TestKeepAliveStopsWithContext: when the caller's context ends, renewal
// stops and the lock runs out with its TTL.
func TestKeepAliveStopsWithContext(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	l, err := c.TryAcquire(t.Context(), key, time.Second)
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(t.Context())
	kctx := l.KeepAlive(ctx)
	awaitRenewals(t, l, 2, 3*time.Second)
	stop := errors.New("done with it")
	cancel(stop)
	require.Equal(t, stop, context.Cause(kctx))
	e.eventuallyNoKey(key, 3*time.Second) // no renewal pushes the expiry any more

	expired := l.KeepAlive(t.Context())
	require.ErrorIs(t, context.Cause(expired), redlock.ErrLockLost, "KeepAlive of an expired lock")
	require.ErrorIs(t, l.Release(t.Context()), redlock.ErrNotHeld)
	require.ErrorIs(t, context.Cause(expired), redlock.ErrLockLost, "the loss stays the cause after Release")
}

// TestKeepAliveClientClosed: Close ends the context (cause ErrClosed, no
// loss: Close releases the lock) instead of letting it wait for Until.
func TestKeepAliveClientClosed(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	const ttl = 3 * time.Second
	l, err := c.TryAcquire(t.Context(), newKey(t), ttl)
	require.NoError(t, err)
	kctx := l.KeepAlive(t.Context())
	end := watchEnd(kctx)
	closed := time.Now()
	require.NoError(t, c.Close(t.Context()))
	at := end.wait(t, ttl)
	require.Equal(t, redlock.ErrClosed, context.Cause(kctx))
	assert.Less(t, at.Sub(closed), ttl/3+200*time.Millisecond, "the end waited for Until")
}

// TestKeepAliveTwice: two KeepAlive calls share one renewal, which goes on
// while either context is live.
func TestKeepAliveTwice(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, other := e.client(), e.client()
	key := newKey(t)
	l, err := c.TryAcquire(t.Context(), key, 600*time.Millisecond)
	require.NoError(t, err)
	ctx1, cancel1 := context.WithCancel(t.Context())
	k1 := l.KeepAlive(ctx1)
	k2 := l.KeepAlive(t.Context())
	cancel1()
	require.ErrorIs(t, k1.Err(), context.Canceled)
	time.Sleep(2 * time.Second) // more than three TTLs
	require.NoError(t, k2.Err(), "the second context ended: %v", context.Cause(k2))
	_, err = other.TryAcquire(t.Context(), key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "the lock lapsed with one KeepAlive left")
	require.NoError(t, l.Release(t.Context()))
	require.Equal(t, redlock.ErrReleased, context.Cause(k2))
	require.Equal(t, context.Canceled, context.Cause(k1))
}

// TestKeepAliveFollowsExtend: the holder's own Extend to a shorter TTL moves
// the renewals with it, and the lock stays held.
func TestKeepAliveFollowsExtend(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c, other := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, 3*time.Second)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	require.NoError(t, l.Extend(ctx, 600*time.Millisecond))
	time.Sleep(2500 * time.Millisecond) // the next renewal at 3s's pace would come after 1s
	require.NoError(t, kctx.Err(), "the KeepAlive context ended: %v", context.Cause(kctx))
	assert.Less(t, time.Until(l.Until()), 600*time.Millisecond, "renewed with the old TTL")
	_, err = other.TryAcquire(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "the lock lapsed")
	require.NoError(t, l.Release(ctx))
}

// TestKeepAliveMisuse: a nil lock, a nil context, a released lock and an
// ended context give an ended context with the right cause, and no panic.
func TestKeepAliveMisuse(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	var nilLock *redlock.Lock
	require.ErrorIs(t, context.Cause(nilLock.KeepAlive(t.Context())), redlock.ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the input under test
	require.ErrorIs(t, context.Cause(nilLock.KeepAlive(nil)), redlock.ErrInvalidArgument)

	l, err := c.TryAcquire(t.Context(), newKey(t), time.Second)
	require.NoError(t, err)
	//lint:ignore SA1012 a nil context is the input under test
	require.ErrorIs(t, context.Cause(l.KeepAlive(nil)), redlock.ErrInvalidArgument)
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, context.Cause(l.KeepAlive(ended)), context.Canceled)
	require.NoError(t, l.Release(t.Context()))
	require.Equal(t, redlock.ErrReleased, context.Cause(l.KeepAlive(t.Context())))

	err = c.Do(t.Context(), newKey(t), time.Second, nil)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
}

func TestDo(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	errWork := errors.New("work failed")

	t.Run("success", func(t *testing.T) {
		key := newKey(t)
		ran := false
		err := c.Do(ctx, key, 600*time.Millisecond, func(ctx context.Context, l *redlock.Lock) error {
			ran = true
			require.Equal(t, key, l.Key())
			time.Sleep(1500 * time.Millisecond) // past the TTL: held by the renewals
			require.NoError(t, ctx.Err())
			require.GreaterOrEqual(t, e.holders(key, l.Token()), c.Quorum())
			return nil
		})
		require.NoError(t, err)
		require.True(t, ran)
		e.eventuallyNoKey(key, time.Second)
	})

	t.Run("fn error", func(t *testing.T) {
		key := newKey(t)
		var seen context.Context
		err := c.Do(ctx, key, time.Second, func(ctx context.Context, _ *redlock.Lock) error {
			seen = ctx
			return errWork
		})
		require.ErrorIs(t, err, errWork)
		require.NotErrorIs(t, err, redlock.ErrLockLost)
		require.Equal(t, redlock.ErrReleased, context.Cause(seen))
		e.eventuallyNoKey(key, time.Second)
	})

	t.Run("panic", func(t *testing.T) {
		key := newKey(t)
		var held int
		func() {
			defer func() { require.Equal(t, "boom", recover()) }()
			_ = c.Do(ctx, key, time.Second, func(context.Context, *redlock.Lock) error {
				held = e.quorumHolders(key)
				panic("boom")
			})
			t.Error("Do returned after a panic")
		}()
		require.GreaterOrEqual(t, held, c.Quorum())
		e.eventuallyNoKey(key, time.Second)
	})

	t.Run("lost", func(t *testing.T) {
		key := newKey(t)
		var cause error
		err := c.Do(ctx, key, 600*time.Millisecond, func(ctx context.Context, _ *redlock.Lock) error {
			// Acquire returns at a quorum: node 0's write may land just after.
			var holder string
			require.Eventually(t, func() bool {
				holder = holderOf(nodetest.Get(t, ctx, e.direct[0], key))
				return holder != ""
			}, 5*time.Second, time.Millisecond)
			e.awaitHolders(key, holder)
			for i := range 3 {
				require.NoError(t, e.direct[i].Del(ctx, key).Err())
			}
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return ctx.Err()
			case <-time.After(2 * time.Second):
				return errors.New("the context did not end")
			}
		})
		require.ErrorIs(t, cause, redlock.ErrLockLost)
		require.ErrorIs(t, err, redlock.ErrLockLost)
		require.ErrorIs(t, err, context.Canceled, "fn's own error is kept")
		e.eventuallyNoKey(key, time.Second)
	})

	// fn returning the context's cause, as the examples do: Do's error
	// states the loss once.
	t.Run("lost, fn returns the cause", func(t *testing.T) {
		key := newKey(t)
		var cause error
		err := c.Do(ctx, key, 600*time.Millisecond, func(ctx context.Context, l *redlock.Lock) error {
			e.awaitHolders(key, l.Token())
			for i := range 3 {
				require.NoError(t, e.direct[i].Del(ctx, key).Err())
			}
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return fmt.Errorf("submitting: %w", cause)
			case <-time.After(2 * time.Second):
				return errors.New("the context did not end")
			}
		})
		require.ErrorIs(t, err, redlock.ErrLockLost)
		require.Equal(t, 1, strings.Count(err.Error(), cause.Error()), "the cause is stated once: %v", err)
		require.True(t, strings.HasPrefix(err.Error(), "submitting: "), "fn's error comes first: %v", err)
		e.eventuallyNoKey(key, time.Second)
	})

	t.Run("not acquired", func(t *testing.T) {
		key := newKey(t)
		l, err := c.TryAcquire(ctx, key, 10*time.Second)
		require.NoError(t, err)
		actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		err = c.Do(actx, key, time.Second, func(context.Context, *redlock.Lock) error {
			t.Error("fn ran without the lock")
			return nil
		})
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.NoError(t, l.Release(ctx))
	})
}

// TestKeepAliveNoLeak: released, lost and cancelled KeepAlives leave no
// goroutine behind once the Client is closed.
func TestKeepAliveNoLeak(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ignore := goleak.IgnoreCurrent()
	ctx := t.Context()
	var ends []context.Context
	for i := range 20 {
		key := newKey(t)
		l, err := c.TryAcquire(ctx, key, 500*time.Millisecond)
		require.NoError(t, err)
		kctx, cancel := context.WithCancel(ctx)
		ends = append(ends, l.KeepAlive(kctx), l.KeepAlive(kctx))
		time.Sleep(time.Duration(i%4) * 20 * time.Millisecond)
		switch i % 3 {
		case 0: // released
			require.NoError(t, l.Release(ctx))
		case 1: // lost
			e.awaitHolders(key, l.Token())
			for n := range 2 {
				require.NoError(t, e.direct[n].Del(ctx, key).Err())
			}
		case 2: // cancelled, then left to expire
			cancel()
		}
		cancel()
	}
	require.NoError(t, c.Do(ctx, newKey(t), 500*time.Millisecond, func(context.Context, *redlock.Lock) error {
		time.Sleep(300 * time.Millisecond)
		return nil
	}))
	for i, k := range ends {
		select {
		case <-k.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("KeepAlive context %d did not end", i)
		}
	}
	e.settle(c)
	// The proxies serve each new connection on goroutines of their own.
	proxy := "github.com/redlock-go/redlock/internal/faultproxy.(*Proxy)."
	goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction(proxy+"handle"), goleak.IgnoreAnyFunction(proxy+"readClient"),
		goleak.IgnoreAnyFunction(proxy+"writeServer"), goleak.IgnoreAnyFunction(proxy+"copyReplies"))
}

// TestKeepAliveCost keeps thousands of locks alive on three nodes and
// reports what each costs: between renewals a timer and some bytes, not a
// goroutine; and while their renewals fall due together, a bounded number
// of goroutines, without losing any lock.
func TestKeepAliveCost(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 500
	}
	// Every lock renews 2s after KeepAlive, all within 0.2s (the jitter),
	// with 30s of validity: they wait for each other, and none is lost.
	const ttl = 30 * time.Second
	e := newEnv(t, 3, fastClients)
	// Each renewal's Extend, from the Renewal hook: an interval within the
	// time the renewal held its place among those run at once.
	var mu sync.Mutex
	var renewals []history.Interval
	c := e.client(redlock.WithRenewInterval(2*time.Second), redlock.WithHooks(redlock.Hooks{
		Renewal: func(r redlock.Event) {
			end := time.Now()
			mu.Lock()
			renewals = append(renewals, history.Interval{From: end.Add(-r.Elapsed), To: end})
			mu.Unlock()
		},
	}))
	ctx := t.Context()
	prefix := newKey(t)
	locks := make([]*redlock.Lock, n)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				l, err := c.Acquire(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl)
				if err != nil {
					failed.Add(1)
					continue
				}
				locks[i] = l
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "acquires failed")

	time.Sleep(1200 * time.Millisecond) // the node workers of the acquires go idle and end
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kept := make([]context.Context, n)
	for i, l := range locks {
		kept[i] = l.KeepAlive(kctx)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	extra := runtime.NumGoroutine() - goroutines
	perLock := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	t.Logf("%d kept-alive locks: %.0f bytes and %.4f goroutines per lock (%d goroutines more in all)",
		n, perLock, float64(extra)/float64(n), extra)
	assert.Less(t, extra, 10, "KeepAlive costs goroutines")
	assert.Less(t, perLock, 2048.0, "KeepAlive costs too much memory per lock")

	// Every lock renews; at most 64 renewals run at once (docs/lease.md),
	// whatever falls due together: counted from the renewals' own
	// intervals. The goroutine count also sees the goroutines of timers
	// that fired and have yet to run, a few µs each, of which a CPU shared
	// with other test binaries can hold up thousands: it must stay below
	// one per lock (3.6 per lock were seen when every due renewal ran at
	// once).
	untils := make([]time.Time, n)
	for i, l := range locks {
		untils[i] = l.Until()
	}
	peak, renewed := 0, 0
	start := time.Now()
	for renewed < n && time.Since(start) < 25*time.Second {
		time.Sleep(100 * time.Millisecond)
		peak = max(peak, runtime.NumGoroutine()-goroutines)
		renewed = 0
		for i, l := range locks {
			if l.Until().After(untils[i]) {
				renewed++
			}
		}
	}
	lost := 0
	for i, k := range kept {
		if k.Err() != nil {
			if lost++; lost <= 3 {
				t.Errorf("lock %d lost: %v", i, context.Cause(k))
			}
		}
	}
	mu.Lock()
	most := history.MostAtOnce(renewals)
	hooked := len(renewals)
	mu.Unlock()
	t.Logf("%d of %d locks renewed within %v, %d lost; at most %d renewals at once (%d seen by the hook); at most %d goroutines more than before KeepAlive",
		renewed, n, time.Since(start).Round(100*time.Millisecond), lost, most, hooked, peak)
	assert.Zero(t, lost)
	assert.Equal(t, n, renewed, "locks not renewed")
	assert.GreaterOrEqual(t, hooked, n, "renewals the hook saw")
	assert.LessOrEqual(t, most, 64, "renewals run at once, against the documented cap of 64")
	assert.Less(t, peak, n, "renewals that fell due together ran at once")

	// Cancelling the contexts stops every renewal; releasing frees the keys.
	cancel()
	for i, l := range locks {
		require.Error(t, kept[i].Err())
		wg.Go(func() { assert.NoError(t, l.Release(context.Background())) })
		if i%8 == 7 {
			wg.Wait()
		}
	}
	wg.Wait()
}
