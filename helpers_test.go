package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
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

// clientConfigs are both: a test of unknown outcomes runs with each.
var clientConfigs = []struct {
	name string
	o    func(*redis.Options)
}{{"context-timeouts", fastClients}, {"go-redis-defaults", defaultClients}}

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

// warm loads every script on the servers, as a running service has them:
// Script.Run sends EVALSHA first, and a fault that swallowed the NOSCRIPT
// reply would keep the script from ever running, which is not the case under
// test.
func (e *env) warm() {
	e.t.Helper()
	addrs := make([]string, len(e.servers))
	for i, s := range e.servers {
		addrs[i] = s.Addr()
	}
	loadScripts(e.t, addrs...)
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
	// A running service has met its nodes: the servers are identified and
	// the connections warm before a test injects a fault.
	require.NoError(e.t, c.Warm(e.t.Context()))
	return c
}

// settle waits for c's background work to finish.
func (e *env) settle(c *redlock.Client) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(e.t, c.Close(ctx), "background work did not finish")
}

// value returns what server i holds under key ("" when absent).
func (e *env) value(i int, key string) string {
	e.t.Helper()
	return readKey(e.t, context.Background(), e.direct[i], key)
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

// quorumHolders counts the servers that hold key for its most common
// holder: Acquire returns at a quorum, so a node read at once may not have
// taken the key yet.
func (e *env) quorumHolders(key string) int {
	e.t.Helper()
	most := 0
	for i := range e.direct {
		if v := e.value(i, key); v != "" {
			most = max(most, e.holders(key, v))
		}
	}
	return most
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
	return commandCalls(e.t, context.Background(), e.direct[i])[command]
}

// The helpers below look at a node directly, whatever runs it: a process
// of env or a container of the chaos suite.

// inspect runs fn with a short-lived client of the node at addr whose reads
// are bounded by their context, for a test's own look at a node.
func inspect(t testing.TB, addr string, fn func(context.Context, *redis.Client)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	fn(ctx, rc)
}

// readKey returns the holder's token that rc's node holds under key, "" if
// nothing: a lock writes its token, a dot and a generation. Other values are
// returned whole.
func readKey(t testing.TB, ctx context.Context, rc *redis.Client, key string) string {
	t.Helper()
	return holderOf(rawKey(t, ctx, rc, key))
}

// rawKey returns what rc's node holds under key, "" if nothing.
func rawKey(t testing.TB, ctx context.Context, rc *redis.Client, key string) string {
	t.Helper()
	v, err := rc.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// holderOf is the token in a lock's value (token "." generation, or for a
// Lock of an owner token "~" id "." generation, then, after an owner's
// takeover, "|" and the value it replaced); a tombstone, which every
// lock reads as an absent key, is ""; a value of another form is returned
// whole.
func holderOf(v string) string {
	if strings.HasPrefix(v, "!") {
		return ""
	}
	v, _, _ = strings.Cut(v, "|") // what an owner's takeover replaced
	if i := strings.LastIndexByte(v, '.'); i > 0 {
		if _, err := strconv.ParseUint(v[i+1:], 10, 64); err == nil {
			token, _, _ := strings.Cut(v[:i], "~")
			return token
		}
	}
	return v
}

// commandCalls returns how many times rc's node has run each command (lower
// case), from INFO commandstats; commands run by scripts count too.
func commandCalls(t testing.TB, ctx context.Context, rc *redis.Client) map[string]int {
	t.Helper()
	info, err := rc.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	out := make(map[string]int)
	for line := range strings.Lines(info) {
		// cmdstat_set:calls=12,usec=...
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		cmd, rest, _ := strings.Cut(rest, ":calls=")
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		require.NoError(t, err, line)
		out[cmd] = n
	}
	return out
}

// loadScripts loads the library's scripts/*.lua on the nodes at addrs, as
// a running service has them cached: go-redis sends EVALSHA first, and on a
// stalled node the NOSCRIPT reply would arrive too late for the fallback to
// EVAL to be sent, so no write would land there, which is not the case under
// test. A node started again has lost them. TestLoadScripts checks that the
// library finds every script it runs already loaded.
func loadScripts(t testing.TB, addrs ...string) {
	t.Helper()
	files, err := filepath.Glob("scripts/*.lua")
	require.NoError(t, err)
	require.NotEmpty(t, files, "the library's scripts/*.lua")
	for _, addr := range addrs {
		inspect(t, addr, func(ctx context.Context, rc *redis.Client) {
			for _, f := range files {
				src := scriptSource(t, f)
				require.NoError(t, rc.ScriptLoad(ctx, src).Err(), "SCRIPT LOAD %s on %s", f, addr)
			}
		})
	}
}

// scriptSource is the script that the library runs for scripts/ file f:
// the acquire scripts call take(), which scripts/take.lua, prepended,
// defines, and the scripts that write a lock key use what scripts/lib.lua,
// prepended before it, defines.
func scriptSource(t testing.TB, f string) string {
	t.Helper()
	read := func(f string) string {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		return string(src)
	}
	src := read(f)
	switch filepath.Base(f) {
	case "lib.lua", "take.lua":
		return src
	}
	if strings.Contains(src, "take(") {
		src = read("scripts/take.lua") + src
	}
	if strings.Contains(src, "tomb_") || strings.Contains(src, "chain_") {
		src = read("scripts/lib.lua") + src
	}
	return src
}

// TestLoadScripts runs every kind of call, fenced or not, on a node whose
// scripts loadScripts loaded: if the library sent a script that is not a
// file of scripts/ as it stands, the node would have answered NOSCRIPT and
// seen an EVAL.
func TestLoadScripts(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	loadScripts(t, s.Addr())
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := t.Context()
	for _, opts := range [][]redlock.Option{nil, {redlock.WithFencing()}} {
		c, err := redlock.New([]redis.UniversalClient{rc}, opts...)
		require.NoError(t, err)
		key := newKey(t)
		l, err := c.TryAcquire(ctx, key, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Extend(ctx, time.Minute))
		_, err = c.TryAcquire(ctx, key, time.Minute) // refused, and rolled back
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.NoError(t, l.Release(ctx))
		require.NoError(t, c.Close(ctx))
	}
	calls := commandCalls(t, ctx, rc)
	assert.Positive(t, calls["evalsha"], "no script ran")
	assert.Zero(t, calls["eval"], "a script the library runs is not in scripts/ as loaded")
}
