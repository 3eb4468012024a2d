package redlock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopExampleServers()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is N real redis-server processes, each behind a fault-injecting TCP
// proxy. Lock clients talk through the proxies; direct clients bypass them
// to inspect what the servers really hold.
type env struct {
	t       *testing.T
	servers []*redistest.Server
	proxies []*faultproxy.Proxy
	direct  []*redis.Client
	nodes   []redis.UniversalClient
}

const testNodeTimeout = 500 * time.Millisecond

// fastClients bound socket reads by the context, so tests of unknown outcomes
// do not wait for go-redis's 3s read timeout in the background.
func fastClients(o *redis.Options) { o.ContextTimeoutEnabled = true }

// defaultClients leaves go-redis's options as users leave them.
func defaultClients(*redis.Options) {}

func newEnv(t *testing.T, n int, clientOpts func(*redis.Options)) *env {
	t.Helper()
	e := &env{t: t, servers: redistest.StartT(t, n)}
	for _, s := range e.servers {
		p, err := faultproxy.New(s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		e.proxies = append(e.proxies, p)

		d := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = d.Close() })
		e.direct = append(e.direct, d)

		o := &redis.Options{Addr: p.Addr()}
		clientOpts(o)
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		// Open a pooled connection now, as a running service has one: a
		// fault injected later then hits commands, not the handshake.
		require.NoError(t, c.Ping(t.Context()).Err())
		e.nodes = append(e.nodes, c)
	}
	e.warm()
	return e
}

// warm runs every script once, as a running service has: Script.Run sends
// EVALSHA first, and a fault that swallowed the NOSCRIPT reply would keep
// the script from ever running, which is not the case under test.
func (e *env) warm() {
	e.t.Helper()
	ctx := e.t.Context()
	for _, opts := range [][]redlock.Option{nil, {redlock.WithFencing()}} {
		c, err := redlock.New(e.nodes, append(opts, redlock.WithNodeTimeout(testNodeTimeout))...)
		require.NoError(e.t, err)
		l, err := c.TryAcquire(ctx, "warm-up", time.Minute)
		require.NoError(e.t, err)
		require.NoError(e.t, l.Extend(ctx, time.Minute))
		require.NoError(e.t, l.Release(ctx))
		e.settle(c)
	}
	for _, d := range e.direct {
		require.NoError(e.t, d.FlushAll(ctx).Err())
	}
}

// client returns a lock client over the proxied nodes. Its cleanup waits for
// the background work (rollbacks, late replies) before the nodes go away.
//
// Unless a test sets its own, the per-node timeout is generous: the tests
// share two cores with other test binaries under -race, and a test that is
// not about deadlines must not fail on a late reply.
func (e *env) client(opts ...redlock.Option) *redlock.Client {
	e.t.Helper()
	c, err := redlock.New(e.nodes, append([]redlock.Option{redlock.WithNodeTimeout(testNodeTimeout)}, opts...)...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.settle(c) })
	return c
}

// settle waits for c's background work to finish.
func (e *env) settle(c *redlock.Client) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(e.t, c.Close(ctx), "background work did not finish")
}

// value returns the holder's token that server i holds under key ("" when
// absent): the lock writes its token, a dot and a generation.
func (e *env) value(i int, key string) string {
	e.t.Helper()
	return holderOf(e.rawValue(i, key))
}

// rawValue returns what server i holds under key ("" when absent).
func (e *env) rawValue(i int, key string) string {
	e.t.Helper()
	v, err := e.direct[i].Get(context.Background(), key).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(e.t, err)
	return v
}

// holderOf is the token in a lock's value (token "." generation); a value
// of another form is returned whole.
func holderOf(v string) string {
	if i := strings.LastIndexByte(v, '.'); i > 0 {
		if _, err := strconv.ParseUint(v[i+1:], 10, 64); err == nil {
			return v[:i]
		}
	}
	return v
}

// holders counts the servers whose key holds token.
func (e *env) holders(key, token string) int {
	e.t.Helper()
	n := 0
	for i := range e.direct {
		if e.value(i, key) == token {
			n++
		}
	}
	return n
}

// awaitHolders waits until every server holds key with token: Acquire
// returns at quorum, and the other nodes answer just after.
func (e *env) awaitHolders(key, token string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.holders(key, token) == len(e.direct) },
		5*time.Second, time.Millisecond, "not every node took the key")
}

// requireNoKey fails if any server holds key at all.
func (e *env) requireNoKey(key string) {
	e.t.Helper()
	for i := range e.direct {
		require.Empty(e.t, e.value(i, key), "node %d still holds %q", i, key)
	}
}

// eventuallyNoKey waits until no server holds key, for background rollbacks.
func (e *env) eventuallyNoKey(key string, within time.Duration) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		for i := range e.direct {
			if e.value(i, key) != "" {
				return false
			}
		}
		return true
	}, within, 5*time.Millisecond, "key %q left behind", key)
}

func (e *env) resetFaults() {
	for _, p := range e.proxies {
		p.Reset()
	}
}

// newKey is a key no other test uses.
func newKey(t *testing.T) string {
	return "test:" + t.Name() + ":" + uuid.NewString()
}

// fakeClock is a Clock that moves only when told, or by step on every read.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

func (c *fakeClock) set(now time.Time, step time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.step = now, step
}

// calls returns how many times server i has executed command (lowercase),
// scripts included: evidence that a write landed even when its key is gone.
func (e *env) calls(i int, command string) int {
	e.t.Helper()
	info, err := e.direct[i].Info(context.Background(), "commandstats").Result()
	require.NoError(e.t, err)
	prefix := "cmdstat_" + command + ":calls="
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(e.t, err)
			return n
		}
	}
	return 0
}
