package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

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

	start := time.Now()
	err = l.Release(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.Less(t, time.Since(start), redlock.DefaultCleanupTimeout/2,
		"two refusals decide the outcome: Release has no confirmation to wait for")
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

// TestReleaseUnconfirmedOrNotHeld: a Release that no quorum confirmed says
// which it was. Nodes that did not answer, with too few refusals to prove the
// lock gone, leave it unconfirmed; refusals from enough nodes, or a validity
// that ended before Release began, mean it was not held.
func TestReleaseUnconfirmedOrNotHeld(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithCleanupTimeout(200*time.Millisecond))
	ctx := t.Context()
	absent := func(i int) func(key string) {
		return func(key string) { require.NoError(t, e.direct[i].Del(ctx, key).Err()) }
	}
	taken := func(i int) func(key string) {
		return func(key string) { require.NoError(t, e.direct[i].Set(ctx, key, "other", time.Minute).Err()) }
	}
	silent := func(i int) func(string) { return func(string) { e.proxies[i].SetBlackhole(true) } }
	for _, tc := range []struct {
		name        string
		ttl         time.Duration
		expired     bool // Release begins after Until
		faults      []func(key string)
		want, not   error
		unavailable bool
	}{
		{"a quorum silent", time.Minute, false, []func(string){silent(0), silent(1)}, redlock.ErrReleaseUnconfirmed, redlock.ErrNotHeld, true},
		{"one absent, one silent", time.Minute, false, []func(string){absent(0), silent(1)}, redlock.ErrReleaseUnconfirmed, redlock.ErrNotHeld, false},
		{"a quorum refused, one silent", time.Minute, false, []func(string){absent(0), taken(1), silent(2)}, redlock.ErrNotHeld, redlock.ErrReleaseUnconfirmed, false},
		{"expired", 300 * time.Millisecond, true, nil, redlock.ErrNotHeld, redlock.ErrReleaseUnconfirmed, false},
		{"expired, a quorum silent", 300 * time.Millisecond, true, []func(string){silent(0), silent(1)}, redlock.ErrNotHeld, redlock.ErrReleaseUnconfirmed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			l, err := c.TryAcquire(ctx, key, tc.ttl)
			require.NoError(t, err)
			e.awaitHolders(key, l.Token())
			if tc.expired {
				// Past the Lock's validity, and past the nodes' expiry too:
				// a node sets the key a little after the Lock's clock
				// started, so its copy may outlive Until by the time the
				// SET took to arrive, and a delete that finds it there is
				// a release that confirms.
				time.Sleep(time.Until(l.Until()) + 10*time.Millisecond)
				e.eventuallyNoKey(key, 3*time.Second)
			}
			t.Cleanup(e.resetFaults) // before the next case, whatever this one's outcome
			for _, f := range tc.faults {
				f(key)
			}
			err = l.Release(ctx)
			require.ErrorIs(t, err, tc.want)
			require.NotErrorIs(t, err, tc.not)
			assert.Equal(t, tc.unavailable, errors.Is(err, redlock.ErrUnavailable), "matches ErrUnavailable: %v", err)
			requireTruthful(t, err)
			e.resetFaults()
			for i := range e.direct {
				if e.value(i, key) == "other" {
					require.NoError(t, e.direct[i].Del(ctx, key).Err())
				}
			}
			e.eventuallyNoKey(key, 3*time.Second)
		})
	}
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

// TestExtendReleaseRace: a keep-alive goroutine extends while the holder
// releases. Extend must never bring the key back once Release has started.
func TestExtendReleaseRace(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	for round := range 40 {
		key := fmt.Sprintf("%s:%d", newKey(t), round)
		l, err := c.TryAcquire(ctx, key, 10*time.Second)
		require.NoError(t, err)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = l.Extend(ctx, 10*time.Second)
			}
		})
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		require.NoError(t, l.Release(ctx), "round %d", round)
		close(stop)
		wg.Wait()
		require.NoError(t, l.Release(ctx), "a second Release")
		e.eventuallyNoKey(key, 2*time.Second)
		time.Sleep(20 * time.Millisecond) // a late Extend would land now
		e.requireNoKey(key)
	}
}

// TestFailedExtendMovesUntil: an Extend to a shorter TTL fails because three
// of five nodes answer late, but its writes land: Until must not be later
// than the expiry they set.
func TestFailedExtendMovesUntil(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	// A node that ran an extension past its deadline (a loaded machine
	// can hold a write up that long) changed nothing, and says so.
	var late sync.Map       // node -> true: refused an extension as late
	var extendErrs sync.Map // node -> the extension's errors there, for the failure message
	c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithHooks(redlock.Hooks{
		NodeError: func(ev redlock.Event) {
			if ev.Op == "extend" && errors.Is(ev.Err, redlock.ErrLate) {
				late.Store(ev.Node, true)
			}
			if ev.Op == "extend" {
				prev, _ := extendErrs.LoadOrStore(ev.Node, "")
				extendErrs.Store(ev.Node, fmt.Sprintf("%s[%v]", prev, ev.Err))
			}
		},
	}))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	scripts := func(i int) int { return e.calls(i, "evalsha") + e.calls(i, "eval") }
	var before [3]int
	for i, p := range e.proxies[:3] {
		before[i] = scripts(i)
		p.SetDelay(150 * time.Millisecond)
	}
	start := time.Now()
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrNotHeld)
	assert.False(t, l.Until().After(start.Add(time.Second)), "Until %v is later than the 1s the nodes now apply", time.Until(l.Until()))
	e.resetFaults()
	// The premise: the extension's writes reached the slow nodes, each
	// extending the key or, where one came past its deadline, refused as
	// late and changing nothing. The refusal is not seen where the client
	// had given up on the reply, and a key the extension set to 1 s may be
	// gone by the time the last node runs it: the scripts' runs are the
	// evidence.
	reached := func() bool {
		for i := range 3 {
			if scripts(i) <= before[i] {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(2 * time.Second); !reached(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			var b strings.Builder
			for i := range 3 {
				errs, _ := extendErrs.Load(i)
				fmt.Fprintf(&b, "; node %d: %d scripts run since the extension, PTTL %v, the extension's errors there: %v",
					i, scripts(i)-before[i], e.direct[i].PTTL(ctx, key).Val(), errs)
			}
			t.Fatalf("the extension should reach the slow nodes%s", b.String())
		}
	}
	for i := range 3 {
		if _, refused := late.Load(i); refused {
			assert.Greater(t, e.direct[i].PTTL(ctx, key).Val(), time.Second, "node %d refused the extension as late, which changed nothing", i)
		}
	}

	// Two Extends at once with different TTLs: whatever order they reach
	// the nodes in, a quorum keeps the key at least until Until.
	l, err = c.TryAcquire(ctx, newKey(t), 10*time.Second)
	require.NoError(t, err)
	for range 20 {
		var wg sync.WaitGroup
		for _, ttl := range []time.Duration{10 * time.Second, time.Second} {
			wg.Go(func() { _ = l.Extend(ctx, ttl) })
		}
		wg.Wait()
		until := l.Until()
		holding := 0
		for i := range e.direct {
			if ttl := e.direct[i].PTTL(ctx, l.Key()).Val(); ttl > 0 && !time.Now().Add(ttl).Before(until) {
				holding++
			}
		}
		require.GreaterOrEqual(t, holding, c.Quorum(), "fewer than a quorum keep the key until Until")
	}
	require.NoError(t, l.Release(ctx))
}

// TestExtendAfterMajorityLoss: the key is lost on three of five nodes,
// another client takes the lock and releases it; our Extend must report the
// loss, not re-create the keys.
func TestExtendAfterMajorityLoss(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	for i := range 3 {
		require.NoError(t, e.direct[i].Del(ctx, key).Err())
	}
	other, err := e.client().TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err, "the lost majority lets another client in")
	require.NoError(t, other.Release(ctx))
	require.Eventually(t, func() bool { return e.holders(key, other.Token()) == 0 }, 2*time.Second, time.Millisecond)

	err = l.Extend(ctx, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.LessOrEqual(t, qe.OK, 2, "only the two nodes that kept our value may confirm")
	for i := range 3 {
		assert.Empty(t, e.value(i, key), "Extend re-created the key on node %d", i)
	}
}

// TestReleaseAndNilSmalls covers the smaller items: a failed Release still
// stops the lock and a later Release reports the background cleanup's
// outcome; concurrent Releases agree; nil locks do not panic; a retry with
// no wait is refused; per-node errors are exported ones.
func TestReleaseAndNilSmalls(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithCleanupTimeout(100*time.Millisecond))
	ctx := t.Context()

	l, err := c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	e.awaitHolders(l.Key(), l.Token())
	e.proxies[0].SetBlackhole(true)
	e.proxies[1].SetBlackhole(true)
	err = l.Release(ctx)
	require.ErrorIs(t, err, redlock.ErrReleaseUnconfirmed)
	require.NotErrorIs(t, err, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, ne := range qe.Nodes {
		assert.True(t, errors.Is(ne, redlock.ErrNoReply) || errors.Is(ne, redlock.ErrKeyAbsent) || errors.Is(ne, redlock.ErrHeldByOther),
			"node %d: %v is not an exported cause", ne.Node, ne.Err)
	}
	require.ErrorIs(t, l.Extend(ctx, time.Minute), redlock.ErrNotHeld, "a failed Release still ends the lock")
	e.resetFaults()
	e.eventuallyNoKey(l.Key(), 2*time.Second)
	require.Eventually(t, func() bool { return l.Release(ctx) == nil }, 2*time.Second, 10*time.Millisecond,
		"once the background deletes are confirmed, Release reports the lock released")

	l, err = c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = l.Release(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "concurrent Release %d", i)
	}

	var nilLock *redlock.Lock
	assert.Zero(t, nilLock.Fence())
	assert.True(t, nilLock.Until().IsZero())
	assert.Empty(t, nilLock.Key())
	assert.Empty(t, nilLock.Token())

	for _, s := range []redlock.RetryStrategy{
		redlock.ExponentialBackoff(0, 0),
		redlock.ExponentialBackoff(time.Second, time.Millisecond),
		redlock.LimitRetry(redlock.ExponentialBackoff(0, time.Second), 3),
	} {
		_, err := redlock.New(e.nodes, redlock.WithRetry(s))
		require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	}
}

// TestReleaseWaitsForSlowNodes: nodes slower than the per-node deadline
// still confirm the Release's deletes, and Release waits for them rather
// than reporting a lock that is being freed as not held.
func TestReleaseWaitsForSlowNodes(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 5, cfg.o)
			c := e.client(redlock.WithNodeTimeout(25 * time.Millisecond))
			ctx := t.Context()
			key := newKey(t)
			l, err := c.Acquire(ctx, key, 5*time.Second)
			require.NoError(t, err)
			e.awaitHolders(key, l.Token())
			for _, p := range e.proxies {
				p.SetDelay(150 * time.Millisecond)
			}
			require.NoError(t, l.Release(context.Background()), "Release gave up on nodes that were only slow")
			e.resetFaults()
			e.eventuallyNoKey(key, 5*time.Second)
		})
	}
}

// TestReleaseBound: with a majority of nodes silent, Release keeps trying
// for the cleanup timeout, then reports which nodes did not answer.
func TestReleaseBound(t *testing.T) {
	e := newEnv(t, 5, fastClients)
	c := e.client(redlock.WithCleanupTimeout(700 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 5*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, l.Token())
	for _, i := range []int{2, 3, 4} {
		e.proxies[i].SetBlackhole(true)
	}
	start := time.Now()
	err = l.Release(context.Background())
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrReleaseUnconfirmed)
	require.ErrorIs(t, err, redlock.ErrUnavailable)
	require.NotErrorIs(t, err, redlock.ErrNotHeld)
	assert.GreaterOrEqual(t, took, 600*time.Millisecond, "Release gave up before its bound")
	assert.Less(t, took, 5*time.Second, "Release outlived its bound")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	var silent []int
	for _, n := range qe.Nodes {
		if errors.Is(n.Err, redlock.ErrNoReply) {
			silent = append(silent, n.Node)
		}
	}
	assert.Equal(t, []int{2, 3, 4}, silent, "%v", err)
	e.resetFaults()
	e.eventuallyNoKey(key, 10*time.Second)
}

// TestLateRestoreAfterRelease: an Extend puts the key back on a node that
// lost it; that restore is held in the network past its deadline, and the
// Lock is released and its Client closed meanwhile. When the restore lands
// at last, the tombstone Release left refuses it: nothing puts a released
// Lock's key back.
func TestLateRestoreAfterRelease(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(300 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 20*time.Second)
	require.NoError(t, err)
	quiet(t, c)
	require.NoError(t, e.direct[2].Del(ctx, key).Err()) // node 2 lost the key

	// Node 0 answers last, so the Extend hears node 2 say the key is
	// absent and restores it there.
	e.proxies[0].SetDelay(50 * time.Millisecond)
	caught := e.proxies[2].HoldNext(scriptSHA(t, "restore.lua"))
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	waitClosed(t, caught, "the restore reaching node 2's proxy")
	e.proxies[0].SetDelay(0)
	require.NoError(t, l.Release(ctx))
	require.NoError(t, c.Close(ctx))

	before := e.calls(2, "evalsha")
	e.proxies[2].ReleaseHeld()
	require.Eventually(t, func() bool { return e.calls(2, "evalsha") > before },
		10*time.Second, time.Millisecond, "the held restore did not run")
	assert.Empty(t, e.value(2, key), "the late restore put the released Lock back on node 2")
	e.eventuallyNoKey(key, 3*time.Second)
}
