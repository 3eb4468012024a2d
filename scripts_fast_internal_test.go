package redlock

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	slowAcquire := redis.NewScript(takeFair + acquireSrc)
	slowRelease := redis.NewScript(libSrc + releaseSrc + releaseOneSrc)
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
		{"release A", releaseScript, slowRelease, []any{lockA, 0, 6, 2000}},
		{"release A, writes up to 4", releaseScript, slowRelease, []any{lockA, 0, 4, 2000}},
		{"rollback A to 4", releaseScript, slowRelease, []any{lockA, 4, 4, 2000}},
		{"rollback A to 5", releaseScript, slowRelease, []any{lockA, 5, 5, 2000}},
		{"rollback A to 6", releaseScript, slowRelease, []any{lockA, 6, 6, 2000}},
		{"rollback A to 5, writes up to 6", releaseScript, slowRelease, []any{lockA, 5, 6, 2000}},
		{"release B", releaseScript, slowRelease, []any{lockB, 0, 7, 2000}},
		{"release Y", releaseScript, slowRelease, []any{lockY, 0, 3, 500}},
	}
	states := []struct {
		name string
		put  func(n *scriptNode)
	}{
		{"absent", func(*scriptNode) {}},
		{"A's plain value", func(n *scriptNode) { n.set(lockA+"5", 20*time.Second) }},
		{"Y's plain value", func(n *scriptNode) { n.set(lockY+"5", 20*time.Second) }},
		{"A's value, no expiry", func(n *scriptNode) { n.set(lockA+"5", 0) }},
		{"A's value carrying two entries", func(n *scriptNode) {
			n.set(lockA+"5,"+strconv.FormatInt(n.now()+1500, 10)+"!"+entryOf(lockB, 2)+","+entryOf(lockY, 3), 20*time.Second)
		}},
		{"A's value carrying eight entries", func(n *scriptNode) {
			v := lockA + "5," + strconv.FormatInt(n.now()+1500, 10) + "!"
			for i := range 8 {
				v += entryOf(fmt.Sprintf("L%d.", i), uint64(i+1)) + ","
			}
			n.set(strings.TrimSuffix(v, ","), 20*time.Second)
		}},
		{"a tombstone of two Locks", func(n *scriptNode) {
			n.set("!"+entryOf(lockY, 3)+","+entryOf(lockB, 2), 1500*time.Millisecond)
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
				n.t, n.key = t, fastKey
				s.put(n)
				for _, suffix := range []string{"", waitSuffix} {
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
				fast, fastErr := c.fast.Run(ctx, n.rc, []string{fastKey}, c.args...).Result()
				slow, slowErr := c.slow.Run(ctx, n.rc, []string{slowKey}, c.args...).Result()
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
				slowRoom := n.room()
				n.key = fastKey
				assert.Equal(t, slowRoom, n.room(), "the fast path left the waiting room otherwise")
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

// TestTombBoundSpelling: the fast paths read no clock where a TTL or a
// tombstone's life is at least tombBoundMs, the longest any carried
// entry must still refuse (lib.lua): it must be tombstoneTTL, the longest
// a delete asks a tombstone to live (tombLifeMs), or a fast path would
// let entries go before they are due.
func TestTombBoundSpelling(t *testing.T) {
	want := "local tombBoundMs = " + strconv.FormatInt(tombstoneTTL.Milliseconds(), 10) + "\n"
	for name, src := range map[string]string{"acquire_fast.lua": acquireFastSrc, "release_fast.lua": releaseFastSrc} {
		if strings.Count(src, want) != 1 || strings.Count(src, "tombBoundMs =") != 1 {
			t.Errorf("scripts/%s does not define %q once", name, strings.TrimSpace(want))
		}
	}
	if got := tombLifeMs(time.Hour); got != tombstoneTTL.Milliseconds() {
		t.Errorf("a delete of a long Lock asks for a tombstone of %d ms, not tombstoneTTL", got)
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

// TestFastPathCommands: what a key taken again within a tombstone's life
// costs the node, the hot key's case (docs/benchmarks.md): the acquire an
// MGET, a TIME and a SET, the release of that value a GET, a SET and a
// PUBLISH, no clock read (tombBoundMs); with a TTL under tombBoundMs the
// acquire takes the whole script, which reads the tombstone's life.
func TestFastPathCommands(t *testing.T) {
	n := newScriptNode(t)
	ctx := context.Background()
	require.NoError(t, acquireScript.Load(ctx, n.rc).Err())
	require.NoError(t, releaseScript.Load(ctx, n.rc).Err())
	counts := func() map[string]int {
		out := map[string]int{}
		for _, l := range strings.Split(n.rc.Info(ctx, "commandstats").Val(), "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "cmdstat_"), ":calls=")
			if !ok || strings.HasPrefix(l, "#") || name == "config|resetstat" || name == "info" {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			out[name], _ = strconv.Atoi(calls)
		}
		require.NoError(t, n.rc.ConfigResetStat(ctx).Err())
		return out
	}
	n.key = "fastcmds"
	n.set("!"+entryOf(lockY, 3)+","+entryOf(lockB, 2), 1500*time.Millisecond)
	counts()
	require.EqualValues(t, 1, n.run(acquireScript, []string{n.key}, lockA+"1", 10_000, holderOfLock(lockA), 1))
	assert.Equal(t, map[string]int{"evalsha": 1, "mget": 1, "time": 1, "set": 1}, counts(), "the acquire over a tombstone")
	v := n.rc.Get(ctx, n.key).Val()
	assert.Contains(t, v, entryOf(lockY, 3), "the value does not carry the tombstone's entries: %q", v)
	counts()
	require.EqualValues(t, 1, n.run(releaseScript, []string{n.key}, lockA, 0, 1, 2000))
	assert.Equal(t, map[string]int{"evalsha": 1, "get": 1, "set": 1, "publish": 1}, counts(), "the release of a value that carries entries")
	for _, e := range []string{entryOf(lockA, 1), entryOf(lockY, 3), entryOf(lockB, 2)} {
		assert.Contains(t, n.rc.Get(ctx, n.key).Val(), e, "the tombstone lost an entry")
	}
	assert.Greater(t, n.rc.PTTL(ctx, n.key).Val(), 1900*time.Millisecond, "the tombstone lives less than 2 s")

	counts()
	require.EqualValues(t, 1, n.run(acquireScript, []string{n.key}, lockB+"3", 1000, holderOfLock(lockB), 3))
	assert.Positive(t, counts()["pttl"], "a TTL under 2 s over a tombstone: the whole script reads its life")
	assert.Greater(t, n.rc.PTTL(ctx, n.key).Val(), 1500*time.Millisecond, "the value lives less than the tombstone it took over")
}
