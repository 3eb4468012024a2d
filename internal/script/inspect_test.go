package script

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestReadInspect(t *testing.T) {
	read := func(v ...any) Inspected {
		t.Helper()
		in, err := ReadInspect(redis.NewCmdResult(v, nil))
		require.NoError(t, err)
		return in
	}
	in := read("tok.3", int64(1500), "7")
	require.Equal(t, Inspected{Held: true, Token: "tok", TTL: 1500 * time.Millisecond, Fence: 7}, in)
	require.Equal(t, time.Duration(-1), read("tok.3", int64(-1), false).TTL, "a key without expiry")
	require.False(t, read(false, int64(-2), false).Held)

	// Permits: n=3, one live, one expired, one tombstone; the node's now is 1000.
	in = read("#3,2000=1/a.1,900=0/b.1,3000=!2/c.1", int64(5000), false, int64(1000))
	require.True(t, in.Held)
	require.Equal(t, 3, in.Count)
	require.Equal(t, []Share{{Token: "a", TTL: time.Second, Slot: 1}}, in.Shares)
	require.Equal(t, time.Second, in.TTL)

	// Shared, none live: an absent key, count 0, Shares empty but not nil.
	in = read("^900=a.1", int64(5000), false, int64(1000))
	require.False(t, in.Held)
	require.NotNil(t, in.Shares)
	require.Empty(t, in.Shares)

	_, err := ReadInspect(redis.NewCmdResult([]any{"x"}, nil))
	require.Error(t, err)
	_, err = ReadInspect(redis.NewCmdResult([]any{"tok.1", int64(1), false, int64(5)}, nil))
	require.Error(t, err, "a clock with a value neither shared nor permits")
}
