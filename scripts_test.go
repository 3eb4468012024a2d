package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestLoadScripts runs every kind of call, fenced or not, on a node whose
// scripts nodetest.LoadScripts loaded: if the library sent a script that is not a
// file of scripts/ as it stands, the node would have answered NOSCRIPT and
// seen an EVAL.
func TestLoadScripts(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	nodetest.LoadScripts(t, s.Addr())
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
		// The same over several keys.
		keys := []string{key + ":a", key + ":b"}
		la, err := c.TryAcquireAll(ctx, keys, time.Minute)
		require.NoError(t, err)
		require.NoError(t, la.Extend(ctx, time.Minute))
		_, err = c.TryAcquireAll(ctx, keys, time.Minute)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.NoError(t, la.Release(ctx))
		require.NoError(t, c.Close(ctx))
	}
	calls := nodetest.CommandCalls(t, ctx, rc)
	assert.Positive(t, calls["evalsha"], "no script ran")
	assert.Zero(t, calls["eval"], "a script the library runs is not in scripts/ as loaded")
}

// scriptSHA is the hash the library sends for scripts/ file f.
func scriptSHA(t *testing.T, f string) []byte {
	t.Helper()
	sum := sha1.Sum([]byte(nodetest.ScriptSource(t, f)))
	return []byte(hex.EncodeToString(sum[:]))
}

// TestLeastPrivilegeACL runs the two rules of docs/operations.md on a node
// that enforces them: plain locks under the first; every option and
// feature under the second, with no command refused, every command the
// library sent named in it, and every command of the scripts both named in
// it and sent (so the run covered them).
func TestLeastPrivilegeACL(t *testing.T) {
	rules := docACLRules(t)
	require.Len(t, rules, 2, "docs/operations.md: the least-privilege rules")
	base, full := rules[0], rules[1]
	for _, w := range base {
		require.Contains(t, full, w, "the rule for every feature lacks a word of the plain one")
	}
	for _, w := range []string{"+time", "~{lock:*}:redlock:fence"} { // what fencing adds, in the prose
		require.Contains(t, full, w)
	}
	s := redistest.StartT(t, 1)[0]
	ctx := t.Context()
	admin := s.Client()
	setUser := func(name string, rule []string) {
		args := []any{"ACL", "SETUSER", name}
		for _, w := range rule {
			args = append(args, w)
		}
		require.NoError(t, admin.Do(ctx, args...).Err())
	}
	nodes := func(user string) []redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: user, Password: "secret", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		return []redis.UniversalClient{c}
	}
	setUser("locker", base)
	setUser("fencer", append(slices.Clone(base), "+time", "~{lock:*}:redlock:fence"))
	setUser("full", full)

	t.Run("plain", func(t *testing.T) {
		for _, tc := range []struct {
			user string
			opts []redlock.Option
		}{{"locker", nil}, {"fencer", []redlock.Option{redlock.WithFencing()}}} {
			c, err := redlock.New(nodes(tc.user), tc.opts...)
			require.NoError(t, err)
			require.NoError(t, c.Warm(ctx), "Warm under the ACL")
			l, err := c.TryAcquire(ctx, "lock:acl", time.Minute)
			require.NoError(t, err, tc.user)
			require.NoError(t, l.Extend(ctx, time.Minute), tc.user)
			require.NoError(t, l.Release(ctx), tc.user)
			require.NoError(t, c.Close(ctx))
		}
		// Fencing without the counter's pattern is refused by the server.
		c, err := redlock.New(nodes("locker"), redlock.WithFencing())
		require.NoError(t, err)
		_, err = c.TryAcquire(ctx, "lock:acl2", time.Minute)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		assert.Contains(t, err.Error(), "NOPERM")
		require.NoError(t, c.Close(ctx))
	})

	t.Run("every feature", func(t *testing.T) {
		require.NoError(t, admin.ACLLogReset(ctx).Err())
		before := nodetest.CommandCalls(t, ctx, admin)
		exerciseEveryFeature(t, func() []redis.UniversalClient { return nodes("full") })
		after := nodetest.CommandCalls(t, ctx, admin)

		entries, err := admin.ACLLog(ctx, 100).Result()
		require.NoError(t, err)
		for _, e := range entries {
			if e.Username == "full" && !slices.Contains(connectionCommands, e.Object) {
				t.Errorf("refused: %s %q (%s, %d times)", e.Reason, e.Object, e.Context, e.Count)
			}
		}
		sent := map[string]bool{}
		for cmd, n := range after {
			if n > before[cmd] && cmd != "info" || n > before[cmd]+1 { // the INFO that read after
				sent[cmd] = true
			}
		}
		for cmd := range sent {
			if !slices.Contains(connectionCommands, cmd) && !aclAllows(full, cmd) {
				t.Errorf("the library sent %s, which the rule does not name", cmd)
			}
		}
		for _, cmd := range scriptCommands(t) {
			assert.True(t, aclAllows(full, cmd), "a script calls %s, which the rule does not name", cmd)
			assert.True(t, sent[cmd], "a script calls %s, which the run never sent: add the feature that sends it", cmd)
		}
		t.Logf("commands sent: %v", slices.Sorted(func(yield func(string) bool) {
			for c := range sent {
				if !yield(c) {
					return
				}
			}
		}))
	})
}

// docACLRules returns the rules of docs/operations.md's least-privilege
// section, in order: the words after "ACL SETUSER <user>" of each of its
// code blocks that sets a user.
func docACLRules(t *testing.T) [][]string {
	t.Helper()
	text, err := os.ReadFile("docs/operations.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(text), "## Least-privilege ACL\n")
	require.True(t, ok, "docs/operations.md has no least-privilege section")
	section, _, _ = strings.Cut(section, "\n## ")
	var rules [][]string
	for _, m := range regexp.MustCompile("(?m)^```\n(ACL SETUSER .*)\n```$").FindAllStringSubmatch(section, -1) {
		rules = append(rules, strings.Fields(m[1])[3:])
	}
	return rules
}

// aclAllows reports whether rule names command (lower case, "parent|sub"
// for a subcommand), itself or its parent.
func aclAllows(rule []string, command string) bool {
	parent, _, _ := strings.Cut(command, "|")
	return slices.Contains(rule, "+"+command) || slices.Contains(rule, "+"+parent)
}

// scriptCommands returns the commands that the library's scripts call,
// lower case, a subcommand as "parent|sub".
func scriptCommands(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("scripts/*.lua")
	require.NoError(t, err)
	call := regexp.MustCompile(`redis\.p?call\(\s*'(\w+)'|pcall\(\s*redis\.call\s*,\s*'(\w+)'(?:\s*,\s*'(\w+)')?`)
	var out []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			cmd := strings.ToLower(m[1] + m[2])
			if cmd == "pubsub" && m[3] != "" {
				cmd += "|" + strings.ToLower(m[3])
			}
			out = append(out, cmd)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// connectionCommands are what go-redis sends on a new connection, not the
// library: a user's client needs them whatever it does.
var connectionCommands = []string{"auth", "hello", "client|setinfo", "select"}

// exerciseEveryFeature runs, on the one node that fresh() returns clients
// of, every feature of the library with every option: fencing and the
// restart guard, Warm, acquire, Extend, TTL, Inspect, KeepAlive, Do,
// Release, waiting woken across Clients, a handover within a Client (one
// without those options), and an owner's takeover across Clients.
func exerciseEveryFeature(t *testing.T, fresh func() []redis.UniversalClient) {
	ctx := t.Context()
	var failed atomic.Int32 // failed attempts on the waiting keys
	hooks := redlock.WithHooks(redlock.Hooks{Attempt: func(a redlock.Event) {
		if a.Err != nil && strings.HasPrefix(a.Key, "lock:wait") {
			failed.Add(1)
		}
	}})
	newClient := func(opts ...redlock.Option) *redlock.Client {
		c, err := redlock.New(fresh(), append([]redlock.Option{hooks, slowRetry}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			require.NoError(t, c.Close(cctx))
		})
		require.NoError(t, c.Warm(ctx))
		return c
	}
	every := []redlock.Option{redlock.WithFencing(), redlock.WithRestartGuard(time.Millisecond)}
	c1, c2 := newClient(every...), newClient(every...)
	plain := newClient() // a Client hands over only without fencing and the guard
	// The node is new to the guard: the first acquire starts it.
	require.Eventually(t, func() bool {
		l, err := c1.TryAcquire(ctx, "lock:guard", time.Second)
		if err == nil {
			require.NoError(t, l.Release(ctx))
		}
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "the guard did not let the node vote")

	l, err := c1.Acquire(ctx, "lock:acl", time.Minute)
	require.NoError(t, err)
	require.NotZero(t, l.Fence())
	require.NoError(t, l.Extend(ctx, time.Minute))
	_, err = l.TTL(ctx)
	require.NoError(t, err)
	st, err := c1.Inspect(ctx, "lock:acl")
	require.NoError(t, err)
	require.True(t, st.Held)
	require.NoError(t, l.Release(ctx))

	kept, err := c1.Acquire(ctx, "lock:kept", 300*time.Millisecond)
	require.NoError(t, err)
	until := kept.Until()
	kctx := kept.KeepAlive(ctx)
	require.Eventually(t, func() bool { return kept.Until().After(until) }, 10*time.Second, time.Millisecond, "no renewal")
	require.NoError(t, kctx.Err())
	require.NoError(t, kept.Release(ctx))
	require.NoError(t, c1.Do(ctx, "lock:do", time.Minute, func(context.Context, *redlock.Lock) error { return nil }))
	// An election: its settle and leader scripts, and the record's key.
	el, err := c1.Election("lock:leader", time.Minute)
	require.NoError(t, err)
	ld, err := el.Campaign(ctx, "host-a")
	require.NoError(t, err)
	leader, err := el.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, ld.Term(), leader.Term)
	require.NoError(t, ld.Resign(ctx))

	// A shared Lock and a permit, each acquired, extended, inspected and
	// released.
	for _, opt := range []redlock.AcquireOption{redlock.Shared(), redlock.Permits(2)} {
		l, err := c1.Acquire(ctx, "lock:along", 300*time.Millisecond, opt)
		require.NoError(t, err)
		require.NoError(t, l.Extend(ctx, time.Minute))
		_, err = l.TTL(ctx)
		require.NoError(t, err)
		st, err := c1.Inspect(ctx, "lock:along")
		require.NoError(t, err)
		require.True(t, st.Held)
		require.NoError(t, l.Release(ctx))
	}

	// Waiting: a waiter of c2 is woken by c1's release; then a waiter of
	// plain is handed plain's lock.
	for i, pair := range [][2]*redlock.Client{{c1, c2}, {plain, plain}} {
		holder, waiter := pair[0], pair[1]
		key := "lock:wait" + string(rune('a'+i))
		h, err := holder.Acquire(ctx, key, time.Minute)
		require.NoError(t, err)
		failed.Store(0)
		got := make(chan error, 1)
		go func() {
			l, err := waiter.Acquire(ctx, key, time.Minute)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		require.Eventually(t, func() bool { return failed.Load() >= 2 }, 10*time.Second, time.Millisecond,
			"the waiter did not wait after subscribing")
		require.NoError(t, h.Release(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("the waiter never acquired")
		}
	}

	// An owner's Lock taken over by the same owner from another Client.
	o1, err := c1.Acquire(ctx, "lock:owned", time.Minute, redlock.WithOwner("job-7"))
	require.NoError(t, err)
	o2, err := c2.Acquire(ctx, "lock:owned", time.Minute, redlock.WithOwner("job-7"))
	require.NoError(t, err)
	require.NoError(t, o2.Release(ctx))
	require.ErrorIs(t, o1.Release(ctx), redlock.ErrNotHeld)
}
