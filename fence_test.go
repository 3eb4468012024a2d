package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/redlock-go/redlock"
)

// TestFencingCounterExample replays the sequence that breaks "each node INCRs
// on a successful SET, fence = max over the quorum" (docs/fencing.md): node 0
// sees many attempts that fail elsewhere, a holder's quorum includes node 0,
// and the next holder's quorum avoids it.
func TestFencingCounterExample(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing())
	ctx := t.Context()
	key := newKey(t)

	// Someone else holds nodes 1 and 2; attempts succeed on node 0 only and
	// fail. Under the broken scheme node 0's counter would now be 5 ahead.
	for i := 1; i <= 2; i++ {
		require.NoError(t, e.direct[i].Set(ctx, key, "other", time.Minute).Err())
	}
	for range 5 {
		_, err := c.TryAcquire(ctx, key, time.Minute)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
	}
	e.settle(c)
	c = e.client(redlock.WithFencing())
	require.NoError(t, e.direct[1].Del(ctx, key).Err())
	require.NoError(t, e.direct[2].Del(ctx, key).Err())

	// A holds {0, 1}: node 2 is cut off.
	e.proxies[2].SetRefuse(true)
	a, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	e.resetFaults()

	// B holds {1, 2}: node 0, the one that ran ahead, is cut off.
	e.proxies[0].SetRefuse(true)
	b, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, b.Fence(), a.Fence(), "the next holder got a fence no higher than the last")
	require.NoError(t, b.Release(ctx))
	e.resetFaults()

	// And C, on all nodes again, goes on from there.
	cl, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, cl.Fence(), b.Fence())
	require.NoError(t, cl.Release(ctx))
}

// TestFencingMonotonicUnderOutages takes hundreds of successive locks on one
// key from several clients while random nodes are refused, blackholed or
// lose replies, sometimes a majority of them (the attempt fails and rolls
// back, and must), and sometimes a holder walks away without releasing.
// Every fence handed out must exceed the previous one.
func TestFencingMonotonicUnderOutages(t *testing.T) {
	const n = 5
	e := newEnv(t, n, fastClients)
	var clients []*redlock.Client
	for range 3 {
		clients = append(clients, e.client(
			redlock.WithFencing(),
			redlock.WithNodeTimeout(60*time.Millisecond),
			redlock.WithCleanupTimeout(150*time.Millisecond),
		))
	}
	ctx := t.Context()
	key := newKey(t)
	rng := rand.New(rand.NewPCG(1, 2))

	var last uint64
	causes := map[string]int{}
	granted, refused := 0, 0
	for i := range 400 {
		e.resetFaults()
		down := rng.IntN(3) // a minority out: a quorum is possible
		if rng.IntN(10) < 3 {
			down = 3 + rng.IntN(2) // a majority out: the attempt must fail
		}
		for _, j := range rng.Perm(n)[:down] {
			switch rng.IntN(3) {
			case 0:
				e.proxies[j].SetRefuse(true)
			case 1:
				e.proxies[j].SetBlackhole(true)
			default:
				e.proxies[j].SetDropReplies(true)
			}
		}
		c := clients[i%len(clients)]
		l, err := c.TryAcquire(ctx, key, 200*time.Millisecond)
		if err != nil {
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			refused++
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			for _, ne := range qe.Nodes {
				causes[ne.Err.Error()]++
			}
			continue
		}
		require.Less(t, down, 3, "acquisition %d: granted with %d of %d nodes out", i, down, n)
		granted++
		require.Greater(t, l.Fence(), last, "acquisition %d: fence went back", i)
		last = l.Fence()
		if rng.IntN(4) > 0 {
			_ = l.Release(ctx)
		} else {
			// Walk away: the next holder needs the key to expire first.
			time.Sleep(time.Until(l.Until()) + 20*time.Millisecond)
		}
	}
	e.resetFaults()
	t.Logf("granted %d, refused %d, last fence %d, node causes %v", granted, refused, last, causes)
	assert.Greater(t, granted, 100, "too few grants to mean anything")
	assert.Greater(t, refused, 50, "too few refusals to mean anything")
}

// counterKey is the fencing counter's name for a key without braces.
func counterKey(key string) string { return "{" + key + "}:redlock:fence" }

// counter reads node i's fencing counter for key: 0 when it has none.
func (e *env) counter(i int, key string) uint64 {
	e.t.Helper()
	v, err := e.direct[i].Get(context.Background(), counterKey(key)).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(e.t, err)
	return v
}

// TestFencingSurvivesWipedNode replays the counterexample of docs/fencing.md
// that breaks fences made from counters alone: the only node shared by A's
// commit quorum and B's acquire quorum loses its data between them. The
// counters cannot carry A's fence to B; the wiped node's clock must.
func TestFencingSurvivesWipedNode(t *testing.T) {
	for _, wipe := range []struct {
		name string
		do   func(ctx context.Context, rc *redis.Client) error
	}{
		{"flushall", func(ctx context.Context, rc *redis.Client) error { return rc.FlushAll(ctx).Err() }},
		{"counter-evicted", nil}, // only the counter goes, as an allkeys-* policy may do
	} {
		t.Run(wipe.name, func(t *testing.T) {
			e := newEnv(t, 3, fastClients)
			c := e.client(redlock.WithFencing())
			ctx := t.Context()
			key := newKey(t)

			first, err := c.TryAcquire(ctx, key, time.Minute)
			require.NoError(t, err)
			require.NoError(t, first.Release(ctx))
			e.eventuallyNoKey(key, 5*time.Second) // Release returns at a quorum

			// A holds {0, 1}: node 2 is cut off and keeps first's counter
			// (blackholed: a refused call is retried by go-redis and could
			// land later).
			e.proxies[2].SetBlackhole(true)
			a, err := c.TryAcquire(ctx, key, time.Minute)
			require.NoError(t, err)
			e.gaveUp(c, 2)
			require.NoError(t, a.Release(ctx))
			e.resetFaults()
			e.eventuallyNoKey(key, 5*time.Second)
			e.reachable(2)
			require.Equal(t, a.Fence(), e.counter(0, key))
			require.Equal(t, a.Fence(), e.counter(1, key))
			require.Less(t, e.counter(2, key), a.Fence())

			// Node 0 loses its counter.
			if wipe.do != nil {
				require.NoError(t, wipe.do(ctx, e.direct[0]))
			} else {
				require.NoError(t, e.direct[0].Del(ctx, counterKey(key)).Err())
			}
			require.Zero(t, e.counter(0, key))

			// B holds {0, 2}: node 1, the only other keeper of A's fence,
			// is cut off.
			e.proxies[1].SetRefuse(true)
			b, err := c.TryAcquire(ctx, key, time.Minute)
			require.NoError(t, err)
			assert.Greater(t, b.Fence(), a.Fence(), "B's fence is not above A's after node 0 was wiped")
			require.NoError(t, b.Release(ctx))
			e.resetFaults()
		})
	}
}

// TestFencingCounterStillRules shows that the clock only ever raises a fence:
// a counter above every clock (as left by a node whose clock was ahead, or
// by a clock that stepped back since) still makes the next fence.
func TestFencingCounterStillRules(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing())
	ctx := t.Context()
	key := newKey(t)

	const ahead = 5_000_000_000_000_000 // µs: the year 2128, below 2^53
	// On every node: whichever quorum answers first must read it.
	for _, d := range e.direct {
		require.NoError(t, d.Set(ctx, counterKey(key), ahead, 0).Err())
	}
	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint64(ahead+1), l.Fence())
	require.NoError(t, l.Release(ctx))

	// And every node's counter was raised, ready for a later wipe.
	require.Eventually(t, func() bool {
		for i := range e.direct {
			if e.counter(i, key) != ahead+1 {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
}

// TestFencingAheadOfClockIncreases: with the counters set ahead of every
// node's clock, the clock's reading never decides a fence, and successive
// holders, of one Client and of another, each get a fence above the one
// before: a fence equal to the highest reading instead of one above it
// would give them all the same.
func TestFencingAheadOfClockIncreases(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clients := []*redlock.Client{e.client(redlock.WithFencing()), e.client(redlock.WithFencing())}
	ctx := t.Context()
	key := newKey(t)
	const ahead = 5_000_000_000_000_000 // µs: the year 2128, below 2^53
	for _, d := range e.direct {
		require.NoError(t, d.Set(ctx, counterKey(key), ahead, 0).Err())
	}
	last := uint64(ahead)
	for i := range 6 {
		c := clients[i%2]
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := c.Acquire(actx, key, time.Minute)
		cancel()
		require.NoError(t, err, "holder %d", i)
		require.Greater(t, l.Fence(), last, "holder %d's fence is not above the one before it", i)
		last = l.Fence()
		require.NoError(t, l.Release(ctx))
	}
}

// TestFencingAfterHorizon lets the counters expire with an idle key, then
// takes the lock again: the next fence comes from the clocks and is still
// above the last one.
func TestFencingAfterHorizon(t *testing.T) {
	const horizon = 200 * time.Millisecond
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing(), redlock.WithFenceHorizon(horizon))
	ctx := t.Context()
	key := newKey(t)

	var last uint64
	for round := range 3 {
		l, err := c.TryAcquire(ctx, key, time.Minute)
		require.NoError(t, err)
		require.Greater(t, l.Fence(), last, "round %d", round)
		last = l.Fence()
		require.NoError(t, l.Release(ctx))
		e.settle(c)
		c = e.client(redlock.WithFencing(), redlock.WithFenceHorizon(horizon))
		for i := range e.direct {
			pttl, err := e.direct[i].PTTL(ctx, counterKey(key)).Result()
			require.NoError(t, err)
			require.Positive(t, pttl, "node %d: the counter has no expiry", i)
			require.LessOrEqual(t, pttl, horizon)
		}
		require.Eventually(t, func() bool {
			for i := range e.direct {
				if e.counter(i, key) != 0 {
					return false
				}
			}
			return true
		}, 5*time.Second, 10*time.Millisecond, "a counter outlived its horizon")
	}
}

// TestFencingExtendRefreshesCounters: Extend keeps the counters of a held
// key alive past the horizon, and brings a counter that missed the commit up
// to the lock's fence.
func TestFencingExtendRefreshesCounters(t *testing.T) {
	const horizon = 300 * time.Millisecond
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing(), redlock.WithFenceHorizon(horizon))
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, e.direct[2].Del(ctx, counterKey(key)).Err()) // as if the commit missed node 2
	for range 6 {
		time.Sleep(horizon / 3)
		require.NoError(t, l.Extend(ctx, 5*time.Second))
	}
	for i := range e.direct {
		assert.Equal(t, l.Fence(), e.counter(i, key), "node %d", i)
	}
	require.NoError(t, l.Release(ctx))
}

// TestFencingCommitReachesLateNodes: a node whose acquire reply came after
// the quorum (and whose lane was still busy when the commit round ended)
// gets the commit in the background. Its write lands within its deadline
// (one that landed past it would change nothing, docs/late-writes.md).
func TestFencingCommitReachesLateNodes(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithFencing(), redlock.WithNodeTimeout(300*time.Millisecond))
	ctx := t.Context()
	key := newKey(t)

	e.proxies[2].SetDelay(120 * time.Millisecond)
	l, err := c.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.counter(2, key) == l.Fence() },
		5*time.Second, 5*time.Millisecond, "the late node never got the fence")
	e.resetFaults()
	require.NoError(t, l.Release(ctx))
}

// TestFencingCountersBounded takes 100 000 distinct lock names once each,
// with a short horizon: the number of keys on the nodes stays flat (bounded
// by the names used within one horizon) instead of growing by one counter
// per name ever locked, and falls to zero once the horizon has passed.
func TestFencingCountersBounded(t *testing.T) {
	const (
		names      = 100_000
		workers    = 16 // within go-redis's default pool of 10 per CPU
		horizon    = time.Second
		maxPresent = names / 4
	)
	// One node: the counters' life on a node does not depend on how many
	// there are, and the test is about 100 000 acquisitions.
	e := newEnv(t, 1, fastClients)
	c := e.client(redlock.WithFencing(), redlock.WithFenceHorizon(horizon))
	ctx := t.Context()
	prefix := newKey(t) + ":"

	dbsize := func() int64 {
		var most int64
		for _, d := range e.direct {
			n, err := d.DBSize(context.Background()).Result()
			if err != nil {
				return -1 // read again at the next sample
			}
			most = max(most, n)
		}
		return most
	}
	usedMemory := func() int64 {
		info, err := e.direct[0].InfoMap(ctx, "memory").Result()
		require.NoError(t, err)
		n, err := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
		require.NoError(t, err)
		return n
	}
	require.Zero(t, dbsize())
	memBefore := usedMemory()

	var next, releaseFailed atomic.Int64
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	var stopOnce sync.Once
	stopSampling := func() { stopOnce.Do(func() { close(stop); <-sampled }) }
	defer stopSampling()
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				n := dbsize()
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
			}
		}
	}()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for range workers {
		g.Go(func() error {
			for i := next.Add(1); i <= names; i = next.Add(1) {
				// Acquire, not TryAcquire: on a loaded machine an attempt
				// can miss its node deadline, and the name must still be
				// taken. A short TTL: a lock whose release failed goes too,
				// and the tombstone each Release leaves lives the TTL (at
				// most 2 s, docs/late-writes.md), so that the keys counted
				// are the counters, a horizon's worth, and a fifth of a
				// second's tombstones.
				l, err := c.Acquire(gctx, prefix+strconv.FormatInt(i, 10), 200*time.Millisecond)
				if err != nil {
					return err
				}
				if err := l.Release(gctx); err != nil {
					releaseFailed.Add(1)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	took := time.Since(start)
	stopSampling()
	memAfter := usedMemory()
	t.Logf("%d names in %v (%d releases failed, their keys expire); peak keys on a node %d; last %v of names held %+d bytes on node 0 (%.0f bytes per name)",
		names, took.Round(time.Millisecond), releaseFailed.Load(), peak.Load(), horizon, memAfter-memBefore,
		float64(memAfter-memBefore)/min(float64(names), float64(names)*horizon.Seconds()/took.Seconds()))
	assert.LessOrEqual(t, peak.Load(), int64(maxPresent), "the counters piled up")
	require.Eventually(t, func() bool { return dbsize() == 0 }, 10*time.Second, 50*time.Millisecond,
		"counters outlived their horizon")
}
