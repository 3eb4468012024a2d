package redlock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/waiting"
)

// Shared Locks R and S, as the library sends their calls: a shared Lock's
// holder prefix is its own.
const (
	shareR = "R."
	shareS = "S."
)

// acquireShared is a shared Acquire's attempt of Lock p, which waits:
// refused, it enters the waiting room for roomMs (scripts_wait_internal_test.go).
func (n *scriptNode) acquireShared(p string, gen, ttlMs int) int64 {
	return n.code(acquireSharedScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen, MaxShared, roomMs)
}

func (n *scriptNode) extendShared(p string, gen, ttlMs int) int64 {
	return n.code(extendSharedScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

func (n *scriptNode) restoreShared(p string, gen, ttlMs int) int64 {
	return n.code(restoreSharedScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

// releaseShared takes p's entry out up to generation limit (0: a
// Release), leaving the refusal of p's writes up to gone.
func (n *scriptNode) releaseShared(p string, limit, gone int) int64 {
	return n.code(releaseSharedScript, []string{n.key}, p, limit, gone)
}

// entries are the shared value's items, in order, without deadlines.
func (n *scriptNode) entries() []string {
	v := n.get()
	if !strings.HasPrefix(v, "^") {
		return nil
	}
	var out []string
	for _, e := range strings.Split(v[1:], ",") {
		_, item, _ := strings.Cut(e, "=")
		out = append(out, item)
	}
	return out
}

// TestSharedScripts: what each shared script does with what it finds
// under the key, on a real node.
func TestSharedScripts(t *testing.T) {
	n := newScriptNode(t)
	ctx := context.Background()
	run := n.subtests(t, "shared")
	run("readers together, writer refused, last out deletes the key", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		require.EqualValues(t, 1, n.acquireShared(shareS, 1, 5_000))
		assert.Equal(t, []string{shareR + "1", shareS + "1"}, n.entries())
		assert.Greater(t, n.pttl(), 15*time.Second, "the key lives as long as its last share")
		code := n.acquire(lockY, 1, 20_000)
		require.LessOrEqual(t, code, int64(-15_000), "a writer is refused for the last share's time")
		require.EqualValues(t, 1, n.releaseShared(shareR, 0, 1))
		assert.Equal(t, []string{shareS + "1"}, n.entries(), "S keeps its share")
		assert.True(t, n.refuses(shareR, 1), "R's writes that may still land are refused")
		assert.LessOrEqual(t, n.pttl(), 5*time.Second, "the key lives as long as S's share now")
		ps := n.rc.Subscribe(ctx, waiting.ChannelPrefix+n.key)
		defer ps.Close()
		_, err := ps.Receive(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n.releaseShared(shareS, 0, 1))
		assert.Empty(t, n.get(), "no share left behind")
		assert.True(t, n.refuses(shareS, 1))
		msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		require.NoError(t, err, "the last Release is announced")
		assert.Contains(t, msg.(interface{ String() string }).String(), n.key)
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000), "then a writer takes it")
	})
	run("a writer excludes readers", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		assert.LessOrEqual(t, n.acquireShared(shareR, 1, 20_000), int64(-15_000))
		assert.EqualValues(t, -1, n.extendShared(shareR, 2, 20_000))
		assert.EqualValues(t, 0, n.restoreShared(shareR, 2, 20_000))
		assert.EqualValues(t, -1, n.releaseShared(shareR, 0, 3))
		assert.Equal(t, lockY+"1", n.get(), "the writer's value stays")
		assert.True(t, n.refuses(shareR, 3), "and the reader's writes are refused")
	})
	run("expired shares are absent to a writer", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		now := n.now()
		// A share that expired on the node's clock, beside the entry an
		// earlier version left: the key is still there.
		n.set("^"+strconv.FormatInt(now-1, 10)+"=R.1,"+strconv.FormatInt(now+20_000, 10)+"="+oldTombstoneOf(lockY, 4), 20*time.Second)
		assert.EqualValues(t, 1, n.acquire(lockY, 5, 20_000), "no live share: an absent key")
		assert.Equal(t, lockY+"5", n.get())
	})
	run("a stale handle changes nothing", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 3, 20_000))
		assert.EqualValues(t, 2, n.acquireShared(shareR, 2, 20_000), "an earlier attempt landing late")
		assert.EqualValues(t, 2, n.extendShared(shareR, 2, 20_000), "an earlier extension landing late")
		assert.EqualValues(t, 2, n.releaseShared(shareR, 2, 0), "a rollback of an earlier attempt")
		assert.Equal(t, []string{shareR + "3"}, n.entries())
		assert.EqualValues(t, 1, n.acquireShared(shareR, 4, 20_000), "a retry renews its own share")
		assert.Equal(t, []string{shareR + "4"}, n.entries(), "one entry per Lock")
		assert.EqualValues(t, 1, n.extendShared(shareR, 5, 20_000))
		assert.EqualValues(t, 0, n.restoreShared(shareR, 6, 20_000), "present: nothing to restore")
		assert.EqualValues(t, 1, n.releaseShared(shareR, 0, 6), "a Release takes any generation")
		assert.EqualValues(t, 0, n.extendShared(shareR, 7, 20_000), "an extension never creates a share")
		assert.Empty(t, n.get())
		assert.True(t, n.refuses(shareR, 6))
	})
	run("a late acquire after the rollback is refused", func(t *testing.T) {
		// S holds; R's attempt 2 got no reply; its rollback ran first and
		// left its refusal; the write lands after it.
		require.EqualValues(t, 1, n.acquireShared(shareS, 1, 20_000))
		require.EqualValues(t, 0, n.releaseShared(shareR, 2, 2))
		assert.EqualValues(t, 2, n.acquireShared(shareR, 2, 20_000), "refused by the refusal")
		assert.EqualValues(t, 2, n.restoreShared(shareR, 2, 20_000), "a late restore too")
		assert.Equal(t, []string{shareS + "1"}, n.entries())
		// S leaves: R's refusal goes on refusing R's write, whoever holds.
		require.EqualValues(t, 1, n.releaseShared(shareS, 0, 1))
		assert.Empty(t, n.get())
		assert.EqualValues(t, 2, n.acquireShared(shareR, 2, 20_000))
		assert.EqualValues(t, 1, n.acquireShared(shareR, 3, 20_000), "a later attempt of R")
		assert.EqualValues(t, 1, n.acquireShared(shareS, 2, 20_000))
	})
	run("a writer's refusal holds while shares hold the key", func(t *testing.T) {
		// A writer's rollback left its refusal against its write 4.
		require.EqualValues(t, 0, n.release(lockY, 4, 4))
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 1_000))
		assert.LessOrEqual(t, n.acquire(lockY, 5, 20_000), int64(0), "R holds")
		assert.EqualValues(t, 2, n.acquire(lockY, 4, 20_000), "the late write is refused")
		require.EqualValues(t, 1, n.releaseShared(shareR, 0, 1))
		assert.Empty(t, n.get())
		assert.EqualValues(t, 2, n.acquire(lockY, 4, 20_000), "and once R left")
	})
	run("a rollback where the key is absent leaves the refusal", func(t *testing.T) {
		require.EqualValues(t, 0, n.releaseShared(shareR, 2, 2))
		assert.Empty(t, n.get())
		assert.True(t, n.refuses(shareR, 2))
		assert.EqualValues(t, 2, n.acquireShared(shareR, 2, 20_000))
	})
	run("restore puts a lost share back, never over a writer", func(t *testing.T) {
		require.EqualValues(t, 1, n.restoreShared(shareR, 3, 20_000))
		assert.Equal(t, []string{shareR + "3"}, n.entries())
		require.EqualValues(t, 1, n.releaseShared(shareR, 0, 0))
	})
	run("a waiting writer holds new readers back", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, 300))
		assert.EqualValues(t, script.WriterWaits, n.acquireShared(shareS, 1, 20_000), "S waits behind the writer")
		assert.EqualValues(t, 1, n.acquireShared(shareR, 2, 20_000), "R's own retry renews its share")
		assert.EqualValues(t, 1, n.extendShared(shareR, 3, 20_000), "and R extends")
		require.Eventually(t, func() bool { return n.acquireShared(shareS, 2, 20_000) == 1 }, 5*time.Second, time.Millisecond,
			"the writer's entry expired, S is admitted")
	})
	run("at most MaxShared shares", func(t *testing.T) {
		for k := range 3 {
			require.EqualValues(t, 1, n.code(acquireSharedScript, []string{n.key}, "T"+strconv.Itoa(k)+".1", 20_000, "T"+strconv.Itoa(k)+".", 1, 3, 0))
		}
		assert.EqualValues(t, script.SharedFull, n.code(acquireSharedScript, []string{n.key}, "T9.1", 20_000, "T9.", 1, 3, 0))
	})
	run("the restart guard", func(t *testing.T) {
		marker := n.key + ":boot"
		code := n.code(guardedForm[acquireSharedScript], []string{n.key, marker}, shareR+"1", 20_000, shareR, 1, MaxShared, 0, 60_000)
		assert.EqualValues(t, 3, code, "a new node is within its guard")
		assert.Zero(t, n.rc.Exists(ctx, n.key).Val(), "and took nothing")
	})
}

// A permit's calls, as the library sends them: Lock p of a key's n
// permits.
func (n *scriptNode) acquirePermit(p string, gen, ttlMs, count, pref int) (code, slot int64) {
	n.t.Helper()
	v := n.run(acquirePermitScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen, count, pref)
	if v == "LATE" {
		return lateReply, 0
	}
	r, ok := v.([]any)
	require.True(n.t, ok, "reply %v", v)
	code = r[0].(int64)
	if len(r) > 1 {
		slot = r[1].(int64)
	}
	return code, slot
}

func (n *scriptNode) extendPermit(p string, gen, ttlMs, slot int) int64 {
	return n.code(extendPermitScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen, slot)
}

func (n *scriptNode) restorePermit(p string, gen, ttlMs, slot, count int) int64 {
	return n.code(restorePermitScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen, slot, count)
}

// releasePermit is releaseShared for a permit.
func (n *scriptNode) releasePermit(p string, limit, gone int) int64 {
	return n.code(releasePermitScript, []string{n.key}, p, limit, gone)
}

// TestPermitScripts: what each permit script does with what it finds under
// the key, on a real node.
func TestPermitScripts(t *testing.T) {
	n := newScriptNode(t)
	ctx := context.Background()
	run := n.subtests(t, "permits")
	run("lowest free slot, n at most, last out deletes the key", func(t *testing.T) {
		for k, p := range []string{"A.", "B.", "C."} {
			code, slot := n.acquirePermit(p, 1, 20_000, 3, -1)
			require.EqualValues(t, 1, code)
			require.EqualValues(t, k, slot)
		}
		code, left := n.acquirePermit("D.", 1, 20_000, 3, -1)
		assert.EqualValues(t, 0, code, "the fourth")
		assert.Greater(t, left, int64(15_000), "until the first permit expires")
		require.EqualValues(t, 1, n.releasePermit("B.", 0, 1))
		code, slot := n.acquirePermit("D.", 2, 20_000, 3, 2)
		assert.EqualValues(t, 1, code)
		assert.EqualValues(t, 1, slot, "the preferred slot is taken: the free one")
		for _, p := range []string{"A.", "C.", "D."} {
			require.EqualValues(t, 1, n.releasePermit(p, 0, 2))
		}
		assert.Empty(t, n.get(), "no permit left behind, the count neither")
	})
	run("one count per key, one kind", func(t *testing.T) {
		code, _ := n.acquirePermit("A.", 1, 20_000, 2, -1)
		require.EqualValues(t, 1, code)
		code, found := n.acquirePermit("B.", 1, 20_000, 3, -1)
		assert.EqualValues(t, 7, code, "another count")
		assert.EqualValues(t, 2, found, "the count found")
		assert.EqualValues(t, 7, n.acquire(lockY, 1, 20_000), "an exclusive Lock")
		assert.EqualValues(t, 7, n.code(acquireFencedScript, []string{n.key, n.key + fenceOf}, lockY+"1", 20_000, lockY, 1, 60_000))
		assert.EqualValues(t, 7, n.acquireShared(shareR, 1, 20_000), "a shared Lock")
		assert.EqualValues(t, 0, n.restorePermit("B.", 1, 20_000, 1, 3), "a restore of another count")
		require.EqualValues(t, 1, n.releasePermit("A.", 0, 0))
		require.EqualValues(t, 1, n.acquire(lockY, 2, 20_000))
		code, found = n.acquirePermit("A.", 2, 20_000, 2, -1)
		assert.EqualValues(t, 7, code, "permits on an exclusive Lock's key")
		assert.EqualValues(t, 0, found, "an exclusive Lock found")
		assert.EqualValues(t, -1, n.extendPermit("A.", 3, 20_000, 0))
		assert.EqualValues(t, -1, n.releasePermit("A.", 0, 3))
		assert.Equal(t, lockY+"2", n.get())
		assert.True(t, n.refuses("A.", 3), "the permit's writes are refused: %q", n.refusal("A."))
		require.EqualValues(t, 1, n.release(lockY, 2, 2))
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		code, found = n.acquirePermit("A.", 4, 20_000, 2, -1)
		assert.EqualValues(t, 7, code, "permits on a shared key")
		assert.EqualValues(t, -1, found, "shared Locks found")
		require.EqualValues(t, 1, n.releaseShared(shareR, 1, 1))
	})
	run("expired permits are absent to everyone", func(t *testing.T) {
		now := n.now()
		n.set("#2,"+strconv.FormatInt(now-1, 10)+"=0/A.1", 20*time.Second)
		assert.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
	})
	run("a stale handle changes nothing", func(t *testing.T) {
		code, _ := n.acquirePermit("A.", 3, 20_000, 2, -1)
		require.EqualValues(t, 1, code)
		code, _ = n.acquirePermit("A.", 2, 20_000, 2, -1)
		assert.EqualValues(t, 2, code, "an earlier attempt landing late")
		assert.EqualValues(t, 2, n.extendPermit("A.", 2, 20_000, 0))
		assert.EqualValues(t, 2, n.releasePermit("A.", 2, 0))
		code, slot := n.acquirePermit("A.", 4, 20_000, 2, 1)
		assert.EqualValues(t, 1, code)
		assert.EqualValues(t, 1, slot, "a retry moves to the preferred slot")
		code, slot = n.acquirePermit("A.", 5, 20_000, 2, -1)
		assert.EqualValues(t, 1, code)
		assert.EqualValues(t, 1, slot, "and otherwise keeps its own")
		assert.EqualValues(t, 0, n.extendPermit("A.", 6, 20_000, 0), "the entry is in another slot: no vote")
		assert.EqualValues(t, 1, n.extendPermit("A.", 6, 20_000, 1))
		assert.EqualValues(t, 0, n.restorePermit("A.", 7, 20_000, 0, 2), "present: nothing to restore")
		assert.EqualValues(t, 1, n.releasePermit("A.", 0, 7))
		assert.EqualValues(t, 0, n.extendPermit("A.", 8, 20_000, 1), "never creates a permit")
		assert.Empty(t, n.get())
		assert.True(t, n.refuses("A.", 7))
	})
	run("a late acquire after the rollback is refused", func(t *testing.T) {
		code, _ := n.acquirePermit("B.", 1, 20_000, 2, -1)
		require.EqualValues(t, 1, code)
		require.EqualValues(t, 0, n.releasePermit("A.", 2, 2))
		code, _ = n.acquirePermit("A.", 2, 20_000, 2, -1)
		assert.EqualValues(t, 2, code, "refused by the refusal")
		assert.EqualValues(t, 2, n.restorePermit("A.", 2, 20_000, 1, 2), "a late restore too")
		require.EqualValues(t, 1, n.releasePermit("B.", 0, 1))
		assert.Empty(t, n.get(), "the last permit left")
		code, _ = n.acquirePermit("A.", 2, 20_000, 2, -1)
		assert.EqualValues(t, 2, code)
		code, _ = n.acquirePermit("A.", 3, 20_000, 2, -1)
		assert.EqualValues(t, 1, code, "a later attempt")
	})
	run("restore puts a lost permit back in its slot only", func(t *testing.T) {
		code, _ := n.acquirePermit("B.", 1, 20_000, 2, 1)
		require.EqualValues(t, 1, code)
		assert.EqualValues(t, 0, n.restorePermit("A.", 2, 20_000, 1, 2), "the slot is B's here")
		assert.EqualValues(t, 1, n.restorePermit("A.", 2, 20_000, 0, 2))
		code, _ = n.acquirePermit("C.", 1, 20_000, 2, -1)
		assert.EqualValues(t, 0, code, "both slots held")
	})
	run("the restart guard", func(t *testing.T) {
		marker := n.key + ":boot"
		code := n.code(guardedForm[acquirePermitScript], []string{n.key, marker}, "A.1", 20_000, "A.", 1, 2, -1, 60_000)
		assert.EqualValues(t, 3, code, "a new node is within its guard")
		assert.Zero(t, n.rc.Exists(ctx, n.key).Val())
	})
}

// subtests returns a function that runs a subtest of t on n, each on a key
// of its own under prefix.
func (n *scriptNode) subtests(t *testing.T, prefix string) func(name string, f func(t *testing.T)) {
	i := 0
	return func(name string, f func(t *testing.T)) {
		i++
		t.Run(name, func(t *testing.T) {
			n.t, n.key = t, prefix+":"+strconv.Itoa(i)
			f(t)
		})
	}
}
