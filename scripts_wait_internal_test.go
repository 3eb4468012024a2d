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
)

// roomMs is how long a refused shared attempt that waits, or an
// announcement, enters its Lock in the waiting room, in these tests.
const roomMs = 20_000

// announce renews Lock p's entry in the key's waiting room for ms, waiting
// as what ("w", "W", "r").
func (n *scriptNode) announce(p, what string, ms int) int64 {
	return n.code(announceScript, []string{n.key}, p, what, ms)
}

// withdraw ends Lock p's wait: its entry is taken out.
func (n *scriptNode) withdraw(p string, ms int) int64 {
	return n.code(announceScript, []string{n.key}, p, "w", ms, "x")
}

// tryShared is a shared TryAcquire's attempt: refused, it does not wait.
func (n *scriptNode) tryShared(p string, gen, ttlMs int) int64 {
	return n.code(acquireSharedScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen, MaxShared, 0)
}

// room returns the kinds of the entries in the key's waiting room, by Lock
// prefix, live or not ("" when there is none).
func (n *scriptNode) room() map[string]string {
	v := n.rc.Get(context.Background(), n.key+waitSuffix).Val()
	out := make(map[string]string)
	for _, e := range strings.Split(v, ",") {
		if _, item, ok := strings.Cut(e, "="); ok && item != "" {
			id, _, _ := strings.Cut(item[1:], "@") // an R entry's due
			out[id] = item[:1]
		}
	}
	return out
}

func (n *scriptNode) roomTTL() time.Duration {
	return n.rc.PTTL(context.Background(), n.key+waitSuffix).Val()
}

// TestWaitRoomScripts: what the scripts do with a key's waiting room
// (scripts/wait.lua), on a real node: a waiting writer's entry holds new
// readers back until it is taken out or expires by the node's clock; the
// readers that waited through a writer's turn go before the next writer,
// fast path, handover and AcquireAll included; and the stale, late and
// duplicated calls change nothing they should not.
func TestWaitRoomScripts(t *testing.T) {
	n := newScriptNode(t)
	ctx := context.Background()
	run := n.subtests(t, "room")
	run("a waiting writer holds new readers back until it withdraws", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, roomMs))
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, roomMs), "a renewal, or a copy of one: the same")
		assert.Equal(t, map[string]string{lockY: "w"}, n.room())
		assert.EqualValues(t, script.WriterWaits, n.tryShared(shareS, 1, 20_000), "a TryAcquire is refused")
		assert.Equal(t, map[string]string{lockY: "w"}, n.room(), "and is not entered: it does not wait")
		assert.EqualValues(t, script.WriterWaits, n.acquireShared(shareS, 1, 20_000))
		assert.Equal(t, "r", n.room()[shareS], "a waiting reader is entered behind the writer")
		v := n.run(acquireSharedScript, []string{n.key}, shareS+"2", 20_000, shareS, 2, MaxShared, roomMs).([]any)
		assert.Greater(t, v[1].(int64), int64(15_000), "the refusal says how long the writer's entry lives")
		require.EqualValues(t, 1, n.withdraw(lockY, 5_000))
		assert.NotContains(t, n.room(), lockY)
		assert.EqualValues(t, 1, n.acquireShared(shareS, 3, 20_000), "the writer gone, S is admitted")
		assert.Equal(t, "a", n.room()[shareS])
		assert.LessOrEqual(t, n.roomTTL(), 20*time.Second, "the room lives as long as its last entry")
		require.EqualValues(t, 1, n.withdraw(shareS, 5_000))
		require.EqualValues(t, 1, n.withdraw(shareS, 5_000), "a copy of the withdrawal")
		assert.Empty(t, n.room())
		require.Eventually(t, func() bool { return n.rc.Exists(ctx, n.key+waitSuffix).Val() == 0 }, 5*time.Second, time.Millisecond,
			"nothing left once nobody waits")
		// A renewal that lands after the withdrawal enters the writer
		// again, for its own life at most, by the node's clock.
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, 200))
		assert.EqualValues(t, script.WriterWaits, n.tryShared(shareT, 1, 20_000))
		require.Eventually(t, func() bool { return n.tryShared(shareT, 2, 20_000) == 1 }, 5*time.Second, 5*time.Millisecond)
	})
	run("an entry expires by the node's clock", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, 200))
		assert.EqualValues(t, script.WriterWaits, n.tryShared(shareS, 1, 20_000))
		// An entry whose deadline passed on the node's clock counts for
		// nothing, whatever the key's own expiry says.
		now := n.now()
		require.NoError(t, n.rc.Set(ctx, n.key+waitSuffix, strconv.FormatInt(now-1, 10)+"=w"+lockY, time.Minute).Err())
		assert.EqualValues(t, 1, n.tryShared(shareS, 2, 20_000), "expired: S is admitted")
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, 200))
		require.Eventually(t, func() bool { return n.tryShared(shareT, 1, 20_000) == 1 }, 5*time.Second, 5*time.Millisecond)
		require.Eventually(t, func() bool { return n.rc.Exists(ctx, n.key+waitSuffix).Val() == 0 }, 5*time.Second, 5*time.Millisecond,
			"the room expires with its last entry")
	})
	run("a restart that lost the room admits readers", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, roomMs))
		require.NoError(t, n.rc.Del(ctx, n.key+waitSuffix).Err()) // as a restart without persistence
		assert.EqualValues(t, 1, n.tryShared(shareS, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, roomMs), "the next renewal enters it again")
		assert.EqualValues(t, script.WriterWaits, n.tryShared(shareT, 1, 20_000))
	})
	run("readers that waited through a writer's turn go first", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		assert.LessOrEqual(t, n.acquireShared(shareR, 1, 20_000), int64(-15_000), "Y holds")
		assert.Equal(t, "R", n.room()[shareR], "R waited while a writer held")
		assert.LessOrEqual(t, n.tryShared(shareT, 1, 20_000), int64(-15_000))
		assert.NotContains(t, n.room(), shareT, "a TryAcquire is not entered")
		require.EqualValues(t, 1, n.announce(lockB, waitsExclusive, roomMs)) // B waits too
		require.EqualValues(t, 1, n.release(lockY, 0, 0))
		// The key is free. The next writer, waiting (B) or not (Z), is
		// refused, by the fast path too, for as long as R's entry lives.
		for _, p := range []string{lockB, "Z."} {
			code := n.acquire(p, 1, 20_000)
			assert.LessOrEqual(t, code, int64(-900), "%s is refused while R is to come in", p)
			assert.Empty(t, n.holder())
			assert.LessOrEqual(t, n.acquireFenced(p, 2, 20_000), int64(0))
		}
		assert.EqualValues(t, script.WriterWaits, n.tryShared(shareT, 2, 20_000), "a new reader waits behind B")
		assert.EqualValues(t, 1, n.acquireShared(shareR, 2, 20_000), "R is in, although B waits")
		assert.Equal(t, "a", n.room()[shareR])
		assert.EqualValues(t, 1, n.acquireShared(shareR, 3, 20_000), "a retry of R is in again")
		require.EqualValues(t, 1, n.releaseShared(shareR, 0, 0))
		assert.EqualValues(t, 1, n.acquire(lockB, 3, 20_000), "then B")
	})
	run("readers that cannot come in hold writers back for the grace only", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		require.Less(t, n.acquireShared(shareR, 1, 20_000), int64(0))
		require.EqualValues(t, 1, n.release(lockY, 0, 0))
		start := time.Now()
		code := n.acquire(lockB, 1, 20_000)
		assert.Less(t, code, int64(0), "R goes first")
		assert.GreaterOrEqual(t, code, int64(-1001), "for the grace at most, not R's whole entry")
		// R never comes in (its quorum is not there, say): once the grace
		// is over, B takes the key, and R is refused for B's hold.
		require.Eventually(t, func() bool { return n.acquire(lockB, 2, 20_000) == 1 }, 5*time.Second, 10*time.Millisecond)
		assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
		assert.Equal(t, "R", n.room()[shareR])
		// B's turn ends: R goes first again, with a new grace.
		require.EqualValues(t, 1, n.release(lockB, 0, 0))
		assert.LessOrEqual(t, n.acquire(lockY, 2, 20_000), int64(-900), "a new grace after B's turn")
		assert.EqualValues(t, 1, n.acquireShared(shareR, 2, 20_000))
	})
	run("readers behind a waiting writer go first after its turn", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockB, waitsExclusive, roomMs))
		require.EqualValues(t, script.WriterWaits, n.acquireShared(shareS, 1, 20_000))
		assert.Equal(t, "r", n.room()[shareS])
		require.EqualValues(t, 1, n.releaseShared(shareR, 0, 0))
		require.EqualValues(t, 1, n.announce(lockY, waitsExclusive, roomMs)) // the writer after B
		require.EqualValues(t, 1, n.acquire(lockB, 1, 20_000), "B's turn")
		assert.Equal(t, "R", n.room()[shareS], "S has waited through B's turn")
		assert.NotContains(t, n.room(), lockB, "B's acquire took its entry out")
		assert.Equal(t, "w", n.room()[lockY], "Y's stays")
		require.EqualValues(t, 1, n.release(lockB, 0, 0))
		assert.LessOrEqual(t, n.acquire(lockY, 1, 20_000), int64(-900), "Y waits for S")
		assert.EqualValues(t, 1, n.acquireShared(shareS, 2, 20_000), "S is in before Y")
	})
	run("a handover lets the readers that waited in first", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockB, waitsExclusive, roomMs))
		require.Less(t, n.acquireShared(shareR, 1, 20_000), int64(0))
		assert.EqualValues(t, script.ReleasedHandover, n.handover(lockB, 1, 20_000, lockY), "released and announced, not handed over")
		assert.Empty(t, n.get())
		assert.True(t, n.refuses(lockY, 9), "Y's late writes are refused")
		assert.EqualValues(t, 1, n.acquireShared(shareR, 2, 20_000))
	})
	run("a handover refused for the readers still leaves the leaving Lock's refusal", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		require.Less(t, n.acquireShared(shareR, 1, 20_000), int64(0))
		require.NoError(t, n.rc.Del(ctx, n.key).Err()) // Y's value expired here, or never landed
		assert.Less(t, n.handover(lockB, 1, 20_000, lockY), int64(0), "R goes first: B is refused")
		assert.True(t, n.refuses(lockY, 9), "and Y's late writes are refused")
		assert.NotEqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		assert.Empty(t, n.holder())
	})
	run("several keys: refused while readers go first, and they go first after its turn", func(t *testing.T) {
		other := n.key + ":other"
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		require.Less(t, n.acquireShared(shareR, 1, 20_000), int64(0))
		require.EqualValues(t, 1, n.release(lockY, 0, 0))
		all := func(gen int) int64 {
			return n.code(acquireAllScript, []string{n.key, other}, lockB+strconv.Itoa(gen), 20_000, lockB, gen, 2)
		}
		assert.LessOrEqual(t, all(1), int64(-900), "R goes first")
		require.EqualValues(t, 1, n.acquireShared(shareR, 2, 20_000))
		require.EqualValues(t, 1, n.releaseShared(shareR, 0, 0))
		require.EqualValues(t, 1, n.announce(lockB, waitsExclusive, roomMs))
		require.EqualValues(t, script.WriterWaits, n.acquireShared(shareS, 1, 20_000))
		require.EqualValues(t, 1, all(2))
		assert.Equal(t, "R", n.room()[shareS], "S waited through the AcquireAll's turn")
	})
	run("an AcquireAll is entered only where shared Locks hold the key", func(t *testing.T) {
		free, shared := n.key+":free", n.key+":shared"
		n.key = shared
		require.EqualValues(t, 1, n.acquireShared(shareR, 1, 20_000))
		require.EqualValues(t, 1, n.code(announceScript, []string{free, shared}, lockB, waitsAll, roomMs))
		assert.Equal(t, map[string]string{lockB: "w"}, n.room(), "where R holds")
		assert.EqualValues(t, script.WriterWaits, n.tryShared(shareS, 1, 20_000))
		n.key = free
		assert.Empty(t, n.room(), "not on the free key")
		assert.EqualValues(t, 1, n.tryShared(shareS, 1, 20_000), "whose readers are admitted")
		require.EqualValues(t, 1, n.releaseShared(shareS, 0, 0))
		n.key = shared
		require.EqualValues(t, 1, n.releaseShared(shareR, 0, 0))
		require.EqualValues(t, 1, n.code(announceScript, []string{free, shared}, lockB, waitsAll, roomMs))
		assert.Empty(t, n.room(), "taken out once the readers left")
		assert.EqualValues(t, 1, n.tryShared(shareS, 2, 20_000))
		// While another Lock holds a key of the set exclusively, the
		// AcquireAll waits for it, not for the readers of its others.
		n.key = free
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		require.EqualValues(t, 1, n.code(announceScript, []string{free, shared}, lockB, waitsAll, roomMs))
		n.key = shared
		assert.Empty(t, n.room(), "not entered where S holds, while Y holds the other key")
	})
	run("a waiting reader's renewal", func(t *testing.T) {
		require.EqualValues(t, 1, n.announce(shareR, waitsShared, roomMs))
		assert.Empty(t, n.room(), "nobody holds or waits: nothing to enter")
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		require.EqualValues(t, 1, n.announce(shareR, waitsShared, roomMs))
		assert.Equal(t, "R", n.room()[shareR], "a writer holds: R goes first after it")
		require.EqualValues(t, 1, n.release(lockY, 0, 0))
		require.EqualValues(t, 1, n.announce(shareR, waitsShared, roomMs))
		assert.Equal(t, "R", n.room()[shareR], "renewed as it was")
		require.EqualValues(t, 1, n.withdraw(shareR, roomMs))
		require.EqualValues(t, 1, n.announce(shareR, waitsShared, roomMs))
		assert.NotContains(t, n.room(), shareR, "a late renewal, the key free and no writer waiting, enters nothing")
		assert.EqualValues(t, 1, n.acquire(lockY, 2, 20_000), "and holds no writer back")
	})
	run("a reader refused for a writer's hold on one node goes first on every node", func(t *testing.T) {
		// R waits behind writer B here (r), while another node refused R
		// for an exclusive holder: R waited through a writer's turn.
		require.EqualValues(t, 1, n.acquireShared(shareS, 1, 20_000))
		require.EqualValues(t, 1, n.announce(lockB, waitsExclusive, roomMs))
		require.EqualValues(t, script.WriterWaits, n.acquireShared(shareR, 1, 20_000))
		assert.Equal(t, "r", n.room()[shareR])
		require.EqualValues(t, 1, n.announce(shareR, waitsEntitled, roomMs))
		assert.Equal(t, "R", n.room()[shareR])
		assert.EqualValues(t, 1, n.acquireShared(shareR, 2, 20_000), "admitted, although B waits")
		require.EqualValues(t, 1, n.announce(shareR, waitsEntitled, roomMs))
		assert.Equal(t, "a", n.room()[shareR], "admitted here, it holds no writer back")
	})
	run("the room keeps at most a thousand entries", func(t *testing.T) {
		require.EqualValues(t, 1, n.acquire(lockY, 1, 20_000))
		parts := make([]string, 0, 1000)
		dl := strconv.FormatInt(n.now()+60_000, 10)
		for k := range 1000 {
			parts = append(parts, dl+"=rF"+strconv.Itoa(k)+".")
		}
		require.NoError(t, n.rc.Set(ctx, n.key+waitSuffix, strings.Join(parts, ","), time.Minute).Err())
		require.Less(t, n.acquireShared(shareR, 1, 20_000), int64(0))
		assert.NotContains(t, n.room(), shareR, "full: R waits unrecorded")
		assert.Len(t, n.room(), 1000)
	})
}

const shareT = "T."
