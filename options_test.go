package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

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
		{"restart marker", ctx, "redlock:boot", time.Second, []error{redlock.ErrInvalidArgument}},
		{"fencing counter", ctx, "k:redlock:fence", time.Second, []error{redlock.ErrInvalidArgument}},
		{"waiting room", ctx, "k:redlock:wait", time.Second, []error{redlock.ErrInvalidArgument}},
		{"refusals key", ctx, "k:redlock:late:0123456789abcdef", time.Second, []error{redlock.ErrInvalidArgument}},
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

const testGuard = time.Second

// guardRefusals counts the nodes that refused with ErrRestartGuard.
func guardRefusals(t *testing.T, err error) int {
	t.Helper()
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	n := 0
	for _, ne := range qe.Nodes {
		if errors.Is(ne.Err, redlock.ErrRestartGuard) {
			n++
		}
	}
	return n
}

// primeGuard starts the guard on every one of c's n nodes: it tries a
// guarded acquire until each node has refused it within its guard. One
// attempt is not enough on a loaded machine: a write is not sent once its
// round's deadline has passed, and the node it skipped would then start its
// guard only at the test's next acquire.
func primeGuard(t *testing.T, c *redlock.Client, key string, ttl time.Duration, n int) {
	t.Helper()
	guarded := make(map[int]bool) // the nodes seen within their guard
	require.Eventually(t, func() bool {
		l, err := c.TryAcquire(t.Context(), key, ttl)
		if err == nil {
			_ = l.Release(t.Context()) // a node was primed already: the others still count
			return false
		}
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			return false
		}
		for _, ne := range qe.Nodes {
			if errors.Is(ne.Err, redlock.ErrRestartGuard) {
				guarded[ne.Node] = true
			}
		}
		return len(guarded) == n
	}, 10*time.Second, 10*time.Millisecond, "the guard did not start on every node")
}

// TestRestartGuardNewNodes: nodes the guard has never seen vote only after
// the guard, and every client agrees on when, from the nodes' markers.
func TestRestartGuardNewNodes(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	a := e.client(redlock.WithRestartGuard(testGuard))
	b := e.client(redlock.WithRestartGuard(testGuard))
	ctx := t.Context()
	key := newKey(t)

	start := time.Now()
	_, err := a.TryAcquire(ctx, key, testGuard)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.GreaterOrEqual(t, guardRefusals(t, err), 2, "the refusals that decided it")
	e.requireNoKey(key)
	for i := range e.direct {
		m, err := e.direct[i].Get(ctx, "redlock:boot").Result()
		require.NoError(t, err, "node %d has no marker", i)
		run, _, ok := strings.Cut(m, ":")
		require.True(t, ok)
		info, err := e.direct[i].Info(ctx, "server").Result()
		require.NoError(t, err)
		assert.Contains(t, info, "run_id:"+run)
	}
	_, err = b.TryAcquire(ctx, key, testGuard)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client did not see the guard")

	time.Sleep(time.Until(start.Add(testGuard + 50*time.Millisecond)))
	l, err := b.TryAcquire(ctx, key, testGuard)
	require.NoError(t, err, "the guard did not end for another client")
	require.NoError(t, l.Release(ctx))
	l, err = a.TryAcquire(ctx, key, testGuard)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

// holdGuard is A's TTL in TestRestartGuard, and the guard of its clients (a
// guard must be at least the longest TTL): A's validity must outlast the
// setup after A acquires (a blackholed write's node deadline, a node's
// restart: over half a second on a loaded machine) by enough for the hazard
// and several guarded attempts to be tried while it runs.
const holdGuard = 3 * time.Second

// TestRestartGuard replays the Redlock spec's restart hazard on real nodes:
// A holds on nodes {0, 1}; node 1 loses its data; a client without the guard
// then finds a quorum {1, 2} while A's validity runs (the hazard), and a
// guarded client does not until the guard has passed, when node 1 votes
// again.
func TestRestartGuard(t *testing.T) {
	for _, tc := range []struct {
		name string
		loss func(t *testing.T, e *env)
	}{
		{"flushall", func(t *testing.T, e *env) {
			require.NoError(t, e.direct[1].FlushAll(t.Context()).Err())
		}},
		{"restart-empty", func(t *testing.T, e *env) {
			require.NoError(t, e.servers[1].Restart())
		}},
		// A replica promoted in place of node 1 has the old marker (it was
		// replicated) but not A's key, and another run_id.
		{"failover-with-marker", func(t *testing.T, e *env) {
			m, err := e.direct[1].Get(t.Context(), "redlock:boot").Result()
			require.NoError(t, err)
			require.NoError(t, e.servers[1].Restart())
			require.NoError(t, e.direct[1].Set(t.Context(), "redlock:boot", m, 0).Err())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // most of it is waiting for guards and TTLs
			e := newEnv(t, 3, fastClients)
			guarded := e.client(redlock.WithRestartGuard(holdGuard))
			other := e.client(redlock.WithRestartGuard(holdGuard))
			plain := e.client()
			ctx := t.Context()
			key := newKey(t)

			// The nodes are new to the guard: wait it out once.
			primeGuard(t, guarded, key+":prime", holdGuard, 3)
			time.Sleep(holdGuard + 50*time.Millisecond)

			// A holds {0, 1}: node 2 is blackholed, so that nothing A sent
			// there lands later (a refused connection's call is retried by
			// go-redis, and could).
			e.proxies[2].SetBlackhole(true)
			a, err := guarded.TryAcquire(ctx, key, holdGuard)
			require.NoError(t, err)
			// TryAcquire returns at the quorum of nodes 0 and 1: its write
			// to node 2 may not even have been sent yet, and would land
			// once the blackhole is lifted. Lift it once that call ended.
			require.Eventually(t, func() bool {
				n := guarded.Nodes()[2]
				return n.ConsecutiveFailures > 0 && n.InFlight == 0
			}, 10*time.Second, time.Millisecond, "the write to node 2 did not end")
			e.resetFaults()
			e.reachable(2)
			require.Empty(t, e.value(2, key))

			tc.loss(t, e)
			lost := time.Now()
			e.reachable(1)
			require.Empty(t, e.value(1, key), "node 1 still has A's key")

			// Without the guard: two holders.
			u, err := plain.TryAcquire(ctx, key, holdGuard)
			require.True(t, time.Now().Before(a.Until()),
				"the setup outlasted A's validity (%v): the hazard was not tried", holdGuard)
			require.NoError(t, err, "the hazard did not show without the guard")
			require.NoError(t, u.Release(ctx))

			// With it: node 1 does not vote while A may hold.
			refused := 0
			for time.Now().Before(a.Until()) {
				l, err := other.TryAcquire(ctx, key, holdGuard)
				in := time.Now().Before(a.Until())
				if err == nil && !in {
					// A's key expired on node 0 meanwhile: {0, 2} is a
					// quorum without node 1.
					require.NoError(t, l.Release(ctx))
					break
				}
				require.ErrorIs(t, err, redlock.ErrNotAcquired, "a guarded client got the lock while A held it")
				require.Equal(t, 1, guardRefusals(t, err), "%v", err)
				if in {
					refused++
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("the guarded client was refused %d times while A held", refused)
			require.Positive(t, refused, "no guarded attempt returned within A's validity: the guard was not tried")

			// Node 1 votes again once its guard has passed, which began no
			// sooner than the loss: with node 2 refusing, a lock needs it.
			e.proxies[2].SetRefuse(true)
			var got time.Time
			require.Eventually(t, func() bool {
				l, err := other.TryAcquire(ctx, key, holdGuard)
				if err != nil {
					return false
				}
				got = time.Now()
				require.NoError(t, l.Release(ctx))
				return true
			}, holdGuard+10*time.Second, 50*time.Millisecond, "node 1 stayed out after its guard")
			require.False(t, got.Before(lost.Add(holdGuard)), "node 1 voted %v after its loss, within its guard", got.Sub(lost))
			e.resetFaults()
			_ = a.Release(ctx)
		})
	}
}

// TestRestartGuardOptions: a guard under a millisecond, a zero or negative
// one, or one over cluster nodes is refused by New.
func TestRestartGuardOptions(t *testing.T) {
	e := newEnv(t, 1, fastClients)
	for _, d := range []time.Duration{-time.Second, time.Microsecond} {
		_, err := redlock.New(e.nodes, redlock.WithRestartGuard(d))
		require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{e.servers[0].Addr()}})
	defer cc.Close()
	_, err := redlock.New([]redis.UniversalClient{cc}, redlock.WithRestartGuard(time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	_, err = redlock.New(e.nodes, redlock.WithRestartGuard(0)) // off is leaving the option out
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
}

// TestRestartGuardACL runs the guarded acquire as a user with the README's
// least-privilege rule plus what the guard needs.
func TestRestartGuardACL(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	ctx := t.Context()
	rule := []any{"ACL", "SETUSER", "guarded", "on", ">pw", "resetchannels", "-@all",
		"+evalsha", "+eval", "+get", "+set", "+pexpire", "+del", "~lock:*", "+time", "+info", "~redlock:boot"}
	require.NoError(t, s.Client().Do(ctx, rule...).Err())
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "guarded", Password: "pw", ContextTimeoutEnabled: true})
	defer rc.Close()
	c, err := redlock.New([]redis.UniversalClient{rc}, redlock.WithRestartGuard(time.Millisecond))
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.TryAcquire(ctx, "lock:guard", time.Second) // starts the guard
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	time.Sleep(10 * time.Millisecond)
	l, err := c.TryAcquire(ctx, "lock:guard", time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}
