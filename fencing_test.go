package redlock_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/benchkit"
	"github.com/redlock-go/redlock/internal/redistest"
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
// back), and sometimes a holder walks away without releasing. Every fence
// handed out must exceed the previous one.
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

// BenchmarkFencedAcquireRelease prices fencing: on the same 5 nodes, one
// plain and one fenced Acquire+Release alternate in each iteration, so both
// see the same machine load. extra-p50-ns is what fencing adds to an
// uncontended acquisition and its release.
func BenchmarkFencedAcquireRelease(b *testing.B) {
	servers := redistest.StartT(b, 5)
	var nodes []redis.UniversalClient
	for _, s := range servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
		b.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	ctx := context.Background()
	newClient := func(opts ...redlock.Option) *redlock.Client {
		c, err := redlock.New(nodes, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		if err := c.Warm(ctx); err != nil {
			b.Fatal(err)
		}
		return c
	}
	plain, fenced := newClient(), newClient(redlock.WithFencing())
	op := func(c *redlock.Client, key string) time.Duration {
		start := time.Now()
		l, err := c.Acquire(ctx, key, benchTTL)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	keys := benchKeyRing("bench:fenced:" + b.Name())
	for i := range 64 {
		op(plain, keys[i])
		op(fenced, keys[i])
	}
	var p, f []time.Duration
	b.ResetTimer()
	for i := range b.N {
		key := keys[i%len(keys)]
		if i%2 == 0 {
			p = append(p, op(plain, key))
			f = append(f, op(fenced, key))
		} else {
			f = append(f, op(fenced, key))
			p = append(p, op(plain, key))
		}
	}
	b.StopTimer()
	pp, fp := benchkit.Percentile(p, 50), benchkit.Percentile(f, 50)
	b.ReportMetric(float64(pp.Nanoseconds()), "plain-p50-ns")
	b.ReportMetric(float64(fp.Nanoseconds()), "fenced-p50-ns")
	b.ReportMetric(float64((fp - pp).Nanoseconds()), "extra-p50-ns")
}
