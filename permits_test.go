package redlock_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// TestPermits: n holders, then a refused (n+1)-th; each holds its own
// slot; a Release lets a waiter in; with a minority node blackholed, slow
// or dropping replies.
func TestPermits(t *testing.T) {
	for _, fault := range sharedFaults {
		t.Run(fault.name, func(t *testing.T) {
			e := newEnv(t, 3, fastClients)
			c1 := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
			c2 := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
			ctx := t.Context()
			key := newKey(t)
			fault.set(e)
			const n = 3
			var held []*redlock.Lock
			slots := map[int]bool{}
			for i := range n {
				c := []*redlock.Client{c1, c2}[i%2]
				l, err := c.TryAcquire(ctx, key, time.Minute, redlock.Permits(n))
				require.NoError(t, err, "permit %d", i)
				slot, ok := l.Permit()
				require.True(t, ok)
				assert.False(t, slots[slot], "slot %d given twice", slot)
				slots[slot] = true
				held = append(held, l)
			}
			_, err := c2.TryAcquire(ctx, key, time.Minute, redlock.Permits(n))
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "the (n+1)-th")
			require.NotErrorIs(t, err, redlock.ErrInvalidArgument)
			require.NotErrorIs(t, err, redlock.ErrUnavailable)

			// A waiter gets the permit a Release frees, soon after.
			got := make(chan *redlock.Lock, 1)
			go func() {
				l, err := c1.Acquire(ctx, key, time.Minute, redlock.Permits(n))
				assert.NoError(t, err)
				got <- l
			}()
			select {
			case <-got:
				t.Fatal("a waiter got a permit while n were held")
			case <-time.After(300 * time.Millisecond):
			}
			require.NoError(t, held[1].Extend(ctx, time.Minute))
			freed, _ := held[1].Permit()
			released := time.Now()
			require.NoError(t, held[1].Release(ctx))
			var w *redlock.Lock
			select {
			case w = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter never got the freed permit")
			}
			t.Logf("the waiter got the permit %v after the Release", time.Since(released))
			slot, _ := w.Permit()
			assert.Equal(t, freed, slot, "the freed slot")
			held[1] = w
			for _, l := range held {
				require.NoError(t, l.Release(ctx))
			}
			e.resetFaults()
			e.eventuallyNoKey(key, 10*time.Second)
		})
	}
}

// TestPermitsCrashedHolder: a holder that never releases (its process
// died) keeps its permit only until its own TTL, by the nodes' clocks.
func TestPermitsCrashedHolder(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	_, err := c.TryAcquire(ctx, key, 700*time.Millisecond, redlock.Permits(2)) // never released
	require.NoError(t, err)
	live, err := c.TryAcquire(ctx, key, time.Minute, redlock.Permits(2))
	require.NoError(t, err)
	_, err = c.TryAcquire(ctx, key, time.Minute, redlock.Permits(2))
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	start := time.Now()
	l, err := c.Acquire(ctx, key, time.Minute, redlock.Permits(2))
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	st, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Permits)
	require.NoError(t, l.Release(ctx))
	require.NoError(t, live.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestPermitsMismatch: while permits hold a key, an acquire with another
// count, shared or exclusive, fails at once with ErrInvalidArgument, and so
// does a count out of range or with WithOwner; nothing is left locked. An
// exclusive Lock's key refuses permits the same way.
func TestPermitsMismatch(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	for _, bad := range [][]redlock.AcquireOption{
		{redlock.Permits(0)}, {redlock.Permits(-1)}, {redlock.Permits(redlock.MaxPermits + 1)},
		{redlock.Permits(2), redlock.WithOwner("o")}, {redlock.Permits(2), redlock.Shared()},
	} {
		_, err := c.TryAcquire(ctx, key, time.Minute, bad...)
		require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	}
	_, err := c.TryAcquireAll(ctx, []string{key, key + ":b"}, time.Minute, redlock.Permits(2))
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	e.requireNoKey(key)

	p, err := c.TryAcquire(ctx, key, time.Minute, redlock.Permits(2))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		opts  []redlock.AcquireOption
		found string // what the nodes say holds the key
	}{
		"another count": {[]redlock.AcquireOption{redlock.Permits(3)}, "held by Permits(2)"},
		"exclusive":     {nil, "held by permits"},
		"shared":        {[]redlock.AcquireOption{redlock.Shared()}, "held by permits"},
	} {
		start := time.Now()
		_, err := c.Acquire(ctx, key, time.Minute, tc.opts...) // Acquire: it must not wait
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, name)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, name)
		assert.Contains(t, err.Error(), tc.found, name)
		assert.Less(t, time.Since(start), 2*time.Second, "%s: waited", name)
	}
	_, err = c.TryAcquireAll(ctx, []string{key, key + ":b"}, time.Minute)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	st, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Permits, "the refused acquires took nothing")
	require.NoError(t, p.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)

	w, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	_, err = c.Acquire(ctx, key, time.Minute, redlock.Permits(2))
	require.ErrorIs(t, err, redlock.ErrInvalidArgument, "permits on an exclusive Lock's key")
	assert.Contains(t, err.Error(), "held by an exclusive lock")
	require.NoError(t, w.Release(ctx))
	r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)
	_, err = c.Acquire(ctx, key, time.Minute, redlock.Permits(2))
	require.ErrorIs(t, err, redlock.ErrInvalidArgument, "permits on a shared key")
	assert.Contains(t, err.Error(), "held by shared locks")
	require.NoError(t, r.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestPermitsAtMostN: several Clients hammer a key with Permits(3) while a
// minority node is blackholed, then slow, then drops replies: at no time
// do more than 3 hold by their validity, and every holder's slot is its
// own.
func TestPermitsAtMostN(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	var clients []*redlock.Client
	for range 4 {
		clients = append(clients, e.client(redlock.WithNodeTimeout(200*time.Millisecond)))
	}
	key := newKey(t)
	const n = 3
	var inside, most atomic.Int32
	var bySlot [n]atomic.Int32
	var wrong atomic.Bool
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	acquired := atomic.Int32{}
	for i := range 8 {
		c := clients[i%len(clients)]
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := c.Acquire(ctx, key, 2*time.Second, redlock.Permits(n))
				if err != nil {
					continue
				}
				acquired.Add(1)
				slot, _ := l.Permit()
				in := inside.Add(1)
				if bySlot[slot].Add(1) != 1 {
					wrong.Store(true)
				}
				for {
					m := most.Load()
					if in <= m || most.CompareAndSwap(m, in) {
						break
					}
				}
				time.Sleep(20 * time.Millisecond)
				bySlot[slot].Add(-1)
				// Counted out before the Release, while still valid.
				if time.Now().After(l.Until()) {
					wrong.Store(true)
				}
				inside.Add(-1)
				_ = l.Release(context.Background())
			}
		})
	}
	for _, f := range []func(){
		func() { e.proxies[4].SetBlackhole(true) },
		func() { e.proxies[3].SetDelay(100 * time.Millisecond) },
		func() { e.proxies[1].SetDropReplies(true) },
	} {
		e.resetFaults()
		f()
		time.Sleep(1500 * time.Millisecond)
	}
	e.resetFaults()
	cancel()
	wg.Wait()
	t.Logf("%d permits taken, at most %d at once", acquired.Load(), most.Load())
	assert.LessOrEqual(t, most.Load(), int32(n))
	assert.False(t, wrong.Load(), "a slot held twice, or a holder past its validity")
	assert.Positive(t, acquired.Load())
}

// TestPermitsMajorityCountingControl is the negative control: the natural
// design, in which each node admits while it has fewer than n holders and
// a majority of nodes wins, run here in the test on the same 5 nodes,
// admits 3 holders for n = 2, each on a different majority (nodes {0,1,2},
// {0,3,4}, {1,2,3}: no node has more than 2). The library's permits, given
// the same partitions, admit 2.
func TestPermitsMajorityCountingControl(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	ctx := t.Context()
	const n = 2
	majorities := [][]int{{0, 1, 2}, {0, 3, 4}, {1, 2, 3}}
	cut := func(reach []int) {
		e.resetFaults()
		for i := range e.proxies {
			if !containsInt(reach, i) {
				e.proxies[i].SetBlackhole(true)
			}
		}
	}

	// The natural design: a sorted set of holders per node, counted.
	count := redis.NewScript(`
local c = redis.call('ZCARD', KEYS[1])
if c >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 0, ARGV[2])
return 1`)
	key := newKey(t)
	admitted := 0
	for h, reach := range majorities {
		votes := 0
		for _, i := range reach {
			ok, err := count.Run(ctx, e.direct[i], []string{key + ":naive"}, n, "holder"+strconv.Itoa(h)).Int()
			require.NoError(t, err)
			votes += ok
		}
		if votes >= 3 {
			admitted++
		}
	}
	assert.Equal(t, n+1, admitted, "the majority-counting design admits n+1 holders: the control sees the violation")

	// The library, given the same partitions: a Client each, warm before
	// the partitions start.
	var clients []*redlock.Client
	for range majorities {
		clients = append(clients, e.client(redlock.WithNodeTimeout(200*time.Millisecond)))
	}
	var held []*redlock.Lock
	for h, reach := range majorities {
		cut(reach)
		for _, i := range reach {
			e.reachable(i)
		}
		c := clients[h]
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := c.Acquire(actx, key, time.Minute, redlock.Permits(n))
		cancel()
		if err == nil {
			held = append(held, l)
		} else {
			t.Logf("holder %d on nodes %v: %v", h, reach, err)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
		}
	}
	e.resetFaults()
	assert.LessOrEqual(t, len(held), n, "the library admitted more than n")
	assert.Len(t, held, n, "the library admits n: the first two each find a free slot on a majority")
	for _, l := range held {
		require.NoError(t, l.Release(ctx))
	}
}

func containsInt(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestPermitsRenewal: a permit's KeepAlive renews it alone and puts it back
// in its slot on a node that lost the key; TTL and Inspect report it;
// Until moves with each renewal.
func TestPermitsRenewal(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, 900*time.Millisecond, redlock.Permits(4))
	require.NoError(t, err)
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	lost := l.KeepAlive(kctx)
	// other must hold on every node before node 0 is wiped, to keep a
	// quorum on nodes 1 and 2. TryAcquire returns at a quorum: the last
	// node's write may still be on its way, and on a loaded machine it
	// can miss its deadline and never go out; other is then taken again.
	var other *redlock.Lock
	for try := 1; other == nil; try++ {
		require.LessOrEqual(t, try, 5, "other's permit never reached every node")
		o, err := c.TryAcquire(ctx, key, time.Minute, redlock.Permits(4))
		require.NoError(t, err)
		everywhere := func() bool {
			for i := range e.direct {
				if e.entries(i, key) != 2 {
					return false
				}
			}
			return true
		}
		for end := time.Now().Add(5 * time.Second); other == nil && time.Now().Before(end); time.Sleep(time.Millisecond) {
			if everywhere() {
				other = o
			}
		}
		if other == nil {
			require.NoError(t, o.Release(ctx))
		}
	}
	require.NoError(t, e.direct[0].Del(ctx, key).Err())
	require.Eventually(t, func() bool { return e.entries(0, key) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the permit was not put back on node 0")
	time.Sleep(time.Second)
	ttl, err := l.TTL(ctx)
	require.NoError(t, err)
	assert.Positive(t, ttl)
	select {
	case <-lost.Done():
		t.Fatalf("KeepAlive lost the permit: %v", context.Cause(lost))
	default:
	}
	st, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Permits)
	assert.Equal(t, 4, st.Nodes[1].Count)
	require.Len(t, st.Nodes[1].Permits, 2)
	s1, _ := l.Permit()
	s2, _ := other.Permit()
	assert.NotEqual(t, s1, s2)
	stop()
	require.NoError(t, l.Release(ctx))
	require.NoError(t, other.Release(ctx))
	e.eventuallyNoKey(key, 10*time.Second)
	var nilLock *redlock.Lock
	_, ok := nilLock.Permit()
	assert.False(t, ok)
	x, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	_, ok = x.Permit()
	assert.False(t, ok)
	require.NoError(t, x.Release(ctx))
	ran := -1
	require.NoError(t, c.Do(ctx, key, time.Minute, func(_ context.Context, l *redlock.Lock) error {
		ran, _ = l.Permit()
		return nil
	}, redlock.Permits(2)))
	assert.Equal(t, 0, ran, "Do held the first free slot")
	e.eventuallyNoKey(key, 10*time.Second)
}
