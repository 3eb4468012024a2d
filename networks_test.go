package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/testbed"
)

// The networks Redlock runs on: masters in other zones and regions, each
// behind a fault proxy that adds its latency to every request, with the
// Client's default options (no WithNodeTimeout): each node's deadline is
// learned from its replies (docs/algorithm.md).

// farBed starts one server per delay, each behind a proxy that delays its
// requests by it, and a Client with default options over them.
func farBed(t *testing.T, delays ...time.Duration) (*testbed.Bed, *redlock.Client) {
	t.Helper()
	bed := testbed.Start(t, len(delays))
	for i, d := range delays {
		bed.Proxies[i].SetDelay(d)
	}
	return bed, bedClient(t, bed)
}

// bedClient is a Client with opts over bed's proxied nodes, closed when
// the test ends.
func bedClient(t *testing.T, bed *testbed.Bed, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(bed.Clients(nil), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// Three masters 60 ms away: Acquire, Extend, Release and a Do kept alive
// over three TTLs, with default options, within a caller's 3 s deadline.
func TestNetworkMasters60ms(t *testing.T) {
	const d = 60 * time.Millisecond
	_, c := farBed(t, d, d, d)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		l, err := c.Acquire(ctx, "net60", 10*time.Second)
		require.NoError(t, err, "acquire %d", i)
		require.NoError(t, l.Extend(ctx, 10*time.Second), "extend %d", i)
		require.NoError(t, l.Release(ctx), "release %d", i)
		cancel()
	}
	const ttl = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Do(ctx, "net60-do", ttl, func(ctx context.Context, l *redlock.Lock) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(3 * ttl):
		}
		if !time.Now().Before(l.Until()) {
			return errors.New("the lease let the lock's validity end")
		}
		return nil
	})
	require.NoError(t, err)
	// Every node answered in time: none is shown failing, and each one's
	// latency is learned near its 60 ms.
	for _, n := range c.Nodes() {
		require.Zero(t, n.ConsecutiveFailures, "node %d: %v", n.Index, n.LastError)
		require.GreaterOrEqual(t, n.Latency, d, "node %d", n.Index)
	}
}

// Three masters 150 ms away, a 10 s TTL: TryAcquire's one attempt and
// Acquire both succeed with default options.
func TestNetworkMasters150ms(t *testing.T) {
	const d = 150 * time.Millisecond
	_, c := farBed(t, d, d, d)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryAcquire(ctx, "net150-try", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	for i := range 3 {
		l, err := c.Acquire(ctx, "net150", 10*time.Second)
		require.NoError(t, err, "acquire %d", i)
		require.NoError(t, l.Release(ctx), "release %d", i)
	}
}

// Five masters at 1/1/40/40/150 ms: every call succeeds, once and in a
// row.
func TestNetworkMixedDistances(t *testing.T) {
	ms := time.Millisecond
	_, c := farBed(t, ms, ms, 40*ms, 40*ms, 150*ms)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		l, err := c.TryAcquire(ctx, "netmix", 10*time.Second)
		require.NoError(t, err, "try-acquire %d", i)
		require.NoError(t, l.Extend(ctx, 10*time.Second), "extend %d", i)
		require.NoError(t, l.Release(ctx), "release %d", i)
	}
}

// One far master of five: Acquire returns once the near quorum answered,
// whatever the far one does. Its requests are held at its proxy until
// Acquire has returned, so the far node cannot have answered; and it is
// given a deadline of its own, longer than the near ones'.
func TestNetworkOneFarMaster(t *testing.T) {
	bed, c := farBed(t, 0, 0, 0, 0, 150*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The far node learned first, so that its deadline is its own.
	for range 5 {
		l, err := c.Acquire(ctx, "netfar-warm", 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	far := c.Nodes()[4]
	require.GreaterOrEqual(t, far.Latency, 150*time.Millisecond)
	for _, n := range c.Nodes()[:4] {
		require.Less(t, n.Latency, far.Latency/2, "node %d", n.Index)
	}
	took := make([]time.Duration, 0, 20)
	for i := range 20 {
		held := bed.Proxies[4].HoldNext([]byte("evalsha"))
		start := time.Now()
		l, err := c.Acquire(ctx, "netfar", 10*time.Second)
		took = append(took, time.Since(start))
		require.NoError(t, err, "acquire %d", i)
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatalf("acquire %d: the far node's write never reached its proxy", i)
		}
		require.Equal(t, 1, bed.Proxies[4].HeldCount(), "acquire %d returned, the far node's write still held", i)
		bed.Proxies[4].ReleaseHeld()
		require.NoError(t, l.Release(ctx), "release %d", i)
	}
	slices.Sort(took)
	t.Logf("acquire with one master of five 150 ms away: p50 %v, max %v (deadlines %v)", took[len(took)/2], took[len(took)-1], c.NodeTimeouts(10*time.Second))
}

// A node whose latency jumps from 1 ms to 80 ms mid-run, and back: of
// two such nodes of three (so that every quorum needs one), a TryAcquire
// fails at most on the first attempt after the jump, whose deadline was
// still a loopback one; and a lock kept alive throughout is never lost,
// since a quorum answers well within its TTL.
func TestNetworkLatencyJump(t *testing.T) {
	bed, c := farBed(t, time.Millisecond, time.Millisecond, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kept, err := c.Acquire(ctx, "netjump-kept", time.Second)
	require.NoError(t, err)
	kctx := kept.KeepAlive(ctx)

	run := func(phase string, n int) (failed []int) {
		for i := range n {
			// A key of its own: the previous Release returned once a
			// quorum deleted, and its delete on the other node may
			// still be on its way.
			l, err := c.TryAcquire(ctx, fmt.Sprintf("netjump-%s-%d", phase, i), 10*time.Second)
			if err != nil {
				t.Logf("%s %d: %v %v", phase, i, err, c.NodeTimeouts(10*time.Second))
				if nearSilent(err) {
					// The near node, whose latency never changed, did
					// not confirm within its loopback deadline either:
					// the machine stalled (a loaded CI), not the
					// network, and no estimate of a latency is at fault.
					continue
				}
				failed = append(failed, i)
				continue
			}
			require.NoError(t, l.Release(ctx))
		}
		return failed
	}
	require.Empty(t, run("near", 20), "at 1ms")
	bed.Proxies[0].SetDelay(80 * time.Millisecond)
	bed.Proxies[1].SetDelay(80 * time.Millisecond)
	failed := run("far", 20)
	require.LessOrEqual(t, len(failed), 1, "failures after the jump: %v", failed)
	if len(failed) == 1 {
		require.Equal(t, 0, failed[0], "a failure past the first attempt after the jump")
	}
	bed.Proxies[0].SetDelay(time.Millisecond)
	bed.Proxies[1].SetDelay(time.Millisecond)
	require.Empty(t, run("back", 20), "back at 1ms")
	require.NoError(t, kctx.Err(), "the kept lock: %v", context.Cause(kctx))
	require.NoError(t, kept.Release(ctx))
}

// A renewal that goes out right after its nodes' latency jumped, before
// anything taught the jump, still lands: KeepAlive's renewals wait for
// each node the TTL's budget up to a second, not the deadline learned at
// loopback. A renewal that failed at that deadline left its retry too
// little of the lease: each timed-out call closes its connection, and the
// retry paid a new one's set-up (three round trips) before its own, so a
// 1 s TTL was lost beside a loaded machine's stalls though every node
// answered within a tenth of it. A 2 s TTL here leaves room for a loaded
// machine's stalls.
func TestNetworkJumpBeforeRenewal(t *testing.T) {
	bed := testbed.Start(t, 3)
	for _, p := range bed.Proxies {
		p.SetDelay(time.Millisecond)
	}
	var failures atomic.Int32
	c := bedClient(t, bed, redlock.WithRenewErrorHandler(func(l *redlock.Lock, err error) {
		failures.Add(1)
		t.Logf("renewal failed: %v", err)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.Warm(ctx))
	kept, err := c.Acquire(ctx, "netjump-renewal", 2*time.Second)
	require.NoError(t, err)
	kctx := kept.KeepAlive(ctx)
	// Right after a renewal, so that the jump comes before the next one
	// (a third of the TTL later, a tenth of that earlier at most) and
	// nothing else is sent meanwhile. A renewal sent at the deadline
	// learned at loopback fails (the hook sees it), whichever renewal it
	// is; the lease itself would survive that at this TTL.
	until := kept.Until()
	require.Eventually(t, func() bool { return kept.Until().After(until) }, 10*time.Second, time.Millisecond, "no renewal")
	time.Sleep(500 * time.Millisecond)
	bed.Proxies[0].SetDelay(120 * time.Millisecond)
	bed.Proxies[1].SetDelay(120 * time.Millisecond)
	until = kept.Until()
	require.Eventually(t, func() bool { return kept.Until().After(until) || kctx.Err() != nil }, 10*time.Second, time.Millisecond)
	require.NoError(t, kctx.Err(), "the kept lock: %v", context.Cause(kctx))
	require.Zero(t, failures.Load(), "the renewal after the jump failed")
	// And it stays kept at that distance.
	time.Sleep(3 * time.Second)
	require.NoError(t, kctx.Err(), "the kept lock: %v", context.Cause(kctx))
	require.NoError(t, kept.Release(ctx))
}

// nearSilent reports whether err, a failed attempt of
// TestNetworkLatencyJump, shows node 2, the near one, not confirming.
func nearSilent(err error) bool {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	for _, n := range qe.Nodes {
		if n.Node == 2 {
			return true // a key of its own: nothing but a stall keeps it from confirming
		}
	}
	return false
}

// A TTL too short for the nodes' latency is refused with an error that
// says so, naming the TTL, the latency and WithNodeTimeout, not a "no
// reply" blamed on healthy nodes. It matches ErrNotAcquired and not
// ErrInvalidArgument: the TTL was valid before the network slowed and is
// again once it speeds up, so Acquire keeps trying, and the estimate,
// sampled by probes while nothing else is sent, follows the nodes back
// down. The first calls, before any node's latency is known, may fail
// otherwise.
func TestNetworkTTLTooShort(t *testing.T) {
	const d = 150 * time.Millisecond
	bed, c := farBed(t, d, d, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tooShort := func(err error) bool { return err != nil && strings.Contains(err.Error(), "too short") }
	var err error
	for i := range 5 {
		_, err = c.TryAcquire(ctx, "netshort", 100*time.Millisecond)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "try %d", i)
		if tooShort(err) {
			break
		}
		time.Sleep(2 * d) // the replies given up on teach the latency
	}
	require.True(t, tooShort(err), "never refused as too short: %v", err)
	require.NotErrorIs(t, err, redlock.ErrInvalidArgument)
	for _, want := range []string{"too short", "100ms", "latency", "WithNodeTimeout"} {
		require.True(t, strings.Contains(err.Error(), want), "%q lacks %q", err, want)
	}
	// Acquire tries until its caller's deadline, as for any failed
	// attempt, and says why it failed.
	actx, acancel := context.WithTimeout(ctx, time.Second)
	_, err = c.Acquire(actx, "netshort", 100*time.Millisecond)
	acancel()
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NotErrorIs(t, err, redlock.ErrInvalidArgument)
	require.True(t, tooShort(err), "%v", err)
	// A TTL long enough works on the same nodes.
	l, err := c.TryAcquire(ctx, "netshort", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	// The nodes come near once the calls above are over: the short TTL
	// works again within a few attempts, though nothing of a refused
	// attempt is sent.
	require.Eventually(t, func() bool {
		for _, n := range c.Nodes() {
			if n.InFlight > 0 || n.PendingCleanups > 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond)
	for i := range bed.Proxies {
		bed.Proxies[i].SetDelay(0)
	}
	// TryAcquire, which sends nothing else: a refused attempt's probes
	// are all the estimate learns from.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		l, err = c.TryAcquire(ctx, "netshort-near", 100*time.Millisecond)
		if err == nil {
			t.Logf("the short TTL taken at attempt %d after the nodes came near", i)
			break
		}
		require.True(t, time.Now().Before(deadline), "still failing 20s after the nodes came near: %v %v", err, c.Nodes())
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, l.Release(ctx))
}

// A KeepAlive renewal, and its retry after a failed one, waits longer for
// each node than its learned deadline, so that a node whose latency
// jumped is reached; but no longer than a backed-off deadline's second: each write carries
// its deadline, and a Release after it leaves a refusal on the nodes until
// then. Waiting the TTL's whole budget (half the validity, 4.9 s for a
// 10 s TTL) left refusals living seconds after the Release: a fresh
// clone's nemesis found one past its 2 s bound.
func TestRetriedRenewalRefusalsShort(t *testing.T) {
	bed := testbed.Start(t, 3)
	c := bedClient(t, bed, redlock.WithRenewInterval(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Warm(ctx))
	l, err := c.Acquire(ctx, "retried-renewal", 10*time.Second)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	// Two of three nodes silent: the next renewal fails, and the retries
	// write to them under the retry's longer deadline.
	bed.Proxies[0].SetBlackhole(true)
	bed.Proxies[1].SetBlackhole(true)
	time.Sleep(1500 * time.Millisecond)
	bed.Proxies[0].SetBlackhole(false)
	bed.Proxies[1].SetBlackhole(false)
	// A renewal confirmed by all three again: then the Release.
	until := l.Until()
	require.Eventually(t, func() bool { return l.Until().After(until) }, 10*time.Second, 10*time.Millisecond, "no renewal after the heal")
	require.NoError(t, kctx.Err())
	require.NoError(t, l.Release(ctx))
	refusals := 0
	for i, d := range bed.Direct {
		keys, err := d.Keys(ctx, "retried-renewal*:redlock:late:*").Result()
		require.NoError(t, err)
		refusals += len(keys)
		for _, k := range keys {
			ttl, err := d.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.LessOrEqual(t, ttl, 1500*time.Millisecond, "node %d: refusal %s lives %v after the Release", i, k, ttl)
		}
	}
	// The retry's writes may still land when the Release runs: it leaves
	// refusals, whose life is what is judged.
	require.NotZero(t, refusals, "the Release left no refusal")
}
