package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestQuorumSubsets fails every subset of nodes, in each way a node can fail,
// and checks that the lock is granted exactly when a quorum is healthy, that
// a granted lock is on every healthy node (but one that refused the write
// as late), and that a refused one leaves no
// key anywhere once the nodes are back.
func TestQuorumSubsets(t *testing.T) {
	faults := []struct {
		name  string
		apply func(e *env, i int)
	}{
		{"refused", func(e *env, i int) { e.proxies[i].SetRefuse(true) }},
		{"blackholed", func(e *env, i int) { e.proxies[i].SetBlackhole(true) }},
		{"reply-lost", func(e *env, i int) { e.proxies[i].SetDropReplies(true) }},
		{"held-by-other", func(e *env, i int) {}}, // set up per key below
	}
	for _, n := range []int{1, 3, 5} {
		e := newEnv(t, n, fastClients)
		// A healthy node refuses a write that reached it past its deadline
		// (a loaded machine can hold one up past 300 ms): it then lacks the
		// key, which is right, and says so in a NodeError.
		var lateMu sync.Mutex
		late := make(map[string]map[int]bool)
		c := e.client(redlock.WithNodeTimeout(300*time.Millisecond), redlock.WithHooks(redlock.Hooks{
			NodeError: func(ev redlock.Event) {
				if ev.Op == "acquire" && errors.Is(ev.Err, redlock.ErrLate) {
					lateMu.Lock()
					defer lateMu.Unlock()
					if late[ev.Key] == nil {
						late[ev.Key] = make(map[int]bool)
					}
					late[ev.Key][ev.Node] = true
				}
			},
		}))
		refusedLate := func(key string, i int) bool {
			lateMu.Lock()
			defer lateMu.Unlock()
			return late[key][i]
		}
		for _, f := range faults {
			for mask := 0; mask < 1<<n; mask++ {
				t.Run(fmt.Sprintf("n=%d/%s/failed=%0*b", n, f.name, n, mask), func(t *testing.T) {
					ctx := t.Context()
					key := newKey(t)
					for i := range n {
						if mask&(1<<i) == 0 {
							continue
						}
						if f.name == "held-by-other" {
							require.NoError(t, e.direct[i].Set(ctx, key, "someone-else", time.Minute).Err())
						}
						f.apply(e, i)
					}
					healthy := n - bits.OnesCount(uint(mask))

					l, err := c.TryAcquire(ctx, key, 10*time.Second)
					if healthy >= n/2+1 {
						require.NoError(t, err)
						// Acquire returned at quorum; the other healthy
						// nodes answer just after.
						require.Eventually(t, func() bool {
							for i := range n {
								if mask&(1<<i) == 0 && e.value(i, key) != l.Token() && !refusedLate(key, i) {
									return false
								}
							}
							return true
						}, 5*time.Second, time.Millisecond, "a healthy node lacks the key")
						e.resetFaults()
						require.NoError(t, l.Release(ctx))
					} else {
						require.ErrorIs(t, err, redlock.ErrNotAcquired)
						var qe *redlock.QuorumError
						require.ErrorAs(t, err, &qe)
						assert.Less(t, qe.OK, qe.Quorum)
						e.resetFaults()
					}
					// Every node answers again: nothing of ours may be left.
					require.Eventually(t, func() bool {
						for i := range n {
							v := e.value(i, key)
							if v != "" && v != "someone-else" {
								return false
							}
						}
						return true
					}, 5*time.Second, 5*time.Millisecond, "a key of ours was left behind")
					if f.name == "held-by-other" {
						for i := range n {
							if mask&(1<<i) != 0 {
								assert.Equal(t, "someone-else", e.value(i, key), "another holder's key was touched on node %d", i)
							}
						}
					}
				})
			}
		}
	}
}

// TestOneServerOneVote: two nodes that are one server must never both count.
func TestOneServerOneVote(t *testing.T) {
	down := redistest.StartT(t, 1)[0]
	downAddr := down.Addr()
	require.NoError(t, down.Stop())
	dead := redis.NewClient(&redis.Options{Addr: downAddr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = dead.Close() })

	check := func(t *testing.T, a, b redis.UniversalClient, wantAddr string) {
		t.Helper()
		c, err := redlock.New([]redis.UniversalClient{a, b, dead}, redlock.WithNodeTimeout(time.Second))
		require.NoError(t, err, "New sends nothing and cannot know yet")
		closeAtCleanup(t, c)
		for range 2 { // and it stays refused
			_, err = c.TryAcquire(t.Context(), newKey(t), time.Minute)
			require.ErrorIs(t, err, redlock.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "nodes 0 (")
			assert.Contains(t, err.Error(), "and 1 (")
		}
		if wantAddr != "" {
			assert.Equal(t, wantAddr, c.Nodes()[0].Addr)
			assert.Contains(t, err.Error(), wantAddr)
		}
	}
	t.Run("two addresses", func(t *testing.T) {
		s := redistest.StartT(t, 1)[0]
		_, port, _ := strings.Cut(s.Addr(), ":")
		a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, ContextTimeoutEnabled: true})
		b := redis.NewClient(&redis.Options{Addr: "localhost:" + port, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		check(t, a, b, "")
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3)
		check(t, cl.Client(), cl.Client(), "")
	})
	t.Run("sentinel", func(t *testing.T) {
		s := redistest.StartSentinel(t)
		check(t, s.FailoverClient(), s.FailoverClient(), s.MasterAddr())
	})
}

// TestDuplicateServerDownAtFirstContact: two addresses of one server
// (127.0.0.1 and localhost) and another server. The first operations run
// while the shared server is down; once it is back and the other server is
// cut off, its two addresses must not make a quorum of one server.
func TestDuplicateServerDownAtFirstContact(t *testing.T) {
	servers := redistest.StartT(t, 2)
	nodetest.LoadScripts(t, servers[0].Addr(), servers[1].Addr())
	var proxies []*faultproxy.Proxy
	for _, s := range servers {
		p, err := faultproxy.New(s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		proxies = append(proxies, p)
	}
	_, port, _ := strings.Cut(proxies[0].Addr(), ":")
	addrs := []string{"127.0.0.1:" + port, "localhost:" + port, proxies[1].Addr()}
	newClient := func() *redlock.Client {
		var nodes []redis.UniversalClient
		for _, a := range addrs {
			rc := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { _ = rc.Close() })
			nodes = append(nodes, rc)
		}
		c, err := redlock.New(nodes, redlock.WithNodeTimeout(300*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = c.Close(ctx)
		})
		return c
	}
	ctx := t.Context()
	x, y := newClient(), newClient()
	key := newKey(t)

	proxies[0].SetRefuse(true)
	for _, c := range []*redlock.Client{x, y} {
		_, err := c.TryAcquire(ctx, key, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
	}
	proxies[0].SetRefuse(false)
	proxies[1].SetBlackhole(true)
	for _, c := range []*redlock.Client{x, y} {
		var err error
		for try := 0; try < 50 && !errors.Is(err, redlock.ErrInvalidArgument); try++ {
			var l *redlock.Lock
			l, err = c.TryAcquire(ctx, key, 10*time.Second)
			require.Error(t, err, "one server's two addresses made a quorum")
			require.Nil(t, l)
			time.Sleep(20 * time.Millisecond)
		}
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "the duplicate server was never found")
	}
}
