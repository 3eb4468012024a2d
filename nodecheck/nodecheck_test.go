package nodecheck_test

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
	"github.com/redlock-go/redlock/nodecheck"
)

// checkClients returns one client per address, closed when the test ends.
func checkClients(t *testing.T, addrs ...string) []redis.UniversalClient {
	t.Helper()
	var nodes []redis.UniversalClient
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		nodes = append(nodes, c)
	}
	return nodes
}

// warningsAbout returns the warnings that name addr.
func warningsAbout(ws []string, addr string) []string {
	var out []string
	for _, w := range ws {
		if strings.Contains(w, "("+addr+")") {
			out = append(out, w)
		}
	}
	return out
}

// TestRun: a node set up as the README asks has no warning; one with
// an evicting policy and one without persistence are each told what to change.
func TestRun(t *testing.T) {
	servers := redistest.StartT(t, 3)
	ctx := t.Context()
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr())
	}
	admin := checkClients(t, addrs...)
	for _, kv := range [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}} {
		require.NoError(t, admin[0].ConfigSet(ctx, kv[0], kv[1]).Err())
	}
	require.NoError(t, admin[1].ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err())
	require.NoError(t, admin[1].ConfigSet(ctx, "appendonly", "yes").Err())
	require.NoError(t, admin[1].ConfigSet(ctx, "appendfsync", "always").Err())

	r, err := nodecheck.Run(ctx, checkClients(t, addrs...))
	require.NoError(t, err)
	require.Len(t, r.Servers, 3)
	assert.Equal(t, 2, r.Quorum)
	assert.Equal(t, 3, r.Reachable)
	for i, s := range r.Servers {
		require.NoError(t, s.Err, "node %d", i)
		assert.Equal(t, i, s.Node)
		assert.Equal(t, addrs[i], s.Addr)
		assert.NotEmpty(t, s.Version)
		assert.Len(t, s.RunID, 40)
		assert.Less(t, s.Uptime, time.Hour)
		assert.Less(t, s.ClockOffset.Abs(), nodecheck.MaxClockOffset, "same machine, same clock")
	}
	good, evicting, volatile := r.Servers[0], r.Servers[1], r.Servers[2]
	assert.Equal(t, "noeviction", good.MaxmemoryPolicy)
	assert.Equal(t, "yes", good.AppendOnly)
	assert.Equal(t, "always", good.AppendFsync)
	assert.Empty(t, good.Warnings)

	assert.Equal(t, "volatile-lru", evicting.MaxmemoryPolicy)
	require.Len(t, evicting.Warnings, 1, "%q", evicting.Warnings)
	assert.Contains(t, evicting.Warnings[0], "maxmemory-policy is volatile-lru")
	assert.Contains(t, evicting.Warnings[0], "set it to noeviction")

	assert.Equal(t, "no", volatile.AppendOnly)
	require.Len(t, volatile.Warnings, 1, "%q", volatile.Warnings)
	assert.Contains(t, volatile.Warnings[0], "appendonly is no")
	assert.Contains(t, volatile.Warnings[0], "appendonly yes and appendfsync always")

	assert.Equal(t, append(append([]string{}, evicting.Warnings...), volatile.Warnings...), r.Warnings)
	assert.Empty(t, warningsAbout(r.Warnings, addrs[0]))
	require.Error(t, r.Err())
	assert.Contains(t, r.Err().Error(), "volatile-lru")
}

// TestRunSameServer: two addresses of one server are found by run_id.
func TestRunSameServer(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	_, port, err := net.SplitHostPort(s.Addr())
	require.NoError(t, err)
	other := redistest.StartT(t, 1)[0]
	r, err := nodecheck.Run(t.Context(), checkClients(t, s.Addr(), other.Addr(), "localhost:"+port))
	require.NoError(t, err)
	var same []string
	for _, w := range r.Warnings {
		if strings.Contains(w, "one server") {
			same = append(same, w)
		}
	}
	require.Len(t, same, 1, "%q", r.Warnings)
	assert.Contains(t, same[0], "node 0 ("+s.Addr()+") and node 2 (localhost:"+port+")")
	assert.Contains(t, same[0], r.Servers[0].RunID)
}

// TestRunConfigRefused: a user without CONFIG gets "unknown" and a
// warning, not an error; appendonly still comes from INFO.
func TestRunConfigRefused(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	ctx := t.Context()
	admin := s.Client()
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "locker", "on", ">pw", "-@all", "+info", "+time", "+hello", "~lock:*").Err())
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "locker", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })

	r, err := nodecheck.Run(ctx, []redis.UniversalClient{c})
	require.NoError(t, err)
	got := r.Servers[0]
	require.NoError(t, got.Err)
	assert.Equal(t, nodecheck.Unreadable, got.MaxmemoryPolicy)
	assert.Equal(t, nodecheck.Unreadable, got.AppendFsync)
	assert.Equal(t, "no", got.AppendOnly, "from INFO persistence")
	assert.Len(t, got.Warnings, 2, "%q", got.Warnings)
	assert.Contains(t, got.Warnings[0], "maxmemory-policy unknown (CONFIG GET refused): make sure it is noeviction")
	assert.Contains(t, got.Warnings[1], "appendonly is no")
}

// TestRunUnreachable: a node that is down is reported, and with it
// down and another too, the missing quorum.
func TestRunUnreachable(t *testing.T) {
	servers := redistest.StartT(t, 3)
	require.NoError(t, servers[1].Kill())
	require.NoError(t, servers[2].Kill())
	start := time.Now()
	r, err := nodecheck.Run(t.Context(), checkClients(t, servers[0].Addr(), servers[1].Addr(), servers[2].Addr()))
	require.NoError(t, err)
	assert.Less(t, time.Since(start), nodecheck.Timeout+time.Second)
	assert.NoError(t, r.Servers[0].Err)
	assert.Error(t, r.Servers[1].Err)
	assert.Equal(t, 1, r.Reachable)
	require.Len(t, warningsAbout(r.Warnings, servers[1].Addr()), 1)
	assert.Contains(t, warningsAbout(r.Warnings, servers[1].Addr())[0], "unreachable")
	assert.Contains(t, r.Warnings[len(r.Warnings)-1], "only 1 of 3 nodes answered, fewer than the quorum of 2")
}

// TestRunBlackholed: a node that accepts connections and never
// answers costs Timeout, not go-redis's read timeout.
func TestRunBlackholed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	start := time.Now()
	r, err := nodecheck.Run(t.Context(), checkClients(t, ln.Addr().String()))
	require.NoError(t, err)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, nodecheck.Timeout-100*time.Millisecond)
	assert.Less(t, took, nodecheck.Timeout+time.Second)
	require.Error(t, r.Servers[0].Err)
	assert.Equal(t, 0, r.Reachable)
}

func TestRunBadInput(t *testing.T) {
	var nilCtx context.Context
	_, err := nodecheck.Run(nilCtx, checkClients(t, "127.0.0.1:1"))
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument)
	_, err = nodecheck.Run(t.Context(), nil)
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument)
	_, err = nodecheck.Run(t.Context(), []redis.UniversalClient{nil})
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument)
}

// TestRunCluster: a cluster node is checked master by master.
func TestRunCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	plain := redistest.StartT(t, 1)[0]
	admin := cl.Servers()[2].Client()
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err())

	r, err := nodecheck.Run(t.Context(), []redis.UniversalClient{cl.Client(), checkClients(t, plain.Addr())[0]})
	require.NoError(t, err)
	require.Len(t, r.Servers, 4)
	assert.Equal(t, 2, r.Reachable)
	var addrs []string
	for _, s := range r.Servers[:3] {
		require.NoError(t, s.Err)
		assert.Equal(t, 0, s.Node)
		addrs = append(addrs, s.Addr)
	}
	assert.ElementsMatch(t, cl.Addrs(), addrs)
	assert.Equal(t, 1, r.Servers[3].Node)
	evicting := warningsAbout(r.Warnings, cl.Servers()[2].Addr())
	require.NotEmpty(t, evicting)
	assert.Contains(t, evicting[0], "node 0 ("+cl.Servers()[2].Addr()+"): maxmemory-policy is allkeys-lru, which evicts lock keys and fence counters")
}

// TestRunReplica: each node's role is read; a replica beside its own
// master, and a replica of a master that is no node, are each told, and
// are unusable; the master is not.
func TestRunReplica(t *testing.T) {
	servers := redistest.StartT(t, 3)
	ctx := t.Context()
	replicate := func(master *redistest.Server) *redistest.Server {
		host, port, err := net.SplitHostPort(master.Addr())
		require.NoError(t, err)
		return redistest.StartT(t, 1, redistest.WithArgs("--replicaof", host, port))[0]
	}
	beside, alone := replicate(servers[0]), replicate(servers[2])

	r, err := nodecheck.Run(ctx, checkClients(t, servers[0].Addr(), servers[1].Addr(), beside.Addr(), alone.Addr()))
	require.NoError(t, err)
	require.Len(t, r.Servers, 4)
	for i, want := range []string{"master", "master", "replica", "replica"} {
		require.NoError(t, r.Servers[i].Err)
		assert.Equal(t, want, r.Servers[i].Role, "node %d", i)
	}
	assert.Equal(t, servers[2].Addr(), r.Servers[3].MasterAddr)
	assert.Equal(t, []int{2, 3}, r.Unusable)
	var replicas []string
	for _, w := range r.Warnings {
		if strings.Contains(w, "replica") {
			replicas = append(replicas, w)
		}
	}
	require.Len(t, replicas, 2, "%q", r.Warnings)
	w := warningsAbout(replicas, beside.Addr())
	require.Len(t, w, 1, "%q", r.Warnings)
	assert.Contains(t, w[0], "node 2 ("+beside.Addr()+") is a replica of node 0 ("+servers[0].Addr()+")")
	w = warningsAbout(replicas, alone.Addr())
	require.Len(t, w, 1, "%q", r.Warnings)
	assert.Contains(t, w[0], "node 3 ("+alone.Addr()+") is a replica of "+servers[2].Addr())
	assert.Contains(t, w[0], "READONLY")
}

// TestRunAuthRefused: a node that refuses the client's credentials is
// redlock.ErrAuth and unusable; one whose ACL only refuses the check's
// commands is redlock.ErrNoPermission and not unusable.
func TestRunAuthRefused(t *testing.T) {
	servers := redistest.StartT(t, 3)
	ctx := t.Context()
	admin := servers[0].Client()
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.ConfigSet(ctx, "requirepass", "secret").Err())
	admin2 := servers[2].Client()
	t.Cleanup(func() { _ = admin2.Close() })
	require.NoError(t, admin2.Do(ctx, "ACL", "SETUSER", "locker", "on", ">pw", "-@all", "+hello", "+evalsha", "~lock:*").Err())
	nodes := []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: servers[0].Addr(), Password: "wrong", ContextTimeoutEnabled: true}),
		redis.NewClient(&redis.Options{Addr: servers[1].Addr(), ContextTimeoutEnabled: true}),
		redis.NewClient(&redis.Options{Addr: servers[2].Addr(), Username: "locker", Password: "pw", ContextTimeoutEnabled: true}),
	}
	for _, n := range nodes {
		t.Cleanup(func() { _ = n.Close() })
	}
	start := time.Now()
	r, err := nodecheck.Run(ctx, nodes)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), nodecheck.Timeout, "a refusal is not waited for")
	require.ErrorIs(t, r.Servers[0].Err, redlock.ErrAuth)
	require.NotErrorIs(t, r.Servers[0].Err, redlock.ErrNoReply)
	require.ErrorIs(t, r.Servers[2].Err, redlock.ErrNoPermission)
	assert.Equal(t, []int{0}, r.Unusable)
	w := warningsAbout(r.Warnings, servers[0].Addr())
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "refuses the client's credentials")
	assert.Contains(t, w[0], "WRONGPASS")
	w = warningsAbout(r.Warnings, servers[2].Addr())
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "its ACL refuses the check")
}
