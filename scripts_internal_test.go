package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// scriptNode runs the library's scripts by hand on one real node, for the
// tests of what each script does with what it finds under the key.
type scriptNode struct {
	t   *testing.T
	rc  *redis.Client
	key string
	// at is the node-clock millisecond the calls send (scripts/late.lua):
	// a write's deadline, a delete's latest deadline of the writes it
	// covers; 0 for a minute from the node's now, in time.
	at int64
}

// lateReply is code's reply for a write refused past its deadline (the
// error reply "LATE", scripts/late_write.lua).
const lateReply = -1 << 40

const (
	ownerX  = "X~"   // the owner of Locks A and B
	lockA   = "X~A." // the Lock whose calls a case makes
	lockB   = "X~B." // another Lock of the same owner
	lockY   = "Y."   // a Lock of nobody's owner
	fenceOf = ":fence"
	// leadersOf names the record of elected terms beside the test's key.
	leadersOf = ":leaders"
)

func newScriptNode(t *testing.T) *scriptNode {
	s := redistest.StartT(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	return &scriptNode{t: t, rc: rc}
}

// run runs s with keys and args, as the library sends them: a script by
// which a Lock writes or deletes gets the Lock's pair first (late.lua), its
// refusals key and a node-clock millisecond (at), the Lock's prefix read
// from args[0] (a prefix, or a value: a prefix and a generation).
func (n *scriptNode) run(s *redis.Script, keys []string, args ...any) any {
	n.t.Helper()
	if strings.HasPrefix(sources[s], lateSrc) {
		p := args[0].(string)
		if !strings.HasSuffix(p, ".") {
			p = strings.TrimRight(p, "0123456789")
		}
		keys = append([]string{n.refusals(p)}, keys...)
		args = append([]any{n.deadline()}, args...)
	}
	return n.send(s, keys, args...)
}

// send runs s with keys and args as they are; a write refused as late
// returns "LATE".
func (n *scriptNode) send(s *redis.Script, keys []string, args ...any) any {
	n.t.Helper()
	v, err := s.Run(context.Background(), n.rc, keys, args...).Result()
	if err != nil && strings.HasPrefix(err.Error(), "LATE ") {
		return "LATE"
	}
	require.NoError(n.t, err)
	return v
}

// refusals is Lock p's refusals key for the node's key.
func (n *scriptNode) refusals(p string) string { return script.RefusalsKeyOf(n.key, p, false) }

// refusal is what Lock p's refusals key holds, "" for nothing.
func (n *scriptNode) refusal(p string) string {
	return n.rc.Get(context.Background(), n.refusals(p)).Val()
}

// deadline is what the calls send as their node-clock millisecond (at).
func (n *scriptNode) deadline() int64 {
	if n.at != 0 {
		return n.at
	}
	return n.now() + 60_000
}

// past makes the calls that follow come past their deadline.
func (n *scriptNode) past() { n.at = n.now() - 1 }

func (n *scriptNode) code(s *redis.Script, keys []string, args ...any) int64 {
	n.t.Helper()
	return n.codeOf(n.run(s, keys, args...))
}

// codeOf is a script's reply as its code: an integer, an array's first,
// or lateReply.
func (n *scriptNode) codeOf(v any) int64 {
	n.t.Helper()
	switch v := v.(type) {
	case int64:
		return v
	case []any:
		return v[0].(int64)
	case string:
		require.Equal(n.t, "LATE", v)
		return lateReply
	default:
		n.t.Fatalf("unexpected reply %v", v)
		return 0
	}
}

func (n *scriptNode) set(v string, ttl time.Duration) {
	n.t.Helper()
	require.NoError(n.t, n.rc.Set(context.Background(), n.key, v, ttl).Err())
}

func (n *scriptNode) get() string { return n.rc.Get(context.Background(), n.key).Val() }

// holder is the value under the key, "" for nothing or an earlier
// version's tombstone.
func (n *scriptNode) holder() string {
	v := n.get()
	if strings.HasPrefix(v, "!") {
		return ""
	}
	return v
}

func (n *scriptNode) pttl() time.Duration { return n.rc.PTTL(context.Background(), n.key).Val() }

func (n *scriptNode) now() int64 {
	t, err := n.rc.Time(context.Background()).Result()
	require.NoError(n.t, err)
	return t.UnixMilli()
}

// The calls of Lock prefix p at generation gen, as the library sends them.
func (n *scriptNode) acquire(p string, gen int, ttlMs int) int64 {
	return n.code(acquireScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, holderOfLock(p), gen)
}

func (n *scriptNode) acquireFenced(p string, gen int, ttlMs int) int64 {
	return n.code(acquireFencedScript, []string{n.key, n.key + fenceOf}, p+strconv.Itoa(gen), ttlMs, holderOfLock(p), gen, 60_000)
}

// handover hands the key from Lock leaving, whose latest generation is 9,
// to Lock p's waiter: the waiter's pair, then the leaving Lock's (its
// writes' latest deadline a minute away).
func (n *scriptNode) handover(p string, gen int, ttlMs int, leaving string) int64 {
	return n.codeOf(n.send(handoverScript, []string{n.refusals(p), n.refusals(leaving), n.key},
		n.deadline(), n.now()+60_000, p+strconv.Itoa(gen), ttlMs, holderOfLock(p), gen, leaving, 0, 9))
}

func (n *scriptNode) extend(p string, gen int, ttlMs int) int64 {
	return n.code(extendScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

func (n *scriptNode) restore(p string, gen int, ttlMs int) int64 {
	return n.code(restoreScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

// release deletes p's values up to generation limit (0: a Release),
// leaving what refuses p's writes up to generation gone until the
// deadline at (a minute away unless set).
func (n *scriptNode) release(p string, limit, gone int) int64 {
	return n.code(releaseScript, []string{n.key}, p, limit, gone)
}

func (n *scriptNode) settle(p string, term int) int64 {
	return n.code(settleScript, []string{n.key, n.key + leadersOf}, p, term, 60_000)
}

// record is the node's record of elected terms for the key (settle.lua).
func (n *scriptNode) record() string {
	return n.rc.Get(context.Background(), n.key+leadersOf).Val()
}

func (n *scriptNode) commit(p string, fence int) int64 {
	return n.code(fenceCommitScript, []string{n.key, n.key + fenceOf}, p, fence, 60_000)
}

// holderOfLock is what an acquire of Lock p takes over: the owner's part
// for a Lock of an owner.
func holderOfLock(p string) string {
	if i := strings.IndexByte(p, '~'); i >= 0 {
		return p[:i+1]
	}
	return p
}

// chained is a chain element (lib.lua): v replaced, with deadline dl.
func chained(dl int64, v string) string { return "|" + strconv.FormatInt(dl, 10) + ":" + v }

// The states a script may find under a lock's key, the columns of the
// table in docs/late-writes.md. Each puts the state on the node.
var lateStates = []struct {
	name string
	put  func(n *scriptNode)
}{
	{"absent", func(*scriptNode) {}},
	{"refused", func(n *scriptNode) {
		// A's Release ran here, within its writes' deadline: its refusals
		// key refuses A's writes up to generation 5 until then.
		require.EqualValues(n.t, 0, n.release(lockA, 0, 5))
	}},
	{"old tombstone", func(n *scriptNode) { n.set(oldTombstoneOf(lockA, 5), 2*time.Second) }},
	{"chain head", func(n *scriptNode) {
		n.set(lockA+"5"+chained(n.now()+20_000, lockB+"3"), 20*time.Second)
	}},
	{"chain inside", func(n *scriptNode) {
		n.set(lockB+"6"+chained(n.now()+20_000, lockA+"5"), 20*time.Second)
	}},
	{"released in chain", func(n *scriptNode) {
		// B took over A's value; A was then released: A's Release took it
		// out of B's chain (release.lua), so B's rollback must not bring
		// it back, and left A's refusal.
		n.set(lockB+"6"+chained(n.now()+20_000, lockA+"5"), 20*time.Second)
		require.EqualValues(n.t, 1, n.release(lockA, 0, 5))
	}},
	{"guard marker", func(n *scriptNode) { n.set("0123abcd:1700000000000", 0) }},
	{"other holder", func(n *scriptNode) { n.set(lockY+"3", 20*time.Second) }},
	{"shared", func(n *scriptNode) { n.set("^"+strconv.FormatInt(n.now()+20_000, 10)+"="+lockY+"3", 20*time.Second) }},
	{"late", func(n *scriptNode) {
		// A holds, and the call reaches the node past its deadline.
		n.set(lockA+"5", 20*time.Second)
		n.past()
	}},
}

// oldTombstoneOf is the tombstone an earlier version of the library left
// against prefix's writes up to gen: every script reads it as an absent
// key.
func oldTombstoneOf(prefix string, gen uint64) string {
	sum := sha1.Sum([]byte(prefix))
	return "!" + hex.EncodeToString(sum[:])[:16] + ":" + strconv.FormatUint(gen, 10)
}

// refuses reports whether Lock p's refusals key refuses its writes up to
// generation gen, and lives no longer than its deadline.
func (n *scriptNode) refuses(p string, gen uint64) bool {
	n.t.Helper()
	r := n.refusal(p)
	g, at, ok := strings.Cut(strings.TrimPrefix(r, "!"), ":")
	if !strings.HasPrefix(r, "!") || !ok || g != strconv.FormatUint(gen, 10) {
		return false
	}
	until, _ := strconv.ParseInt(at, 10, 64)
	left := n.rc.PTTL(context.Background(), n.refusals(p)).Val()
	return left > 0 && until-n.now() <= left.Milliseconds()+2
}

// unchanged asserts that the key still holds before.
func unchanged(t *testing.T, n *scriptNode, before string) {
	t.Helper()
	assert.Equal(t, before, n.get(), "the key changed")
}

// lateCase is one cell: what a script does with a state.
type lateCase struct {
	script, state string
	check         func(t *testing.T, n *scriptNode)
}

// lateCases are the cells of the table in docs/late-writes.md, each
// checked on a real node: a script's call of Lock A at generation 5 (or
// the one named), against each state.
var lateCases = []lateCase{
	// acquire, acquire_fenced (take.lua)
	{"acquire", "absent", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.acquire(lockA, 5, 20_000))
		assert.Equal(t, lockA+"5", n.get())
	}},
	{"acquire", "refused", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.acquire(lockA, 5, 20_000), "a write sent before A's delete")
		assert.Empty(t, n.get())
		assert.True(t, n.refuses(lockA, 5), "the refusal stays: %q", n.refusal(lockA))
		assert.EqualValues(t, 1, n.acquire(lockA, 6, 20_000), "a later attempt takes the key")
	}},
	{"acquire", "old tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.acquire(lockA, 5, 20_000), "an absent key")
		assert.Equal(t, lockA+"5", n.get())
	}},
	{"acquire", "chain head", func(t *testing.T, n *scriptNode) {
		chain := n.get()[len(lockA+"5"):]
		assert.EqualValues(t, script.TookOver, n.acquire(lockA, 6, 1_000), "a retry")
		assert.Equal(t, lockA+"6"+chain, n.get(), "keeps the chain")
		assert.Greater(t, n.pttl(), 15*time.Second, "and its expiry")
	}},
	{"acquire", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.TookOver, n.acquire(lockA, 7, 1_000), "A takes over B's pending takeover")
		assert.True(t, strings.HasPrefix(n.get(), lockA+"7|"), n.get())
		assert.Contains(t, n.get(), ":"+lockB+"6|", "keeping B's value in the chain")
	}},
	{"acquire", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.acquire(lockA, 4, 20_000), "a stale write of A, refused by its Release's refusal")
		assert.Equal(t, lockB+"6", n.get())
		assert.EqualValues(t, script.TookOver, n.acquire(lockA, 6, 20_000), "a later write of A takes B over, as any Lock of the owner may")
	}},
	{"acquire", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.LessOrEqual(t, n.acquire(lockA, 5, 20_000), int64(0), "refused as another holder")
		unchanged(t, n, "0123abcd:1700000000000")
	}},
	{"acquire", "other holder", func(t *testing.T, n *scriptNode) {
		assert.Less(t, n.acquire(lockA, 5, 20_000), int64(0), "refused")
		unchanged(t, n, lockY+"3")
	}},
	{"acquire", "shared", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.Less(t, n.acquire(lockA, 5, 20_000), int64(0), "refused while a shared Lock holds")
		unchanged(t, n, before)
	}},
	{"acquire", "late", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, lateReply, n.acquire(lockA, 6, 1_000))
		unchanged(t, n, lockA+"5")
		assert.Greater(t, n.pttl(), 15*time.Second, "its expiry too")
		n.rc.Del(context.Background(), n.key)
		assert.EqualValues(t, lateReply, n.acquire(lockA, 6, 1_000), "a free key is not taken either")
		assert.Empty(t, n.get())
	}},
	{"acquire_fenced", "absent", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.acquireFenced(lockA, 5, 20_000))
		assert.Equal(t, lockA+"5", n.get())
	}},
	{"acquire_fenced", "refused", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.acquireFenced(lockA, 5, 20_000))
		assert.Empty(t, n.get())
	}},
	{"acquire_fenced", "old tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.acquireFenced(lockA, 5, 20_000))
		assert.Equal(t, lockA+"5", n.get())
	}},
	{"acquire_fenced", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.TookOver, n.acquireFenced(lockA, 6, 1_000))
		assert.Contains(t, n.get(), lockA+"6|")
	}},
	{"acquire_fenced", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.TookOver, n.acquireFenced(lockA, 7, 1_000))
		assert.Contains(t, n.get(), ":"+lockB+"6|")
	}},
	{"acquire_fenced", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.acquireFenced(lockA, 4, 20_000), "as acquire")
		assert.Equal(t, lockB+"6", n.get())
	}},
	{"acquire_fenced", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.acquireFenced(lockA, 5, 20_000))
		unchanged(t, n, "0123abcd:1700000000000")
	}},
	{"acquire_fenced", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.acquireFenced(lockA, 5, 20_000))
		unchanged(t, n, lockY+"3")
	}},
	{"acquire_fenced", "shared", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, 0, n.acquireFenced(lockA, 5, 20_000))
		unchanged(t, n, before)
	}},
	{"acquire_fenced", "late", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, lateReply, n.acquireFenced(lockA, 6, 1_000))
		unchanged(t, n, lockA+"5")
		assert.Empty(t, n.rc.Get(context.Background(), n.key+fenceOf).Val(), "the counter is not touched")
	}},
	// handover: the waiter is A (gen 5) and the leaving Lock Y, unless
	// named otherwise; the leaving Lock's writes may still land for a
	// minute, and every reply but a late one leaves its refusal.
	{"handover", "absent", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.handover(lockA, 5, 20_000, lockY), "an absent key: the waiter takes it")
		assert.Equal(t, lockA+"5", n.get())
		assert.True(t, n.refuses(lockY, 9), "the leaving Lock's refusal: %q", n.refusal(lockY))
	}},
	{"handover", "refused", func(t *testing.T, n *scriptNode) {
		// The waiter's delete ran first (its Acquire gave up, or it held and
		// was released), and the leaving Lock's value is still there: the
		// handover that lands now releases it and gives the waiter nothing.
		n.set(lockY+"3", 20*time.Second)
		assert.EqualValues(t, script.ReleasedHandover, n.handover(lockA, 5, 20_000, lockY))
		assert.Empty(t, n.get(), "the released waiter's value is not written back")
		assert.True(t, n.refuses(lockY, 9))
		assert.EqualValues(t, 2, n.handover(lockA, 5, 20_000, lockY), "nor over an absent key")
		assert.Empty(t, n.get())
	}},
	{"handover", "old tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.handover(lockA, 5, 20_000, lockY), "an absent key")
		assert.Equal(t, lockA+"5", n.get())
	}},
	{"handover", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.HandedOver, n.handover(lockY, 1, 20_000, lockA), "A leaves: final, chain and all")
		assert.Equal(t, lockY+"1", n.get())
		assert.True(t, n.refuses(lockA, 9))
	}},
	{"handover", "chain inside", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.LessOrEqual(t, n.handover(lockY, 1, 20_000, lockA), int64(0), "A is not the holder here: B is")
		unchanged(t, n, before)
		assert.True(t, n.refuses(lockA, 9))
	}},
	{"handover", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.handover(lockB, 7, 20_000, lockA), "A is gone: B's waiter takes over B's own value")
		assert.Equal(t, lockB+"7", n.get())
		assert.True(t, n.refuses(lockA, 9), "A's refusal raised to its latest write: %q", n.refusal(lockA))
	}},
	{"handover", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.LessOrEqual(t, n.handover(lockA, 5, 20_000, lockY), int64(0))
		unchanged(t, n, "0123abcd:1700000000000")
	}},
	{"handover", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.HandedOver, n.handover(lockA, 5, 20_000, lockY), "Y leaves to A's waiter")
		assert.Equal(t, lockA+"5", n.get())
		assert.True(t, n.refuses(lockY, 9))
	}},
	{"handover", "shared", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.Less(t, n.handover(lockA, 5, 20_000, lockB), int64(0), "refused while a shared Lock holds")
		unchanged(t, n, before)
	}},
	{"handover", "late", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, lateReply, n.handover(lockY, 1, 20_000, lockA), "past the waiter's deadline")
		unchanged(t, n, lockA+"5")
		assert.Empty(t, n.refusal(lockA), "nothing done: A's own delete follows (handover.go)")
	}},
	// extend
	{"extend", "absent", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.extend(lockA, 6, 20_000), "never created")
		assert.Empty(t, n.get())
	}},
	{"extend", "refused", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.extend(lockA, 6, 20_000))
		assert.Empty(t, n.get())
	}},
	{"extend", "old tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.extend(lockA, 6, 20_000))
		unchanged(t, n, oldTombstoneOf(lockA, 5))
	}},
	{"extend", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.extend(lockA, 6, 5_000), "the Lock holds: its takeover is final")
		assert.Equal(t, lockA+"6", n.get())
		assert.LessOrEqual(t, n.pttl(), 5*time.Second, "with its own expiry")
	}},
	{"extend", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.extend(lockA, 6, 20_000), "B holds the node now")
		assert.True(t, strings.HasPrefix(n.get(), lockB+"6|"))
	}},
	{"extend", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.extend(lockA, 6, 20_000))
		assert.Equal(t, lockB+"6", n.get())
	}},
	{"extend", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.extend(lockA, 6, 20_000))
		unchanged(t, n, "0123abcd:1700000000000")
	}},
	{"extend", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.extend(lockA, 6, 20_000))
		unchanged(t, n, lockY+"3")
	}},
	{"extend", "shared", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, -1, n.extend(lockA, 6, 20_000))
		unchanged(t, n, before)
	}},
	{"extend", "late", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, lateReply, n.extend(lockA, 6, 1_000))
		unchanged(t, n, lockA+"5")
		assert.Greater(t, n.pttl(), 15*time.Second, "its expiry is not cut")
	}},
	// restore
	{"restore", "absent", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.restore(lockA, 5, 20_000))
		assert.Equal(t, lockA+"5", n.get())
	}},
	{"restore", "refused", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.restore(lockA, 5, 20_000), "the Lock's delete ran: nothing comes back")
		assert.Empty(t, n.get())
		assert.EqualValues(t, 2, n.restore(lockA, 4, 20_000))
	}},
	{"restore", "old tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.restore(lockA, 6, 20_000), "an absent key")
		assert.Equal(t, lockA+"6", n.get())
	}},
	{"restore", "chain head", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000), "the key is there")
		unchanged(t, n, before)
	}},
	{"restore", "chain inside", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000))
		unchanged(t, n, before)
	}},
	{"restore", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.restore(lockA, 5, 20_000), "A's delete ran")
		assert.Equal(t, lockB+"6", n.get())
	}},
	{"restore", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000))
		unchanged(t, n, "0123abcd:1700000000000")
	}},
	{"restore", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.restore(lockA, 5, 20_000))
		unchanged(t, n, lockY+"3")
	}},
	{"restore", "shared", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, 0, n.restore(lockA, 5, 20_000))
		unchanged(t, n, before)
	}},
	{"restore", "late", func(t *testing.T, n *scriptNode) {
		n.rc.Del(context.Background(), n.key)
		assert.EqualValues(t, lateReply, n.restore(lockA, 6, 20_000), "nothing comes back past its deadline")
		assert.Empty(t, n.get())
	}},
	// release: a Release (limit 0) of A, whose writes up to generation 9
	// went out, the latest with a deadline a minute away
	{"release", "absent", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 0, 9))
		assert.True(t, n.refuses(lockA, 9), "a write of A may still land: %q", n.refusal(lockA))
	}},
	{"release", "refused", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 0, 9))
		assert.True(t, n.refuses(lockA, 9), "raised to the Lock's latest write: %q", n.refusal(lockA))
		assert.EqualValues(t, 0, n.release(lockA, 0, 7))
		assert.True(t, n.refuses(lockA, 9), "never lowered: %q", n.refusal(lockA))
		at := n.now() + 1_000
		n.at = at
		assert.EqualValues(t, 0, n.release(lockA, 0, 9))
		assert.Greater(t, n.rc.PTTL(context.Background(), n.refusals(lockA)).Val(), 50*time.Second, "nor shortened")
	}},
	{"release", "old tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 0, 9), "absent")
		assert.True(t, n.refuses(lockA, 9))
	}},
	{"release", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 0, 5), "final: what A took over goes too")
		assert.Empty(t, n.get())
		assert.True(t, n.refuses(lockA, 5))
	}},
	{"release", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 0, 5), "A's Release is confirmed")
		assert.Equal(t, lockB+"6", n.get(), "A is cut out of B's chain")
		assert.True(t, n.refuses(lockA, 5))
		assert.EqualValues(t, 1, n.release(lockB, 6, 6), "B's rollback")
		assert.Empty(t, n.get(), "then brings nothing back")
		assert.EqualValues(t, 2, n.acquire(lockA, 5, 20_000), "and A's late write is refused")
	}},
	{"release", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 0, 5), "released already")
		assert.Equal(t, lockB+"6", n.get())
	}},
	{"release", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 0, 9))
		unchanged(t, n, "0123abcd:1700000000000")
	}},
	{"release", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 0, 9), "another holder's value")
		unchanged(t, n, lockY+"3")
		assert.Greater(t, n.pttl(), 15*time.Second, "the holder keeps its expiry")
		assert.True(t, n.refuses(lockA, 9))
		assert.EqualValues(t, 1, n.release(lockY, 0, 3), "Y's own Release")
		assert.EqualValues(t, 2, n.acquire(lockA, 9, 20_000), "A's late write is refused whoever held between")
	}},
	{"release", "shared", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, -1, n.release(lockA, 0, 9))
		unchanged(t, n, before)
		assert.True(t, n.refuses(lockA, 9))
	}},
	{"release", "late", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 0, 5), "past every write's deadline: a plain delete")
		assert.Empty(t, n.get())
		assert.Empty(t, n.refusal(lockA), "no refusal: no copy can land any more")
	}},
	// rollback: a delete up to the failed attempt's generation
	{"rollback", "absent", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 6, 6))
		assert.True(t, n.refuses(lockA, 6))
	}},
	{"rollback", "refused", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 6, 6))
		assert.True(t, n.refuses(lockA, 6), "raised to this attempt: %q", n.refusal(lockA))
	}},
	{"rollback", "old tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 6, 6))
		assert.True(t, n.refuses(lockA, 6))
	}},
	{"rollback", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 5, 5))
		assert.Equal(t, lockB+"3", n.get(), "the replaced value comes back")
		assert.InDelta(t, 20*time.Second, n.pttl(), float64(2*time.Second), "with its own expiry")
		assert.True(t, n.refuses(lockA, 5), "and the attempt's late copies are refused")
	}},
	{"rollback", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 5, 5))
		assert.Equal(t, lockB+"6", n.get(), "A's failed attempt leaves B's chain")
		assert.True(t, n.refuses(lockA, 5))
	}},
	{"rollback", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockB, 6, 6), "B's rollback")
		assert.Empty(t, n.get(), "A was released: nothing comes back")
	}},
	{"rollback", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 5, 5))
		unchanged(t, n, "0123abcd:1700000000000")
	}},
	{"rollback", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 5, 5))
		unchanged(t, n, lockY+"3")
		assert.True(t, n.refuses(lockA, 5))
	}},
	{"rollback", "shared", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, -1, n.release(lockA, 5, 5))
		unchanged(t, n, before)
	}},
	{"rollback", "late", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 5, 5))
		assert.Empty(t, n.get())
		assert.Empty(t, n.refusal(lockA))
	}},
}

// guarded is a guarded acquire of Lock A whose restart marker is the
// node's key: the state a case puts there is under the marker's name.
func (n *scriptNode) guarded() int64 {
	return n.code(guardedForm[acquireScript], []string{n.key + ":lock", n.key}, lockA+"5", 20_000, ownerX, 5, 60_000)
}

// notMarker: the restart guard leaves a value that is not its marker alone,
// and the node stays within its guard meanwhile.
func notMarker(t *testing.T, n *scriptNode) {
	before := n.get()
	assert.EqualValues(t, 3, n.guarded(), "within the guard while the name holds something else")
	unchanged(t, n, before)
	assert.Empty(t, n.rc.Get(context.Background(), n.key+":lock").Val(), "and nothing acquired")
}

func init() {
	// fence_commit and settle write beside the key only where the node
	// holds the Lock's value: a late copy writes nothing once the Lock's
	// value is gone, or under another Lock, nor past its deadline.
	for _, s := range lateStates {
		holds := s.name == "chain head"
		lateCases = append(lateCases, lateCase{"fence_commit", s.name, func(t *testing.T, n *scriptNode) {
			before := n.get()
			switch {
			case s.name == "late":
				assert.EqualValues(t, lateReply, n.commit(lockA, 10))
			case holds:
				assert.EqualValues(t, 1, n.commit(lockA, 10))
				assert.Equal(t, "10", n.rc.Get(context.Background(), n.key+fenceOf).Val())
			default:
				assert.EqualValues(t, 0, n.commit(lockA, 10))
			}
			if !holds {
				assert.Empty(t, n.rc.Get(context.Background(), n.key+fenceOf).Val(), "committed without the Lock's value")
			}
			unchanged(t, n, before)
		}})
		lateCases = append(lateCases, lateCase{"settle", s.name, func(t *testing.T, n *scriptNode) {
			before := n.get()
			switch {
			case s.name == "late":
				assert.EqualValues(t, lateReply, n.settle(lockA, 10))
			case holds:
				assert.EqualValues(t, 1, n.settle(lockA, 10))
				assert.Equal(t, "10="+strings.TrimSuffix(lockA, "."), n.record())
			default:
				assert.EqualValues(t, 0, n.settle(lockA, 10))
			}
			if !holds {
				assert.Empty(t, n.record(), "recorded without the Lock's value")
			}
			unchanged(t, n, before)
		}})
		switch s.name {
		case "absent", "refused":
			lateCases = append(lateCases, lateCase{"restart_guard", s.name, func(t *testing.T, n *scriptNode) {
				assert.EqualValues(t, 3, n.guarded(), "no marker: the node is new from now")
				assert.Regexp(t, "^[0-9a-f]{40}:[0-9]+$", n.get())
			}})
		case "guard marker":
			lateCases = append(lateCases, lateCase{"restart_guard", s.name, func(t *testing.T, n *scriptNode) {
				assert.EqualValues(t, 3, n.guarded(), "another run's marker: the node is new from now")
				assert.Regexp(t, "^[0-9a-f]{40}:[0-9]+$", n.get())
				assert.NotEqual(t, "0123abcd:1700000000000", n.get())
			}})
		case "late":
			lateCases = append(lateCases, lateCase{"restart_guard", s.name, func(t *testing.T, n *scriptNode) {
				n.set("0123abcd:1700000000000", 0)
				assert.EqualValues(t, lateReply, n.guarded(), "past its deadline, even the marker is left as it is")
				unchanged(t, n, "0123abcd:1700000000000")
			}})
		default:
			lateCases = append(lateCases, lateCase{"restart_guard", s.name, notMarker})
		}
	}
}

// lateEvery are the cells of docs/late-writes.md's second table: every
// other script by which a Lock writes, past its deadline (nothing changes,
// LATE), and where the Lock's refusals key refuses its generation (a stale
// write, 2: nothing changes); every other delete, within the deadline of
// the Lock's writes (the refusal is left) and past it (nothing is left).
var lateEvery = []lateCase{
	{"acquire_all", "late", func(t *testing.T, n *scriptNode) {
		n.past()
		assert.EqualValues(t, lateReply, n.code(acquireAllScript, []string{n.key, n.key + ":2"}, lockA+"5", 20_000, ownerX, 5, 2))
		assert.Empty(t, n.get())
	}},
	{"acquire_all", "refused", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 0, n.code(releaseAllScript, []string{n.key, n.key + ":2"}, lockA, 0, 5))
		assert.EqualValues(t, 2, n.code(acquireAllScript, []string{n.key, n.key + ":2"}, lockA+"5", 20_000, ownerX, 5, 2))
		assert.Empty(t, n.get())
	}},
	{"acquire_all_fenced", "late", func(t *testing.T, n *scriptNode) {
		n.past()
		assert.EqualValues(t, lateReply, n.code(acquireAllFencedScript, []string{n.key, n.key + ":2", n.key + fenceOf, n.key + ":2" + fenceOf},
			lockA+"5", 20_000, ownerX, 5, 2, 60_000))
		assert.Empty(t, n.get())
	}},
	{"acquire_all_fenced", "refused", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 0, n.code(releaseAllScript, []string{n.key, n.key + ":2"}, lockA, 0, 5))
		assert.EqualValues(t, 2, n.code(acquireAllFencedScript, []string{n.key, n.key + ":2", n.key + fenceOf, n.key + ":2" + fenceOf},
			lockA+"5", 20_000, ownerX, 5, 2, 60_000))
		assert.Empty(t, n.get())
	}},
	{"extend_all", "late", func(t *testing.T, n *scriptNode) {
		n.set(lockA+"5", 20*time.Second)
		n.past()
		assert.EqualValues(t, lateReply, n.code(extendAllScript, []string{n.key}, lockA+"6", 1_000, lockA, 6, 1))
		unchanged(t, n, lockA+"5")
	}},
	{"release_all", "within", func(t *testing.T, n *scriptNode) {
		n.set(lockA+"5", 20*time.Second)
		assert.EqualValues(t, 1, n.code(releaseAllScript, []string{n.key, n.key + ":2"}, lockA, 0, 5))
		assert.Empty(t, n.get())
		assert.True(t, n.refuses(lockA, 5))
	}},
	{"release_all", "past", func(t *testing.T, n *scriptNode) {
		n.set(lockA+"5", 20*time.Second)
		n.past()
		assert.EqualValues(t, 1, n.code(releaseAllScript, []string{n.key, n.key + ":2"}, lockA, 0, 5))
		assert.Empty(t, n.get())
		assert.Empty(t, n.refusal(lockA))
	}},
	{"acquire_shared", "late", func(t *testing.T, n *scriptNode) {
		n.past()
		assert.EqualValues(t, lateReply, n.tryShared(shareS, 1, 20_000))
		assert.Empty(t, n.get())
	}},
	{"acquire_shared", "refused", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 0, n.releaseShared(shareS, 0, 1))
		assert.EqualValues(t, 2, n.tryShared(shareS, 1, 20_000))
		assert.Empty(t, n.get())
	}},
	{"extend_shared", "late", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 1, n.tryShared(shareS, 1, 20_000))
		before := n.get()
		n.past()
		assert.EqualValues(t, lateReply, n.extendShared(shareS, 2, 1_000))
		unchanged(t, n, before)
	}},
	{"restore_shared", "late", func(t *testing.T, n *scriptNode) {
		n.past()
		assert.EqualValues(t, lateReply, n.restoreShared(shareS, 2, 20_000))
		assert.Empty(t, n.get())
	}},
	{"restore_shared", "refused", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 0, n.releaseShared(shareS, 0, 2))
		assert.EqualValues(t, 2, n.restoreShared(shareS, 2, 20_000))
		assert.Empty(t, n.get())
	}},
	{"release_shared", "within", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 1, n.tryShared(shareS, 1, 20_000))
		assert.EqualValues(t, 1, n.releaseShared(shareS, 0, 1))
		assert.Empty(t, n.get())
		assert.True(t, n.refuses(shareS, 1))
	}},
	{"release_shared", "past", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 1, n.tryShared(shareS, 1, 20_000))
		n.past()
		assert.EqualValues(t, 1, n.releaseShared(shareS, 0, 1))
		assert.Empty(t, n.get())
		assert.Empty(t, n.refusal(shareS))
	}},
	{"acquire_permit", "late", func(t *testing.T, n *scriptNode) {
		n.past()
		code, _ := n.acquirePermit("P.", 1, 20_000, 2, -1)
		assert.EqualValues(t, lateReply, code)
		assert.Empty(t, n.get())
	}},
	{"acquire_permit", "refused", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 0, n.releasePermit("P.", 0, 1))
		code, _ := n.acquirePermit("P.", 1, 20_000, 2, -1)
		assert.EqualValues(t, 2, code)
		assert.Empty(t, n.get())
	}},
	{"extend_permit", "late", func(t *testing.T, n *scriptNode) {
		code, slot := n.acquirePermit("P.", 1, 20_000, 2, -1)
		require.EqualValues(t, 1, code)
		before := n.get()
		n.past()
		assert.EqualValues(t, lateReply, n.extendPermit("P.", 2, 1_000, int(slot)))
		unchanged(t, n, before)
	}},
	{"restore_permit", "late", func(t *testing.T, n *scriptNode) {
		n.past()
		assert.EqualValues(t, lateReply, n.restorePermit("P.", 2, 20_000, 0, 2))
		assert.Empty(t, n.get())
	}},
	{"restore_permit", "refused", func(t *testing.T, n *scriptNode) {
		require.EqualValues(t, 0, n.releasePermit("P.", 0, 2))
		assert.EqualValues(t, 2, n.restorePermit("P.", 2, 20_000, 0, 2))
		assert.Empty(t, n.get())
	}},
	{"release_permit", "within", func(t *testing.T, n *scriptNode) {
		code, _ := n.acquirePermit("P.", 1, 20_000, 2, -1)
		require.EqualValues(t, 1, code)
		assert.EqualValues(t, 1, n.releasePermit("P.", 0, 1))
		assert.Empty(t, n.get())
		assert.True(t, n.refuses("P.", 1))
	}},
	{"release_permit", "past", func(t *testing.T, n *scriptNode) {
		code, _ := n.acquirePermit("P.", 1, 20_000, 2, -1)
		require.EqualValues(t, 1, code)
		n.past()
		assert.EqualValues(t, 1, n.releasePermit("P.", 0, 1))
		assert.Empty(t, n.get())
		assert.Empty(t, n.refusal("P."))
	}},
	{"announce", "late", func(t *testing.T, n *scriptNode) {
		n.past()
		assert.EqualValues(t, lateReply, n.announce(lockA, "w", 5_000))
		assert.Empty(t, n.rc.Get(context.Background(), n.key+waitSuffix).Val(), "nobody entered in the waiting room")
	}},
}

// TestLateWritesTable checks every cell of the two tables in
// docs/late-writes.md on a real node, and that the tables have a row for
// each script checked here and a column for each state.
func TestLateWritesTable(t *testing.T) {
	n := newScriptNode(t)
	ran := map[string]bool{}
	for i, c := range append(slices.Clone(lateCases), lateEvery...) {
		t.Run(c.script+"/"+c.state, func(t *testing.T) {
			n.t, n.key, n.at = t, "late:"+strconv.Itoa(i), 0
			for _, s := range lateStates {
				if s.name == c.state && i < len(lateCases) {
					s.put(n)
				}
			}
			c.check(t, n)
			ran[c.script+"/"+c.state] = true
		})
	}
	doc, err := os.ReadFile("docs/late-writes.md")
	require.NoError(t, err)
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1)
	documented := map[string]bool{}
	everyOther := map[string]bool{}
	for _, c := range lateEvery {
		everyOther[c.script] = true
	}
	for _, r := range rows {
		documented[r[1]] = true
		if everyOther[r[1]] {
			continue
		}
		for _, s := range lateStates {
			assert.True(t, ran[r[1]+"/"+s.name], "docs/late-writes.md's row %s, column %q is not checked", r[1], s.name)
		}
	}
	for _, c := range append(slices.Clone(lateCases), lateEvery...) {
		assert.True(t, documented[c.script], "docs/late-writes.md has no row for %s", c.script)
	}
	for _, s := range allScripts {
		if !strings.HasPrefix(sources[s], lateSrc) {
			continue
		}
		name := scriptFileEnding(sources[s])
		assert.True(t, documented[name], "docs/late-writes.md has no row for scripts/%s.lua, which writes or deletes for a Lock", name)
	}
}

// scriptFileEnding names the script whose source is src by the file that
// ends it (scripts.go's table): "release" for release_one.lua, the file's
// name otherwise.
func scriptFileEnding(src string) string {
	for _, f := range []struct{ name, src string }{
		{"acquire", acquireSrc}, {"acquire_fenced", acquireFencedSrc}, {"acquire_all", acquireAllSrc},
		{"extend", extendOneSrc}, {"extend_all", extendAllSrc}, {"restore", restoreSrc}, {"release", releaseOneSrc},
		{"release_all", releaseAllSrc}, {"fence_commit", fenceCommitSrc}, {"handover", handoverSrc}, {"settle", settleSrc},
		{"announce", announceSrc}, {"acquire_shared", acquireSharedSrc}, {"extend_shared", extendSharedSrc},
		{"restore_shared", restoreSharedSrc}, {"release_shared", releaseSharedSrc}, {"acquire_permit", acquirePermitSrc},
		{"extend_permit", extendPermitSrc}, {"restore_permit", restorePermitSrc}, {"release_permit", releasePermitSrc},
		{"acquire_all_fenced", acquireAllFencedSrc},
	} {
		if strings.HasSuffix(src, f.src) {
			return f.name
		}
	}
	return "?"
}
