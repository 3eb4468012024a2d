package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// sharedFaults are the faults of a minority node that change nothing for a
// shared Lock, as for a lock.
var sharedFaults = []struct {
	name string
	set  func(e *env)
}{
	{"none", func(*env) {}},
	{"blackhole", func(e *env) { e.proxies[2].SetBlackhole(true) }},
	{"delay", func(e *env) { e.proxies[2].SetDelay(100 * time.Millisecond) }},
	{"drop-replies", func(e *env) { e.proxies[2].SetDropReplies(true) }},
}

// entries counts the live Locks' entries on node i under key, from its raw
// value, taken shared ("^") or by permits ("#", n, ","), then
// "deadline=item" entries, a tombstone's item starting with "!"
// (scripts/lib.lua).
func (e *env) entries(i int, key string) int {
	e.t.Helper()
	v := e.bed.Get(i, key)
	if !strings.HasPrefix(v, "^") && !strings.HasPrefix(v, "#") {
		return 0
	}
	n := 0
	for _, ent := range strings.Split(v[1:], ",") {
		if _, item, ok := strings.Cut(ent, "="); ok && !strings.HasPrefix(item, "!") {
			n++
		}
	}
	return n
}

// TestSharedExclusion: shared Locks hold a key together; while one does,
// no exclusive Lock (Acquire, AcquireAll with the key) holds it; while an
// exclusive Lock holds it, no shared Lock does; releasing one reader keeps
// the others; all with a minority node blackholed, slow or dropping
// replies.
func TestSharedExclusion(t *testing.T) {
	for _, fault := range sharedFaults {
		t.Run(fault.name, func(t *testing.T) {
			e := newEnv(t, 3, fastClients)
			c1 := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
			c2 := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
			ctx := t.Context()
			key := newKey(t)
			fault.set(e)

			r1, err := c1.TryAcquire(ctx, key, time.Minute, redlock.Shared())
			require.NoError(t, err)
			assert.True(t, r1.Shared())
			r2, err := c2.TryAcquire(ctx, key, time.Minute, redlock.Shared())
			require.NoError(t, err, "readers together")
			r3, err := c1.TryAcquire(ctx, key, time.Minute, redlock.Shared())
			require.NoError(t, err, "readers together, same Client")
			assert.NotEqual(t, r1.Token(), r2.Token())

			_, err = c2.TryAcquire(ctx, key, time.Minute)
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "a writer while readers hold")
			require.NotErrorIs(t, err, redlock.ErrUnavailable)
			_, err = c2.TryAcquireAll(ctx, []string{key, key + ":other"}, time.Minute)
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "AcquireAll with the key while readers hold")

			// One reader's Release keeps the others.
			require.NoError(t, r1.Release(ctx))
			require.NoError(t, r2.Extend(ctx, time.Minute))
			ttl, err := r3.TTL(ctx)
			require.NoError(t, err)
			assert.Greater(t, ttl, 30*time.Second)
			_, err = c2.TryAcquire(ctx, key, time.Minute)
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "two readers left")
			require.NoError(t, r2.Release(ctx))
			_, err = c2.TryAcquire(ctx, key, time.Minute)
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "one reader left")
			require.NoError(t, r3.Release(ctx))

			// Release returns at a quorum: the third node's delete may be
			// on its way, and under load another node's reply may come
			// after a try's node timeout. A waiting Acquire rides both
			// out; the readers' entries would hold it for their minute.
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			w, err := c2.Acquire(wctx, key, time.Minute)
			require.NoError(t, err, "the last reader gone")
			_, err = c1.TryAcquire(ctx, key, time.Minute, redlock.Shared())
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "a reader while a writer holds")
			require.NotErrorIs(t, err, redlock.ErrUnavailable)
			require.NoError(t, w.Release(ctx))
			r, err := c1.Acquire(wctx, key, time.Minute, redlock.Shared())
			require.NoError(t, err, "the writer gone")
			require.NoError(t, r.Release(ctx))
			e.resetFaults()
			// Nothing of the shared state stays behind.
			e.eventuallyNoKey(key, 10*time.Second)
		})
	}
}

// TestSharedQuorum: one reader on a quorum excludes a writer, and a writer
// on a quorum a reader, although the other nodes are free: the node the
// two majorities share refuses.
func TestSharedQuorum(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	e.proxies[2].SetBlackhole(true)
	r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	e.gaveUp(c, 2)
	e.resetFaults()
	e.reachable(2)
	require.Equal(t, 0, e.entries(2, key), "node 2 missed the reader")
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "nodes 0 and 1 hold the reader, node 2 is free")
	require.NoError(t, r.Release(ctx))
	quiet(t, c) // Release returns at a quorum: node 2's delete may be on its way

	e.proxies[0].SetBlackhole(true)
	w, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.gaveUp(c, 0)
	e.resetFaults()
	e.reachable(0)
	require.Empty(t, e.value(0, key), "node 0 missed the writer")
	_, err = c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "nodes 1 and 2 hold the writer, node 0 is free")
	require.NoError(t, w.Release(ctx))
}

// TestSharedCrashedReader: a reader that never releases (its process
// died) blocks a writer only until its own TTL, by the nodes' clocks,
// while another reader's longer share goes on.
func TestSharedCrashedReader(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	_, err := c.TryAcquire(ctx, key, 600*time.Millisecond, redlock.Shared()) // never released
	require.NoError(t, err)
	long, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	require.NoError(t, long.Release(ctx))
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "the crashed reader's share is live")

	start := time.Now()
	w, err := c.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "the writer waited past the reader's TTL")
	require.NoError(t, w.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestSharedWriterNotStarved: while six goroutines take 300 ms shared
// Locks back to back, so that a reader always holds the key, a waiting
// exclusive Acquire gets it within a bound: once it waits, new readers
// wait behind it. Readers and writer never hold together. Also with a
// minority node blackholed.
func TestSharedWriterNotStarved(t *testing.T) {
	for _, fault := range sharedFaults[:2] {
		t.Run(fault.name, func(t *testing.T) { writerNotStarved(t, fault.set) })
	}
}

func writerNotStarved(t *testing.T, fault func(*env)) {
	e := newEnv(t, 3, fastClients)
	readers, writer := e.client(), e.client()
	fault(e)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	key := newKey(t)
	var inside, writing atomic.Int32
	var overlap atomic.Bool
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := readers.Acquire(ctx, key, 5*time.Second, redlock.Shared())
				if err != nil {
					continue
				}
				inside.Add(1)
				if writing.Load() > 0 {
					overlap.Store(true)
				}
				select {
				case <-time.After(300 * time.Millisecond):
				case <-ctx.Done():
				}
				inside.Add(-1)
				_ = l.Release(context.Background())
			}
		})
	}
	require.Eventually(t, func() bool { return inside.Load() >= 2 }, 10*time.Second, time.Millisecond)
	for range 3 {
		start := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		w, err := writer.Acquire(wctx, key, 5*time.Second)
		wcancel()
		require.NoError(t, err, "the writer starved")
		writing.Add(1)
		took := time.Since(start)
		t.Logf("writer waited %v", took)
		assert.Less(t, took, 2500*time.Millisecond, "the writer waited too long")
		if inside.Load() > 0 {
			overlap.Store(true)
		}
		time.Sleep(50 * time.Millisecond)
		writing.Add(-1)
		require.NoError(t, w.Release(ctx))
		// Readers go on after the writer.
		require.Eventually(t, func() bool { return inside.Load() > 0 }, 10*time.Second, time.Millisecond, "readers did not resume")
	}
	e.resetFaults()
	cancel()
	wg.Wait()
	assert.False(t, overlap.Load(), "a reader and the writer held together")
}

// TestSharedWriterWithdraws: an exclusive Acquire that gives up (its ctx
// ends) withdraws its announcement at once: new readers are admitted again.
func TestSharedWriterWithdraws(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, key, time.Minute)
		done <- err
	}()
	// The waiting writer holds new readers back.
	require.Eventually(t, func() bool {
		l, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
		if err == nil {
			require.NoError(t, l.Release(ctx))
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "a waiting writer did not hold readers back")
	wcancel()
	require.ErrorIs(t, <-done, context.Canceled)
	gave := time.Now()
	var l *redlock.Lock
	require.Eventually(t, func() bool {
		l, err = c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "readers stay held back after the writer gave up")
	took := time.Since(gave)
	t.Logf("readers admitted %v after the writer gave up", took)
	assert.Less(t, took, time.Second, "the withdrawal did not take effect in a round trip or two")
	require.NoError(t, l.Release(ctx))
	require.NoError(t, r.Release(ctx))
}

// TestSharedBadInput: WithOwner with Shared, and Shared with several keys,
// are ErrInvalidArgument before anything is sent; nothing is left locked.
func TestSharedBadInput(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	_, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared(), redlock.WithOwner("req-1"))
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	_, err = c.Acquire(ctx, key, time.Minute, redlock.WithOwner("req-1"), redlock.Shared())
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	_, err = c.TryAcquireAll(ctx, []string{key, key + ":b"}, time.Minute, redlock.Shared())
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	require.True(t, errors.Is(c.Do(ctx, key, time.Minute, func(context.Context, *redlock.Lock) error { return nil },
		redlock.Shared(), redlock.WithOwner("x")), redlock.ErrInvalidArgument))
	e.requireNoKey(key)
	var nilLock *redlock.Lock
	assert.False(t, nilLock.Shared())
}

// TestSharedRenewal: a shared Lock's KeepAlive renews its share alone, by
// the nodes' clocks, and puts it back on a node that lost the key (here
// deleted by hand, as a restart without persistence would) once a quorum
// confirmed it; another reader's shorter share expires meanwhile.
func TestSharedRenewal(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	r, err := c.TryAcquire(ctx, key, 900*time.Millisecond, redlock.Shared())
	require.NoError(t, err)
	short, err := c.TryAcquire(ctx, key, 900*time.Millisecond, redlock.Shared())
	require.NoError(t, err)
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	lost := r.KeepAlive(kctx)
	require.NoError(t, e.direct[0].Del(ctx, key).Err())
	require.Eventually(t, func() bool { return e.entries(0, key) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the share was not put back on node 0")
	// short was never renewed: it is gone once its TTL passed, r stays.
	require.Eventually(t, func() bool {
		_, err := short.TTL(ctx)
		return errors.Is(err, redlock.ErrNotHeld)
	}, 10*time.Second, 10*time.Millisecond, "the unrenewed share outlived its TTL")
	time.Sleep(time.Second) // past r's first TTL: renewed, not expired
	ttl, err := r.TTL(ctx)
	require.NoError(t, err, "the renewed share")
	assert.Positive(t, ttl)
	assert.True(t, time.Now().Before(r.Until()))
	select {
	case <-lost.Done():
		t.Fatalf("KeepAlive lost the share: %v", context.Cause(lost))
	default:
	}
	stop()
	require.NoError(t, r.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestSharedInspect: Inspect reports how many shared Locks hold the key on
// a quorum and each node's shares with their remaining times; an exclusive
// holder as before.
func TestSharedInspect(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	st, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.False(t, st.Held)
	assert.Zero(t, st.Shared)

	r1, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	r2, err := c.TryAcquire(ctx, key, 20*time.Second, redlock.Shared())
	require.NoError(t, err)
	// TryAcquire returns at a quorum: node 2's write may still be on its way.
	require.Eventually(t, func() bool { return e.entries(2, key) == 2 }, 10*time.Second, time.Millisecond)
	e.proxies[2].SetBlackhole(true)
	r3, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared()) // misses node 2
	require.NoError(t, err)
	e.gaveUp(c, 2)
	e.resetFaults()
	e.reachable(2)
	st, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.True(t, st.Held)
	assert.Equal(t, 3, st.Shared)
	for i, n := range st.Nodes {
		want := 3
		if i == 2 {
			want = 2
		}
		require.Len(t, n.Shared, want, "node %d", i)
		assert.True(t, n.Held)
		assert.Empty(t, n.Holder, "no exclusive holder")
		assert.InDelta(t, time.Minute, n.TTL, float64(10*time.Second))
		var short int
		for _, s := range n.Shared {
			assert.Len(t, s.Holder, 8)
			if s.TTL < 30*time.Second {
				short++
			}
		}
		assert.Equal(t, 1, short, "node %d: r2's 20 s share", i)
	}
	ttl, err := r2.TTL(ctx)
	require.NoError(t, err)
	assert.InDelta(t, 20*time.Second, ttl, float64(5*time.Second), "r2's own share")
	for _, r := range []*redlock.Lock{r1, r2, r3} {
		require.NoError(t, r.Release(ctx))
	}
	quiet(t, c) // Release returns at a quorum: a node's delete may be on its way
	st, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.False(t, st.Held)
	assert.Zero(t, st.Shared)

	w, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, w.Token())
	st, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.True(t, st.Held)
	assert.Zero(t, st.Shared)
	assert.Equal(t, w.Token()[:8], st.Nodes[0].Holder)
	_, err = r1.TTL(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.NoError(t, w.Release(ctx))
}

// TestSharedDo: Do with Shared runs fn while holding a share, beside
// another reader, and releases it.
func TestSharedDo(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	other, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	ran := false
	require.NoError(t, c.Do(ctx, key, time.Minute, func(ctx context.Context, l *redlock.Lock) error {
		ran = l.Shared()
		return nil
	}, redlock.Shared()))
	assert.True(t, ran)
	require.NoError(t, other.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestSharedFence: with WithFencing, a shared Lock's Fence is 0 and it
// commits nothing; the exclusive holders before and after it get
// increasing fences.
func TestSharedFence(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing())
	ctx := t.Context()
	key := newKey(t)
	w1, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, w1.Release(ctx))
	r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	assert.Zero(t, r.Fence())
	require.NoError(t, r.Extend(ctx, time.Minute))
	require.NoError(t, r.Release(ctx))
	w2, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, w2.Fence(), w1.Fence())
	require.NoError(t, w2.Release(ctx))
}

// TestSharedStaleAndSkewed: a shared acquire whose clock says the validity
// was used up is refused and its share rolled back, beside another reader
// whose share stays; a released share's handle extends nothing and puts
// nothing back; an Extend racing the Release leaves no share behind; two
// readers' Acquires, Releases and Extends racing leave nothing behind once
// all are released.
func TestSharedStaleAndSkewed(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clock := &fakeClock{}
	skewed := e.client(redlock.WithClock(clock))
	c := e.client()
	ctx := t.Context()
	ttl := 10 * time.Second
	drift := time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftConst
	key := newKey(t)

	other, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	clock.set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ttl-drift) // each read jumps past the budget
	_, err = skewed.TryAcquire(ctx, key, ttl, redlock.Shared())
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Eventually(t, func() bool { return e.entries(0, key)+e.entries(1, key)+e.entries(2, key) == 3 }, 10*time.Second,
		5*time.Millisecond, "the refused share was not rolled back, or the other reader's went with it")

	l, err := c.TryAcquire(ctx, key, ttl, redlock.Shared())
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, l.Extend(ctx, ttl), redlock.ErrNotHeld)
	// Release returned at a quorum; the last node's delete lands just
	// after. Once it has, the share must stay gone.
	for i := range e.direct {
		require.Eventually(t, func() bool { return e.entries(i, key) == 1 }, 5*time.Second, 2*time.Millisecond,
			"node %d: the released share stayed", i)
	}
	time.Sleep(100 * time.Millisecond)
	for i := range e.direct {
		assert.Equal(t, 1, e.entries(i, key), "node %d: the released share came back", i)
	}
	for range 10 {
		l, err := c.TryAcquire(ctx, key, ttl, redlock.Shared())
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() { _ = l.Extend(ctx, ttl) })
		wg.Go(func() { assert.NoError(t, l.Release(ctx)) })
		wg.Wait()
		require.Eventually(t, func() bool { return e.entries(0, key)+e.entries(1, key)+e.entries(2, key) == 3 }, 10*time.Second,
			5*time.Millisecond, "a share left behind")
	}
	require.NoError(t, other.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestSharedWriterDies: a process whose exclusive Acquire waits for the
// key dies (its connections close): its announcement is renewed no more,
// and new readers are admitted again once it expired by the nodes' clocks,
// within heldBackBound (announce_test.go has the process killed).
func TestSharedWriterDies(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)

	// The writer's process: its own connections to the nodes.
	conns := e.bed.Clients(fastClients)
	writer, err := redlock.New(conns, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	require.NoError(t, writer.Warm(ctx))
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = writer.Acquire(wctx, key, time.Minute)
	}()
	require.Eventually(t, func() bool {
		l, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
		if err == nil {
			require.NoError(t, l.Release(ctx))
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "the waiting writer did not hold readers back")

	// It dies: every connection it had closes.
	for _, n := range conns {
		require.NoError(t, n.Close())
	}
	died := time.Now()
	var l *redlock.Lock
	require.Eventually(t, func() bool {
		l, err = c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
		return err == nil
	}, heldBackBound, 5*time.Millisecond, "readers stay held back after the writer died")
	t.Logf("readers admitted %v after the writer died", time.Since(died))
	require.NoError(t, l.Release(ctx))
	require.NoError(t, r.Release(ctx))
	wcancel()
	<-done
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = writer.Close(cctx)
}
