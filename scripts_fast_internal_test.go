package redlock

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/script"
)

// TestFastPathsChangeNothing: the fast paths of acquire and release
// (acquire_fast.lua, release_fast.lua) answer and write exactly as the
// whole scripts do, for every state of the late-writes table, an absent
// key, our plain value and another holder's, a waiting room with readers
// or writers in it, and every kind of call: the same state is put under
// two keys and their waiting rooms (DUMPed and RESTOREd from the first),
// one gets the script with its fast path, the other the script without it.
func TestFastPathsChangeNothing(t *testing.T) {
	n := newScriptNode(t)
	ctx := context.Background()
	slowAcquire := redis.NewScript(writing + takeFair + acquireSrc)
	slowRelease := redis.NewScript(deleting + libSrc + releaseSrc + releaseOneSrc)
	require.NotEqual(t, slowAcquire.Hash(), acquireScript.Hash(), "the library's acquire has no fast path")
	require.NotEqual(t, slowRelease.Hash(), releaseScript.Hash(), "the library's release has no fast path")

	acq := func(p string, gen int) []any {
		return []any{p + strconv.Itoa(gen), 20_000, holderOfLock(p), gen}
	}
	calls := []struct {
		name       string
		fast, slow *redis.Script
		args       []any
	}{
		{"acquire A gen 5", acquireScript, slowAcquire, acq(lockA, 5)},
		{"acquire A gen 6", acquireScript, slowAcquire, acq(lockA, 6)},
		{"acquire A gen 6, TTL 1.5 s", acquireScript, slowAcquire, []any{lockA + "6", 1500, holderOfLock(lockA), 6}},
		{"acquire A gen 4", acquireScript, slowAcquire, acq(lockA, 4)},
		{"acquire B", acquireScript, slowAcquire, acq(lockB, 7)},
		{"acquire Y", acquireScript, slowAcquire, acq(lockY, 1)},
		{"release A", releaseScript, slowRelease, []any{lockA, 0, 6}},
		{"release A, writes up to 4", releaseScript, slowRelease, []any{lockA, 0, 4}},
		{"rollback A to 4", releaseScript, slowRelease, []any{lockA, 4, 4}},
		{"rollback A to 5", releaseScript, slowRelease, []any{lockA, 5, 5}},
		{"rollback A to 6", releaseScript, slowRelease, []any{lockA, 6, 6}},
		{"rollback A to 5, writes up to 6", releaseScript, slowRelease, []any{lockA, 5, 6}},
		{"release B", releaseScript, slowRelease, []any{lockB, 0, 7}},
		{"release Y", releaseScript, slowRelease, []any{lockY, 0, 3}},
	}
	states := []struct {
		name string
		put  func(n *scriptNode)
	}{
		{"absent", func(*scriptNode) {}},
		{"A's plain value", func(n *scriptNode) { n.set(lockA+"5", 20*time.Second) }},
		{"Y's plain value", func(n *scriptNode) { n.set(lockY+"5", 20*time.Second) }},
		{"A's value, no expiry", func(n *scriptNode) { n.set(lockA+"5", 0) }},
		{"an earlier version's value carrying entries", func(n *scriptNode) {
			n.set(lockA+"5,"+strconv.FormatInt(n.now()+1500, 10)+oldTombstoneOf(lockB, 2)+","+strings.TrimPrefix(oldTombstoneOf(lockY, 3), "!"), 20*time.Second)
		}},
		{"an earlier version's tombstone of two Locks", func(n *scriptNode) {
			n.set(oldTombstoneOf(lockY, 3)+","+strings.TrimPrefix(oldTombstoneOf(lockB, 2), "!"), 1500*time.Millisecond)
		}},
	}
	states = append(states, lateStates...)
	room := func(entries ...string) func(n *scriptNode) {
		return func(n *scriptNode) {
			dl := strconv.FormatInt(n.now()+20_000, 10)
			parts := make([]string, len(entries))
			for i, e := range entries {
				parts[i] = dl + "=" + e
			}
			require.NoError(n.t, n.rc.Set(context.Background(), n.key+waitSuffix, strings.Join(parts, ","), 20*time.Second).Err())
		}
	}
	states = append(states, []struct {
		name string
		put  func(n *scriptNode)
	}{
		{"a reader waited through a writer's turn", room("R" + shareR)},
		{"a reader waits behind a writer", room("w"+lockY, "r"+shareR)},
		{"a writer waits", room("w" + lockY)},
		{"a reader was admitted", room("a" + shareR)},
		{"our value, a reader waits", func(n *scriptNode) { n.set(lockA+"5", 20*time.Second); room("R" + shareR)(n) }},
	}...)

	// Chain deadlines and carried entries' deadlines are the node's clock
	// plus a TTL: two runs a millisecond apart may differ there and
	// nowhere else.
	deadline := regexp.MustCompile(`([|,])[0-9]+([:!])`)
	seen := map[string]int{}
	for si, s := range states {
		for ci, c := range calls {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				base := "fast:" + strconv.Itoa(si) + ":" + strconv.Itoa(ci)
				fastKey, slowKey := base+":f", base+":s"
				n.t, n.key, n.at = t, fastKey, 0
				s.put(n)
				for _, suffix := range lateSuffixes {
					if dump, err := n.rc.Dump(ctx, fastKey+suffix).Result(); err == nil {
						pttl := n.rc.PTTL(ctx, fastKey+suffix).Val()
						if pttl < 0 {
							pttl = 0
						}
						require.NoError(t, n.rc.Restore(ctx, slowKey+suffix, pttl, dump).Err())
					} else {
						require.ErrorIs(t, err, redis.Nil)
					}
				}
				fast, fastErr := n.withPair(c.fast, fastKey, c.args).Result()
				slow, slowErr := n.withPair(c.slow, slowKey, c.args).Result()
				if slowErr != nil && fastErr != nil && strings.HasPrefix(slowErr.Error(), "LATE ") {
					require.True(t, strings.HasPrefix(fastErr.Error(), "LATE "), "the fast path answered %v", fastErr)
					slowErr, fastErr = nil, nil
				}
				require.Equal(t, slowErr, fastErr)
				require.Equal(t, fmtReply(slow), fmtReply(fast), "the fast path answered otherwise: %v, not %v", fast, slow)
				if fmtReply(slow) == "refused" {
					// -(pttl + 1): the two calls ran a millisecond or so apart.
					assert.InDelta(t, slow, fast, 200, "the refusals' remaining times differ")
				} else {
					require.Equal(t, slow, fast, "the fast path answered otherwise")
				}
				fv, sv := n.rc.Get(ctx, fastKey).Val(), n.rc.Get(ctx, slowKey).Val()
				assert.Equal(t, deadline.ReplaceAllString(sv, "${1}D$2"), deadline.ReplaceAllString(fv, "${1}D$2"), "the fast path wrote otherwise")
				fp, sp := n.rc.PTTL(ctx, fastKey).Val(), n.rc.PTTL(ctx, slowKey).Val()
				assert.InDelta(t, sp.Milliseconds(), fp.Milliseconds(), 200, "expiries differ: fast %v, slow %v", fp, sp)
				n.key = slowKey
				slowRoom, slowRefusals := n.room(), n.refusalsOf(lockA, lockB, lockY)
				n.key = fastKey
				assert.Equal(t, slowRoom, n.room(), "the fast path left the waiting room otherwise")
				assert.Equal(t, slowRefusals, n.refusalsOf(lockA, lockB, lockY), "the fast path left the refusals otherwise")
				seen[fmtReply(fast)]++
			})
		}
	}
	// Both paths were taken: the fast one's answers (1 and 0) and the
	// whole script's (refusals, stale calls, takeovers).
	t.Logf("answers: %v", seen)
	for _, want := range []string{"1", "0", "2", "-1", "6"} {
		assert.Positive(t, seen[want], "no call answered %s", want)
	}
}

func fmtReply(v any) string {
	if i, ok := v.(int64); ok {
		if i < -1 {
			return "refused"
		}
		return strconv.FormatInt(i, 10)
	}
	return "other"
}

// lateSuffixes are what follows a key in the names of the values the
// fast paths' cases touch: the key, its waiting room, and the refusals keys
// of Locks A, B and Y.
var lateSuffixes = []string{"", waitSuffix,
	script.RefusalsKeyOf("", lockA, false), script.RefusalsKeyOf("", lockB, false), script.RefusalsKeyOf("", lockY, false)}

// withPair runs s on key with args, as the library sends them, with the
// pair of the Lock that args[0] names (scriptNode.run).
func (n *scriptNode) withPair(s *redis.Script, key string, args []any) *redis.Cmd {
	p := args[0].(string)
	if !strings.HasSuffix(p, ".") {
		p = strings.TrimRight(p, "0123456789")
	}
	return s.Run(context.Background(), n.rc, []string{script.RefusalsKeyOf(key, p, false), key}, append([]any{n.deadline()}, args...)...)
}

// refusalsOf is what the refusals keys of locks hold for the node's key,
// the node-clock milliseconds left out: two runs a millisecond apart may
// differ there.
func (n *scriptNode) refusalsOf(locks ...string) []string {
	out := make([]string, len(locks))
	for i, p := range locks {
		g, _, _ := strings.Cut(n.refusal(p), ":")
		out[i] = g
	}
	return out
}

// TestFastPathCommands: what an uncontended acquire and its release cost
// the node (docs/benchmarks.md): the acquire a TIME, an MGET and a SET;
// the release a GET, a DEL and a PUBLISH,
// and within the writes' deadline the SET of the Lock's refusal. Past it
// the engine sends no deadline (0) where it knows the node's clock passed
// it, and the release is a token-checked delete; where it cannot tell, it
// sends the deadline, and the SET of a refusal at a past moment leaves
// nothing.
func TestFastPathCommands(t *testing.T) {
	n := newScriptNode(t)
	ctx := context.Background()
	require.NoError(t, acquireScript.Load(ctx, n.rc).Err())
	require.NoError(t, releaseScript.Load(ctx, n.rc).Err())
	counts := func() map[string]int {
		out := map[string]int{}
		for _, l := range strings.Split(n.rc.Info(ctx, "commandstats").Val(), "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "cmdstat_"), ":calls=")
			if !ok || strings.HasPrefix(l, "#") || name == "config|resetstat" || name == "info" || name == "time" && n.at == 0 {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			out[name], _ = strconv.Atoi(calls)
		}
		require.NoError(t, n.rc.ConfigResetStat(ctx).Err())
		return out
	}
	for _, c := range []struct {
		name string
		past bool
		at   func() int64 // what the release sends
		sets int
	}{
		{"within", false, n.deadline, 1},
		{"past, known", true, func() int64 { return 0 }, 0},
		{"past, not known", true, n.deadline, 1},
	} {
		n.key, n.at = "fastcmds:"+c.name, 0
		n.at = n.deadline()
		counts()
		require.EqualValues(t, 1, n.run(acquireScript, []string{n.key}, lockA+"1", 10_000, holderOfLock(lockA), 1))
		assert.Equal(t, map[string]int{"evalsha": 1, "time": 1, "mget": 1, "set": 1}, counts(), "the acquire")
		if c.past {
			n.past()
		}
		counts()
		require.EqualValues(t, 1, n.send(releaseScript, []string{n.refusals(lockA), n.key}, c.at(), lockA, 0, 1))
		want := map[string]int{"evalsha": 1, "get": 1, "del": 1, "publish": 1}
		if c.sets > 0 {
			want["set"] = c.sets
		}
		assert.Equal(t, want, counts(), "the release (%s)", c.name)
		assert.Empty(t, n.get())
		assert.Equal(t, !c.past, n.refuses(lockA, 1), "the refusal: %q", n.refusal(lockA))
	}
}
