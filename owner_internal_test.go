package redlock

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/script"
)

// TestOwnerTakeoverScripts runs the scripts on a real node through one
// owner's takeovers: an attempt that takes over another Lock of the owner
// keeps the replaced value and its expiry, a rollback puts them back, a retry
// keeps them, and an extension or a Release ends them.
func TestOwnerTakeoverScripts(t *testing.T) {
	n := newScriptNode(t)
	n.key = "takeover"
	rc, key := n.rc, n.key
	ctx := context.Background()
	const holder = "X~"
	// get reads the value without the chain's deadlines.
	get := func() string { return unchain(n.get()) }
	pttl := n.pttl
	acquire := func(lock string, gen int) int64 {
		return n.code(acquireScript, []string{key}, lock+strconv.Itoa(gen), 1000, holder, gen)
	}
	rollback := func(lock string, gen int) int64 { return n.release(lock, gen, gen) }
	extend := func(lock string, gen int) int64 {
		return n.code(extendScript, []string{key}, lock+strconv.Itoa(gen), 20_000, lock, gen)
	}
	const a, b, c = "X~A.", "X~B.", "X~C."

	require.NoError(t, rc.Set(ctx, key, a+"3", 20*time.Second).Err())
	assert.EqualValues(t, script.TookOver, acquire(b, 1))
	assert.Equal(t, b+"1|"+a+"3", get(), "the takeover keeps what it replaced")
	assert.Greater(t, pttl(), 15*time.Second, "the takeover keeps the replaced value's expiry")
	assert.EqualValues(t, script.TookOver, acquire(b, 2))
	assert.Equal(t, b+"2|"+a+"3", get(), "a retry keeps what the earlier attempt replaced")
	assert.EqualValues(t, 2, acquire(b, 1), "a stale attempt")
	assert.EqualValues(t, 2, rollback(b, 1), "the rollback of an earlier attempt")
	assert.Equal(t, b+"2|"+a+"3", get())
	assert.EqualValues(t, 1, rollback(b, 2))
	assert.Equal(t, a+"3", get(), "the rollback gives the key back")
	assert.True(t, n.refuses(b, 2), "the failed attempt's late copies are refused: %q", n.refusal(b))
	assert.Greater(t, pttl(), 15*time.Second, "with the replaced value's expiry")
	assert.EqualValues(t, 1, extend(a, 4), "the Lock given back extends")

	// Takeovers chain, and unwind one by one.
	assert.EqualValues(t, script.TookOver, acquire(b, 3))
	assert.EqualValues(t, script.TookOver, acquire(c, 1))
	assert.Equal(t, c+"1|"+b+"3|"+a+"4", get())
	assert.EqualValues(t, 1, rollback(c, 1))
	assert.Equal(t, b+"3|"+a+"4", get())
	// A rollback of an attempt taken over since leaves the chain: a
	// failed attempt is never put back.
	assert.EqualValues(t, script.TookOver, acquire(c, 2))
	assert.EqualValues(t, 1, rollback(b, 3))
	assert.Equal(t, c+"2|"+a+"4", get(), "B's failed attempt is out of C's chain")
	assert.EqualValues(t, 1, rollback(c, 2))
	assert.Equal(t, a+"4", get())
	// An extension means the Lock holds: its takeover is final.
	assert.EqualValues(t, script.TookOver, acquire(b, 4))
	assert.EqualValues(t, 1, extend(b, 5))
	assert.Equal(t, b+"5", get())
	assert.EqualValues(t, script.TookOver, acquire(c, 3))
	assert.EqualValues(t, 1, n.release(c, 0, 3))
	assert.Empty(t, get(), "a Release deletes, whatever its value replaced")
	assert.True(t, n.refuses(c, 3), "leaving its refusal: %q", n.refusal(c))

	// Another holder's value is never taken.
	require.NoError(t, rc.Set(ctx, key, "Y~A.1", 20*time.Second).Err())
	assert.LessOrEqual(t, acquire(b, 5), int64(0))
	assert.Equal(t, "Y~A.1", get())

	// The fenced acquire shares the step.
	require.NoError(t, rc.Set(ctx, key, a+"9", 20*time.Second).Err())
	assert.EqualValues(t, script.TookOver, n.code(acquireFencedScript, []string{key, key + ":fence"}, b+"6", 1000, holder, 6, 60_000))
	assert.Equal(t, b+"6|"+a+"9", get())
	assert.Greater(t, pttl(), 15*time.Second)
}

// unchain is value v without its chain's deadlines: "|" and the values.
func unchain(v string) string {
	return regexp.MustCompile(`\|[0-9]+:`).ReplaceAllString(v, "|")
}
