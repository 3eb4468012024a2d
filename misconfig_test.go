package redlock_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Misconfigured nodes are refused at first contact, with their own
// sentinel, and never waited for: a replica given as a node, a password
// the server refuses, an ACL without the lock's commands.

// fast is how long a call refused for its configuration may take on a
// loaded machine: far below the minute its context allows.
const fast = 10 * time.Second

// plainClients returns one client per address with opts applied, closed
// when the test ends.
func plainClients(t *testing.T, opts func(i int, o *redis.Options), addrs ...string) []redis.UniversalClient {
	t.Helper()
	var nodes []redis.UniversalClient
	for i, a := range addrs {
		o := &redis.Options{Addr: a, ContextTimeoutEnabled: true}
		if opts != nil {
			opts(i, o)
		}
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		nodes = append(nodes, c)
	}
	return nodes
}

// startReplica starts a redis-server that replicates master.
func startReplica(t *testing.T, master *redistest.Server) *redistest.Server {
	t.Helper()
	host, port, err := net.SplitHostPort(master.Addr())
	require.NoError(t, err)
	return redistest.StartT(t, 1, redistest.WithArgs("--replicaof", host, port))[0]
}

// newClient is a fresh Client over nodes, closed when the test ends.
func newClient(t *testing.T, nodes []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(nodes, opts...)
	require.NoError(t, err)
	closeAtCleanup(t, c)
	return c
}

// TestReplicaBesideItsMasterRefused: a replica listed beside its own
// master is refused by Warm and by a fresh Client's first operation,
// naming both nodes, with ErrReplica (and ErrInvalidArgument), at once.
func TestReplicaBesideItsMasterRefused(t *testing.T) {
	masters := redistest.StartT(t, 2)
	replica := startReplica(t, masters[0])
	nodes := plainClients(t, nil, masters[0].Addr(), masters[1].Addr(), replica.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	err := newClient(t, nodes).Warm(ctx)
	require.ErrorIs(t, err, redlock.ErrReplica)
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "node 2 ("+replica.Addr()+") is a replica of node 0 ("+masters[0].Addr()+")")

	// New's first contact: the first operation of a Client never warmed.
	start := time.Now()
	_, err = newClient(t, nodes).Acquire(ctx, newKey(t), time.Minute)
	require.ErrorIs(t, err, redlock.ErrReplica)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.Less(t, time.Since(start), fast, "a replica is refused, not waited for")
	assert.Contains(t, err.Error(), "is a replica of node 0")

	_, err = newClient(t, nodes).Inspect(ctx, newKey(t))
	require.ErrorIs(t, err, redlock.ErrReplica)
	e, err := newClient(t, nodes).Election(newKey(t), time.Minute)
	require.NoError(t, err)
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrReplica)
	require.NotErrorIs(t, err, redlock.ErrNoLeader, "a misconfigured node is no answer about the leader")
}

// TestReplicaAsNodeRefused: a replica of a master that is not a node is
// refused too, naming its master; the same nodes with a master in its
// place take locks.
func TestReplicaAsNodeRefused(t *testing.T) {
	servers := redistest.StartT(t, 3)
	replica := startReplica(t, servers[2])
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	nodes := plainClients(t, nil, servers[0].Addr(), servers[1].Addr(), replica.Addr())
	start := time.Now()
	_, err := newClient(t, nodes).TryAcquire(ctx, newKey(t), time.Minute)
	require.ErrorIs(t, err, redlock.ErrReplica)
	assert.Less(t, time.Since(start), fast)
	assert.Contains(t, err.Error(), "node 2 ("+replica.Addr()+") is a replica of "+servers[2].Addr())
	err = newClient(t, nodes).Warm(ctx)
	require.ErrorIs(t, err, redlock.ErrReplica)

	good := newClient(t, plainClients(t, nil, servers[0].Addr(), servers[1].Addr(), servers[2].Addr()))
	require.NoError(t, good.Warm(ctx))
	l, err := good.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

// requirePassword makes servers refuse clients without password.
func requirePassword(t *testing.T, servers []*redistest.Server, password string) {
	t.Helper()
	for _, s := range servers {
		admin := s.Client()
		require.NoError(t, admin.ConfigSet(t.Context(), "requirepass", password).Err())
		_ = admin.Close()
	}
}

// TestAuthRefusedAtOnce: nodes that refuse the client's password, or want
// one it does not give, are ErrAuth, never ErrNoReply: Warm says so (not
// "Protocol error: unauthenticated bulk length"), and an Acquire that so
// many nodes refuse that no quorum is left fails at once, long before its
// context ends. With one such node of three, the others take the lock.
func TestAuthRefusedAtOnce(t *testing.T) {
	servers := redistest.StartT(t, 3)
	requirePassword(t, servers, "secret")
	addrs := []string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Node 0 a wrong password, node 1 none, node 2 the right one.
	bad := plainClients(t, func(i int, o *redis.Options) {
		o.Password = []string{"wrong", "", "secret"}[i]
	}, addrs...)
	c := newClient(t, bad)
	err := c.Warm(ctx)
	require.ErrorIs(t, err, redlock.ErrAuth)
	require.NotErrorIs(t, err, redlock.ErrNoReply)
	assert.NotContains(t, err.Error(), "Protocol error")
	assert.Contains(t, err.Error(), "node 0 ("+addrs[0]+"): WRONGPASS")
	assert.Contains(t, err.Error(), "node 1 ("+addrs[1]+"): NOAUTH")
	assert.NotContains(t, err.Error(), "node 2")

	for _, fresh := range []bool{false, true} {
		cl := c
		if fresh {
			cl = newClient(t, bad)
		}
		start := time.Now()
		_, err = cl.Acquire(ctx, newKey(t), time.Minute)
		took := time.Since(start)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.ErrorIs(t, err, redlock.ErrAuth)
		require.NoError(t, ctx.Err())
		assert.Less(t, took, fast, "fresh %v: retried: %v", fresh, err)
		var qe *redlock.QuorumError
		require.ErrorAs(t, err, &qe)
		refused := 0
		for _, n := range qe.Nodes {
			if n.Node < 2 {
				refused++
				assert.ErrorIs(t, n, redlock.ErrAuth, "node %d", n.Node)
				assert.NotErrorIs(t, n, redlock.ErrNoReply, "node %d", n.Node)
				assert.NotContains(t, n.Error(), "no reply", "node %d", n.Node)
			}
		}
		assert.Equal(t, 2, refused, "%v", err)
	}

	e, err := c.Election(newKey(t), time.Minute)
	require.NoError(t, err)
	start := time.Now()
	_, err = e.Campaign(ctx, "x")
	require.ErrorIs(t, err, redlock.ErrAuth)
	assert.Less(t, time.Since(start), fast, "a campaign no quorum can grant ends")
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrUnavailable)
	require.ErrorIs(t, err, redlock.ErrAuth)

	// One node refusing of three: like a node down, the others hold.
	oneBad := newClient(t, plainClients(t, func(i int, o *redis.Options) {
		o.Password = []string{"wrong", "secret", "secret"}[i]
	}, addrs...))
	err = oneBad.Warm(ctx)
	require.ErrorIs(t, err, redlock.ErrAuth)
	l, err := oneBad.Acquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

// TestNoPermissionRefusedAtOnce: a user whose ACL lacks the lock's
// commands, or its keys, gets ErrNoPermission at once, not ErrNoReply;
// Warm, which sends no lock command, does not fail for an ACL without
// PING or SCRIPT.
func TestNoPermissionRefusedAtOnce(t *testing.T) {
	servers := redistest.StartT(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, s := range servers {
		admin := s.Client()
		// No EVALSHA at all; and the lock's commands on other keys only.
		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "nolock", "on", ">pw", "resetchannels", "-@all", "+hello", "~*").Err())
		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "elsewhere", "on", ">pw", "resetchannels", "-@all", "+hello",
			"+evalsha", "+eval", "+get", "+set", "+pexpire", "+del", "+time", "~other:*").Err())
		_ = admin.Close()
	}
	addrs := []string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()}
	for _, user := range []string{"nolock", "elsewhere"} {
		t.Run(user, func(t *testing.T) {
			c := newClient(t, plainClients(t, func(_ int, o *redis.Options) { o.Username, o.Password = user, "pw" }, addrs...))
			require.NoError(t, c.Warm(ctx))
			start := time.Now()
			_, err := c.Acquire(ctx, newKey(t), time.Minute)
			took := time.Since(start)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			require.ErrorIs(t, err, redlock.ErrNoPermission)
			require.NotErrorIs(t, err, redlock.ErrNoReply)
			require.NotErrorIs(t, err, redlock.ErrAuth)
			require.NoError(t, ctx.Err())
			assert.Less(t, took, fast, "retried: %v", err)
			assert.True(t, strings.Contains(err.Error(), "NOPERM") || strings.Contains(err.Error(), "can't"), "%v", err)
		})
	}
}

// TestLeaderOnFreshClient: a Client that never met its nodes reads the
// leader with its first Leader call (ErrNoLeader before any), and its
// Observe reports the leader at once, not after a third of the TTL.
func TestLeaderOnFreshClient(t *testing.T) {
	servers := redistest.StartT(t, 5)
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	key := newKey(t)
	const ttl = 30 * time.Second // a third of it is far beyond the bounds below

	e, err := newClient(t, plainClients(t, nil, addrs...)).Election(key, ttl)
	require.NoError(t, err)
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader, "nobody campaigned")
	require.NotErrorIs(t, err, redlock.ErrUnavailable)

	a, err := newClient(t, plainClients(t, nil, addrs...)).Election(key, ttl)
	require.NoError(t, err)
	la, err := a.Campaign(ctx, "host-a")
	require.NoError(t, err)
	t.Cleanup(func() { _ = la.Resign(context.Background()) })

	for range 3 { // each a fresh Client, each with default go-redis options
		nodes := plainClients(t, func(_ int, o *redis.Options) { o.ContextTimeoutEnabled = false }, addrs...)
		fresh, err := newClient(t, nodes).Election(key, ttl)
		require.NoError(t, err)
		got, err := fresh.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "host-a", got.Value)
		assert.Equal(t, la.Term(), got.Term)
	}

	fresh, err := newClient(t, plainClients(t, nil, addrs...)).Election(key, ttl)
	require.NoError(t, err)
	start := time.Now()
	select {
	case l := <-fresh.Observe(ctx):
		assert.Equal(t, "host-a", l.Value)
		assert.Equal(t, la.Term(), l.Term)
		assert.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(ttl / 3):
		t.Fatal("Observe on a fresh Client did not report the leader before a third of the TTL")
	}
}
