package engine

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// setAll writes ARGV[1] under every key and returns how many it wrote.
var setAll = testScript(`for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1]) end return #KEYS`)

func readCount(cmd *redis.Cmd) Reply {
	n, err := cmd.Int64()
	if err != nil {
		return Reply{Err: err}
	}
	return Reply{Status: OK, Val: n}
}

// TestOpManyKeys: an op over more keys than Keys holds sends them all, in
// order, both when the node must be sent the script (NOSCRIPT: the first
// round, since Warm did not load this script) and by EVALSHA.
func TestOpManyKeys(t *testing.T) {
	e := newLaneNodes(t, 1, true)
	keys := make([]string, 70)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%02d", t.Name(), i)
	}
	for round := range 2 {
		val := "v" + strconv.Itoa(round)
		op := Op{Script: setAll, Read: readCount, Keys: [MaxKeys]string{keys[0]}, Many: keys, Args: [MaxArgs]any{val}, NArgs: 1}
		require.Equal(t, keys, op.KeyList())
		tally, err := e.p.SendAndCount(t.Context(), NewLanes(1), Spec{Effect: Write, Op: op, Wait: 5 * time.Second, TTL: time.Minute})
		require.NoError(t, err)
		require.True(t, tally.Reached(), "%+v", tally.Replies)
		require.EqualValues(t, len(keys), tally.Replies[0].Val)
		for _, k := range keys {
			require.Equal(t, val, e.get(0, k), k)
		}
	}
}

// TestManyArgsCached: a lock's rounds over the same keys box them once; a
// round over other keys (a guarded acquire's, with the marker) gets its own.
func TestManyArgsCached(t *testing.T) {
	s := NewLanes(1)
	keys := []string{"a", "b", "c"}
	first := s.manyArgs(keys)
	require.Equal(t, []any{"a", "b", "c"}, first)
	again := s.manyArgs(keys)
	require.Same(t, &first[0], &again[0], "boxed again")
	require.Zero(t, testing.AllocsPerRun(10, func() { s.manyArgs(keys) }))
	other := append(keys[:3:3], "marker")
	require.Equal(t, []any{"a", "b", "c", "marker"}, s.manyArgs(other))
	require.Equal(t, []any{"a", "b", "c"}, s.manyArgs(keys))
}
