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
}

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

func (n *scriptNode) run(s *redis.Script, keys []string, args ...any) any {
	n.t.Helper()
	v, err := s.Run(context.Background(), n.rc, keys, args...).Result()
	require.NoError(n.t, err)
	return v
}

func (n *scriptNode) code(s *redis.Script, keys []string, args ...any) int64 {
	n.t.Helper()
	switch v := n.run(s, keys, args...).(type) {
	case int64:
		return v
	case []any:
		return v[0].(int64)
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

// holder is the value under the key without the tombstone entries it
// carries (lib.lua), "" for nothing or a tombstone.
func (n *scriptNode) holder() string {
	v, _, _ := strings.Cut(n.get(), ",")
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
// to Lock p's waiter.
func (n *scriptNode) handover(p string, gen int, ttlMs int, leaving string) int64 {
	return n.code(handoverScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, holderOfLock(p), gen, leaving, 0, 9, 2000)
}

func (n *scriptNode) extend(p string, gen int, ttlMs int) int64 {
	return n.code(extendScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

func (n *scriptNode) restore(p string, gen int, ttlMs int) int64 {
	return n.code(restoreScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

// release deletes p's values up to generation limit (0: a Release),
// leaving what refuses p's writes up to generation tomb for 2 s.
func (n *scriptNode) release(p string, limit, tomb int) int64 {
	return n.code(releaseScript, []string{n.key}, p, limit, tomb, 2000)
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
// table in docs/late-writes.md. Each puts the state on the node and
// returns what the case expects to stay untouched, if anything.
var lateStates = []struct {
	name string
	put  func(n *scriptNode)
}{
	{"own tombstone", func(n *scriptNode) { n.set(tombstoneOf(lockA, 5), 2*time.Second) }},
	{"other tombstone", func(n *scriptNode) { n.set(tombstoneOf(lockY, 5), 2*time.Second) }},
	{"chain head", func(n *scriptNode) {
		n.set(lockA+"5"+chained(n.now()+20_000, lockB+"3"), 20*time.Second)
	}},
	{"chain inside", func(n *scriptNode) {
		n.set(lockB+"6"+chained(n.now()+20_000, lockA+"5"), 20*time.Second)
	}},
	{"released in chain", func(n *scriptNode) {
		// B took over A's value; A was then released: A's Release took it
		// out of B's chain (release.lua), so B's rollback must not bring
		// it back.
		n.set(lockB+"6"+chained(n.now()+20_000, lockA+"5"), 20*time.Second)
		require.EqualValues(n.t, 1, n.release(lockA, 0, 5))
	}},
	{"guard marker", func(n *scriptNode) { n.set("0123abcd:1700000000000", 0) }},
	{"other holder", func(n *scriptNode) { n.set(lockY+"3", 20*time.Second) }},
	{"carries", func(n *scriptNode) {
		// A holds, and carries Y's entry: Y's delete found A's value.
		n.set(lockA+"5", 20*time.Second)
		require.EqualValues(n.t, -1, n.release(lockY, 0, 5))
	}},
}

// entryOf is the tombstone entry against prefix's writes up to gen, as a
// tombstone holds it and a value carries it after ",deadline!" (lib.lua).
func entryOf(prefix string, gen uint64) string {
	return strings.TrimPrefix(tombstoneOf(prefix, gen), "!")
}

// carries reports whether value v carries the entry against prefix's
// writes up to gen.
func carries(v, prefix string, gen uint64) bool {
	_, c, _ := strings.Cut(v, ",")
	_, c, _ = strings.Cut(c, "!") // the entries' deadline
	return slices.Contains(strings.Split(c, ","), entryOf(prefix, gen))
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
	{"acquire", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.acquire(lockA, 5, 20_000), "a write the tombstone was left against")
		assert.Equal(t, tombstoneOf(lockA, 5), n.get())
		assert.Greater(t, n.pttl(), 1500*time.Millisecond, "the refusal cut the tombstone's life")
		assert.EqualValues(t, 1, n.acquire(lockA, 6, 20_000), "a later attempt takes it over")
	}},
	{"acquire", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.acquire(lockA, 5, 20_000))
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockA+"5,"), v)
		assert.True(t, carries(v, lockY, 5), "the tombstone's entry goes on in the value: %q", v)
		assert.Greater(t, n.pttl(), 15*time.Second, "with the Lock's own expiry")
		assert.EqualValues(t, 1, n.release(lockA, 0, 0))
		assert.EqualValues(t, 2, n.acquire(lockY, 5, 20_000), "A's delete leaves it, refusing Y's late write")
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
		// A's Release left its entry in B's value: a stale write of A that
		// lands now is refused, where B holds, as a tombstone refuses it.
		assert.EqualValues(t, 2, n.acquire(lockA, 4, 20_000))
		assert.Equal(t, lockB+"6", n.holder())
		assert.True(t, carries(n.get(), lockA, 5), n.get())
		assert.EqualValues(t, script.TookOver, n.acquire(lockA, 6, 20_000), "a later write of A takes B over, as any Lock of the owner may")
	}},
	{"acquire", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.LessOrEqual(t, n.acquire(lockA, 5, 20_000), int64(0), "refused as another holder")
		assert.Equal(t, "0123abcd:1700000000000", n.get(), "the marker is never written over")
	}},
	{"acquire_fenced", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.acquireFenced(lockA, 5, 20_000))
		assert.Equal(t, tombstoneOf(lockA, 5), n.get())
	}},
	{"acquire_fenced", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.acquireFenced(lockA, 5, 20_000))
		assert.True(t, strings.HasPrefix(n.get(), lockA+"5,"), n.get())
		assert.True(t, carries(n.get(), lockY, 5), "as acquire: %q", n.get())
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
		assert.Equal(t, lockB+"6", n.holder())
	}},
	{"acquire_fenced", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.acquireFenced(lockA, 5, 20_000))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// handover: the leaving Lock is Y, or A itself; the waiter is A (gen 5) or B.
	{"handover", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.handover(lockA, 5, 20_000, lockY), "the waiter's stale write")
		v := n.get()
		assert.Contains(t, v, entryOf(lockA, 5), "the tombstone stays")
		assert.Contains(t, v, entryOf(lockY, 9), "and refuses the leaving Lock's writes too")
	}},
	{"handover", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.handover(lockA, 5, 20_000, lockY), "an absent key: the waiter takes it")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockA+"5,"), v)
		assert.True(t, carries(v, lockY, 9), "carrying the leaving Lock's entry, raised: %q", v)
	}},
	{"handover", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.HandedOver, n.handover(lockY, 1, 20_000, lockA), "A leaves: final, chain and all")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockY+"1,"), v)
		assert.True(t, carries(v, lockA, 9), "carrying A's entry: %q", v)
	}},
	{"handover", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.LessOrEqual(t, n.handover(lockY, 1, 20_000, lockA), int64(0), "A is not the holder here: B is")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockB+"6|"), v)
		assert.True(t, carries(v, lockA, 9), "B's value carries A's entry: %q", v)
	}},
	{"handover", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.handover(lockB, 7, 20_000, lockA), "A is gone: B's waiter takes over B's own value")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockB+"7,"), v)
		assert.True(t, carries(v, lockA, 9), "carrying A's entry: %q", v)
	}},
	{"handover", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.LessOrEqual(t, n.handover(lockA, 5, 20_000, lockY), int64(0))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// extend
	{"extend", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.extend(lockA, 6, 20_000), "absent: never created")
		assert.Equal(t, tombstoneOf(lockA, 5), n.get())
	}},
	{"extend", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.extend(lockA, 6, 20_000))
		assert.Equal(t, tombstoneOf(lockY, 5), n.get())
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
		assert.Equal(t, lockB+"6", n.holder())
	}},
	{"extend", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.extend(lockA, 6, 20_000))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// restore
	{"restore", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.restore(lockA, 5, 20_000), "the Lock's delete ran: nothing comes back")
		assert.Equal(t, tombstoneOf(lockA, 5), n.get())
		assert.EqualValues(t, 2, n.restore(lockA, 4, 20_000))
	}},
	{"restore", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.restore(lockA, 5, 20_000), "an absent key")
		assert.True(t, strings.HasPrefix(n.get(), lockA+"5,"), n.get())
		assert.True(t, carries(n.get(), lockY, 5), "carrying the tombstone's entry: %q", n.get())
	}},
	{"restore", "chain head", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000), "the key is there")
		assert.Equal(t, before, n.get())
	}},
	{"restore", "chain inside", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000))
		assert.Equal(t, before, n.get())
	}},
	{"restore", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000))
		assert.Equal(t, lockB+"6", n.holder())
	}},
	{"restore", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// release: a Release (limit 0), with a tombstone where a write of A got no reply
	{"release", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 0, 9), "absent")
		assert.Equal(t, tombstoneOf(lockA, 9), n.get(), "raised to the Lock's latest write")
		assert.EqualValues(t, 0, n.release(lockA, 0, 7))
		assert.Equal(t, tombstoneOf(lockA, 9), n.get(), "never lowered")
	}},
	{"release", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 0, 9))
		v := n.get()
		assert.Contains(t, v, strings.TrimPrefix(tombstoneOf(lockA, 9), "!"), "A's entry added")
		assert.Contains(t, v, strings.TrimPrefix(tombstoneOf(lockY, 5), "!"), "Y's entry kept")
		assert.EqualValues(t, 2, n.acquire(lockA, 9, 20_000))
		assert.EqualValues(t, 2, n.acquire(lockY, 5, 20_000))
	}},
	{"release", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 0, 5), "final: what A took over goes too")
		assert.Equal(t, tombstoneOf(lockA, 5), n.get())
	}},
	{"release", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 0, 5), "A's Release is confirmed")
		assert.Equal(t, lockB+"6", n.holder(), "A is cut out of B's chain")
		assert.True(t, carries(n.get(), lockA, 5), "B's value carries A's entry: %q", n.get())
		assert.EqualValues(t, 1, n.release(lockB, 6, 6), "B's rollback")
		assert.Empty(t, n.holder(), "then brings nothing back")
		assert.Contains(t, n.get(), entryOf(lockA, 5), "and leaves A's entry in its tombstone")
	}},
	{"release", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 0, 5), "released already")
		assert.Equal(t, lockB+"6", n.holder())
	}},
	{"release", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 0, 0))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// rollback: a delete up to the failed attempt's generation
	{"rollback", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 6, 6))
		assert.Equal(t, tombstoneOf(lockA, 6), n.get(), "raised to this attempt")
	}},
	{"rollback", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.release(lockA, 6, 6))
		assert.Contains(t, n.get(), strings.TrimPrefix(tombstoneOf(lockY, 5), "!"))
		assert.EqualValues(t, 2, n.acquire(lockA, 6, 20_000))
	}},
	{"rollback", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 5, 5))
		assert.Equal(t, lockB+"3", n.holder(), "the replaced value comes back")
		assert.True(t, carries(n.get(), lockA, 5), "carrying what refuses the attempt's late copies: %q", n.get())
		assert.InDelta(t, 20*time.Second, n.pttl(), float64(2*time.Second), "with its own expiry")
	}},
	{"rollback", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 5, 5))
		assert.Equal(t, lockB+"6", n.holder(), "A's failed attempt leaves B's chain")
		assert.True(t, carries(n.get(), lockA, 5), n.get())
	}},
	{"rollback", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockB, 6, 6), "B's rollback")
		assert.Empty(t, n.holder(), "A was released: nothing comes back")
	}},
	{"rollback", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 5, 5))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// fence_commit
	{"fence_commit", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.commit(lockA, 10))
		assert.Equal(t, tombstoneOf(lockA, 5), n.get())
	}},
	{"fence_commit", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.commit(lockA, 10))
	}},
	{"fence_commit", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.commit(lockA, 10))
		assert.Equal(t, "10", n.rc.Get(context.Background(), n.key+fenceOf).Val())
	}},
	{"fence_commit", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.commit(lockA, 10))
		assert.Empty(t, n.rc.Get(context.Background(), n.key+fenceOf).Val())
	}},
	{"fence_commit", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.commit(lockA, 10))
	}},
	{"fence_commit", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.commit(lockA, 10))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// A column each: another holder's value; A's value carrying Y's entry.
	{"acquire", "other holder", func(t *testing.T, n *scriptNode) {
		assert.Less(t, n.acquire(lockA, 5, 20_000), int64(0), "refused")
		assert.Equal(t, lockY+"3", n.get())
	}},
	{"acquire", "carries", func(t *testing.T, n *scriptNode) {
		assert.Less(t, n.acquire(lockY, 5, 20_000), int64(0), "Y's write refused: A holds")
		assert.EqualValues(t, 1, n.acquire(lockA, 6, 20_000), "A's retry")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockA+"6,"), v)
		assert.True(t, carries(v, lockY, 5), "keeps the entry: %q", v)
	}},
	{"acquire_fenced", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.acquireFenced(lockA, 5, 20_000))
		assert.Equal(t, lockY+"3", n.get())
	}},
	{"acquire_fenced", "carries", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.acquireFenced(lockA, 6, 20_000))
		assert.True(t, carries(n.get(), lockY, 5), "as acquire: %q", n.get())
	}},
	{"handover", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.HandedOver, n.handover(lockA, 5, 20_000, lockY), "Y leaves to A's waiter")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockA+"5,"), v)
		assert.True(t, carries(v, lockY, 9), "carrying Y's entry: %q", v)
	}},
	{"handover", "carries", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.HandedOver, n.handover(lockB, 1, 20_000, lockA), "A leaves to B's waiter")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockB+"1,"), v)
		assert.True(t, carries(v, lockY, 5) && carries(v, lockA, 9), "carrying what A carried and A's entry: %q", v)
	}},
	{"extend", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.extend(lockA, 6, 20_000))
		assert.Equal(t, lockY+"3", n.get())
	}},
	{"extend", "carries", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.extend(lockA, 6, 500), "extended")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockA+"6,"), v)
		assert.True(t, carries(v, lockY, 5), "keeping the entry: %q", v)
		// The entry's 2 s outlast the extension's 500 ms: the value lives
		// until the entry's deadline, or the entry would go with it and
		// Y's late write land (the simulator's seed 6).
		assert.Greater(t, n.pttl(), time.Second, "living as long as the entry it carries")
	}},
	{"restore", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.restore(lockA, 5, 20_000))
		assert.Equal(t, lockY+"3", n.get())
	}},
	{"restore", "carries", func(t *testing.T, n *scriptNode) {
		before := n.get()
		assert.EqualValues(t, 0, n.restore(lockA, 6, 20_000), "the key is there")
		assert.Equal(t, before, n.get())
	}},
	{"release", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 0, 9), "another holder's value")
		v := n.get()
		assert.True(t, strings.HasPrefix(v, lockY+"3,"), v)
		assert.True(t, carries(v, lockA, 9), "carries A's entry: %q", v)
		assert.Greater(t, n.pttl(), 15*time.Second, "the holder keeps its expiry")
		assert.EqualValues(t, 1, n.release(lockY, 0, 3), "Y's own Release")
		assert.Equal(t, "!"+entryOf(lockY, 3)+","+entryOf(lockA, 9), n.get(), "leaves A's entry in its tombstone")
		assert.EqualValues(t, 2, n.acquire(lockA, 9, 20_000), "which refuses A's late write")
	}},
	{"release", "carries", func(t *testing.T, n *scriptNode) {
		// A's own tombstone would live 100 ms; Y's entry must refuse for
		// its 2 s.
		assert.EqualValues(t, 1, n.code(releaseScript, []string{n.key}, lockA, 0, 9, 100))
		v := n.get()
		assert.True(t, strings.HasPrefix(v, "!"), v)
		assert.Contains(t, v, entryOf(lockA, 9))
		assert.Contains(t, v, entryOf(lockY, 5), "what A carried stays")
		assert.Greater(t, n.pttl(), time.Second, "until the carried entry's deadline")
		assert.LessOrEqual(t, n.pttl(), 2*time.Second, "and no longer: not the value's 20 s")
		assert.EqualValues(t, 2, n.acquire(lockY, 5, 20_000))
	}},
	{"rollback", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 5, 5))
		assert.True(t, carries(n.get(), lockA, 5), "carries A's entry: %q", n.get())
	}},
	{"rollback", "carries", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 5, 5))
		v := n.get()
		assert.Contains(t, v, entryOf(lockA, 5))
		assert.Contains(t, v, entryOf(lockY, 5))
	}},
	{"fence_commit", "other holder", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.commit(lockA, 10))
		assert.Equal(t, lockY+"3", n.get())
	}},
	{"fence_commit", "carries", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.commit(lockA, 10), "A holds")
		assert.Equal(t, "10", n.rc.Get(context.Background(), n.key+fenceOf).Val())
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
	assert.Equal(t, before, n.get(), "never written over")
	assert.Empty(t, n.rc.Get(context.Background(), n.key+":lock").Val(), "and nothing acquired")
}

func init() {
	for _, s := range lateStates {
		if s.name != "guard marker" {
			lateCases = append(lateCases, lateCase{"restart_guard", s.name, notMarker})
		}
	}
	// settle records the Lock's term only where the node holds its
	// value: a late copy of it records nothing once the Lock's value is
	// gone, or under another Lock.
	for _, s := range lateStates {
		holds := s.name == "chain head" || s.name == "carries"
		lateCases = append(lateCases, lateCase{"settle", s.name, func(t *testing.T, n *scriptNode) {
			before := n.get()
			if !holds {
				assert.EqualValues(t, 0, n.settle(lockA, 10))
				assert.Empty(t, n.record(), "recorded without the Lock's value")
			} else {
				assert.EqualValues(t, 1, n.settle(lockA, 10))
				assert.Equal(t, "10="+strings.TrimSuffix(lockA, "."), n.record())
			}
			assert.Equal(t, before, n.get(), "the key is left as it was")
		}})
	}
	lateCases = append(lateCases, lateCase{"restart_guard", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 3, n.guarded(), "another run's marker: the node is new from now")
		assert.Regexp(t, "^[0-9a-f]{40}:[0-9]+$", n.get())
		assert.NotEqual(t, "0123abcd:1700000000000", n.get())
	}})
}

// TestLateWritesTable checks every cell of the table in docs/late-writes.md
// on a real node, and that the table has a row for each script checked here
// and a column for each state.
func TestLateWritesTable(t *testing.T) {
	n := newScriptNode(t)
	ran := map[string]bool{}
	for i, c := range lateCases {
		t.Run(c.script+"/"+c.state, func(t *testing.T) {
			n.t, n.key = t, "late:"+strconv.Itoa(i)
			for _, s := range lateStates {
				if s.name == c.state {
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
	for _, r := range rows {
		documented[r[1]] = true
		for _, s := range lateStates {
			assert.True(t, ran[r[1]+"/"+s.name], "docs/late-writes.md's row %s, column %q is not checked", r[1], s.name)
		}
	}
	for _, c := range lateCases {
		assert.True(t, documented[c.script], "docs/late-writes.md has no row for %s", c.script)
	}
}

// tombstoneOf is the tombstone a delete of prefix's values leaves against
// generations up to gen (scripts/release.lua).
func tombstoneOf(prefix string, gen uint64) string {
	sum := sha1.Sum([]byte(prefix))
	return "!" + hex.EncodeToString(sum[:])[:16] + ":" + strconv.FormatUint(gen, 10)
}
