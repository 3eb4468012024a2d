package redlock

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFastPathsChangeNothing: the fast paths of acquire and release
// (acquire_fast.lua, release_fast.lua) answer and write exactly as the
// whole scripts do, for every state of the late-writes table, an absent
// key, our plain value and another holder's, and every kind of call: the
// same state is put under two keys (one DUMPed and RESTOREd from the other),
// one gets the script with its fast path, the other the script without it.
func TestFastPathsChangeNothing(t *testing.T) {
	n := newScriptNode(t)
	ctx := context.Background()
	slowAcquire := redis.NewScript(libSrc + takeSrc + acquireSrc)
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
		{"acquire A gen 4", acquireScript, slowAcquire, acq(lockA, 4)},
		{"acquire B", acquireScript, slowAcquire, acq(lockB, 7)},
		{"acquire Y", acquireScript, slowAcquire, acq(lockY, 1)},
		{"release A", releaseScript, slowRelease, []any{lockA, 0}},
		{"rollback A to 4", releaseScript, slowRelease, []any{lockA, 4}},
		{"rollback A to 5", releaseScript, slowRelease, []any{lockA, 5}},
		{"rollback A to 6", releaseScript, slowRelease, []any{lockA, 6}},
		{"release A, tombstone", releaseScript, slowRelease, []any{lockA, 0, 6, 2000}},
		{"rollback A to 5, tombstone", releaseScript, slowRelease, []any{lockA, 5, 6, 2000}},
		{"release B", releaseScript, slowRelease, []any{lockB, 0}},
		{"release Y", releaseScript, slowRelease, []any{lockY, 0}},
	}
	states := []struct {
		name string
		put  func(n *scriptNode)
	}{
		{"absent", func(*scriptNode) {}},
		{"A's plain value", func(n *scriptNode) { n.set(lockA+"5", 20*time.Second) }},
		{"Y's plain value", func(n *scriptNode) { n.set(lockY+"5", 20*time.Second) }},
		{"A's value, no expiry", func(n *scriptNode) { n.set(lockA+"5", 0) }},
	}
	states = append(states, lateStates...)

	// Chain deadlines are the node's clock plus a TTL: two runs a
	// millisecond apart may differ there and nowhere else.
	deadline := regexp.MustCompile(`\|[0-9]+:`)
	seen := map[string]int{}
	for si, s := range states {
		for ci, c := range calls {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				base := "fast:" + strconv.Itoa(si) + ":" + strconv.Itoa(ci)
				fastKey, slowKey := base+":f", base+":s"
				n.t, n.key = t, fastKey
				s.put(n)
				if dump, err := n.rc.Dump(ctx, fastKey).Result(); err == nil {
					pttl := n.rc.PTTL(ctx, fastKey).Val()
					if pttl < 0 {
						pttl = 0
					}
					require.NoError(t, n.rc.Restore(ctx, slowKey, pttl, dump).Err())
				} else {
					require.ErrorIs(t, err, redis.Nil)
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
				assert.Equal(t, deadline.ReplaceAllString(sv, "|D:"), deadline.ReplaceAllString(fv, "|D:"), "the fast path wrote otherwise")
				fp, sp := n.rc.PTTL(ctx, fastKey).Val(), n.rc.PTTL(ctx, slowKey).Val()
				assert.InDelta(t, sp.Milliseconds(), fp.Milliseconds(), 200, "expiries differ: fast %v, slow %v", fp, sp)
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
