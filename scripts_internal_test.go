package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"regexp"
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

func (n *scriptNode) handover(p string, gen int, ttlMs int, leaving string) int64 {
	return n.code(handoverScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, holderOfLock(p), gen, leaving, 0)
}

func (n *scriptNode) extend(p string, gen int, ttlMs int) int64 {
	return n.code(extendScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

func (n *scriptNode) restore(p string, gen int, ttlMs int) int64 {
	return n.code(restoreScript, []string{n.key}, p+strconv.Itoa(gen), ttlMs, p, gen)
}

// release deletes p's values up to generation limit (0: a Release),
// leaving a tombstone against tomb when it is above 0.
func (n *scriptNode) release(p string, limit, tomb int) int64 {
	if tomb > 0 {
		return n.code(releaseScript, []string{n.key}, p, limit, tomb, 2000)
	}
	return n.code(releaseScript, []string{n.key}, p, limit)
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
		require.EqualValues(n.t, 1, n.release(lockA, 0, 0))
	}},
	{"guard marker", func(n *scriptNode) { n.set("0123abcd:1700000000000", 0) }},
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
		// The gap docs/late-writes.md names: no tombstone can stand where
		// B holds, so a stale write of A that lands now takes B over as any
		// Lock of the owner may; it keeps B's value for B's rollback.
		assert.EqualValues(t, script.TookOver, n.acquire(lockA, 4, 20_000))
		assert.True(t, strings.HasPrefix(n.get(), lockA+"4|"), n.get())
		assert.True(t, strings.HasSuffix(n.get(), ":"+lockB+"6"), n.get())
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
		assert.EqualValues(t, script.TookOver, n.acquireFenced(lockA, 4, 20_000), "as acquire")
		assert.True(t, strings.HasSuffix(n.get(), ":"+lockB+"6"), n.get())
	}},
	{"acquire_fenced", "guard marker", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 0, n.acquireFenced(lockA, 5, 20_000))
		assert.Equal(t, "0123abcd:1700000000000", n.get())
	}},
	// handover: the leaving Lock is Y, or A itself; the waiter is A (gen 5) or B.
	{"handover", "own tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 2, n.handover(lockA, 5, 20_000, lockY), "the waiter's stale write")
		assert.Equal(t, tombstoneOf(lockA, 5), n.get())
	}},
	{"handover", "other tombstone", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.handover(lockA, 5, 20_000, lockY), "an absent key: the waiter takes it")
		assert.Equal(t, lockA+"5", n.get())
	}},
	{"handover", "chain head", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, script.HandedOver, n.handover(lockY, 1, 20_000, lockA), "A leaves: final, chain and all")
		assert.Equal(t, lockY+"1", n.get())
	}},
	{"handover", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.LessOrEqual(t, n.handover(lockY, 1, 20_000, lockA), int64(0), "A is not the holder here: B is")
		assert.Equal(t, lockB+"6"+n.get()[len(lockB+"6"):], n.get())
		assert.True(t, strings.HasPrefix(n.get(), lockB+"6|"))
	}},
	{"handover", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.handover(lockB, 7, 20_000, lockA), "A is gone: B's waiter takes over B's own value")
		assert.Equal(t, lockB+"7", n.get())
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
		assert.Equal(t, lockB+"6", n.get())
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
		assert.Equal(t, lockA+"5", n.get())
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
		assert.Equal(t, lockB+"6", n.get())
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
		assert.EqualValues(t, 1, n.release(lockA, 0, 0), "final: what A took over goes too")
		assert.Empty(t, n.get())
	}},
	{"release", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 0, 0), "A's Release is confirmed")
		assert.Equal(t, lockB+"6", n.get(), "A is cut out of B's chain")
		assert.EqualValues(t, 1, n.release(lockB, 6, 0), "B's rollback")
		assert.Empty(t, n.get(), "then brings nothing back")
	}},
	{"release", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, -1, n.release(lockA, 0, 0), "released already")
		assert.Equal(t, lockB+"6", n.get())
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
		assert.EqualValues(t, 1, n.release(lockA, 5, 0))
		assert.Equal(t, lockB+"3", n.get(), "the replaced value comes back")
		assert.InDelta(t, 20*time.Second, n.pttl(), float64(2*time.Second), "with its own expiry")
	}},
	{"rollback", "chain inside", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockA, 5, 0))
		assert.Equal(t, lockB+"6", n.get(), "A's failed attempt leaves B's chain")
	}},
	{"rollback", "released in chain", func(t *testing.T, n *scriptNode) {
		assert.EqualValues(t, 1, n.release(lockB, 6, 0), "B's rollback")
		assert.Empty(t, n.get(), "A was released: nothing comes back")
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
}

// guarded is a guarded acquire of Lock A whose restart marker is the
// node's key: the state a case puts there is under the marker's name.
func (n *scriptNode) guarded() int64 {
	return n.code(acquireGuardedScript, []string{n.key + ":lock", n.key}, lockA+"5", 20_000, ownerX, 5, 60_000)
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
	for _, s := range lateStates[:len(lateStates)-1] {
		lateCases = append(lateCases, lateCase{"restart_guard", s.name, notMarker})
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
