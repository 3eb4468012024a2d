package nodetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// lookBound bounds a test's own look at a node, so that a stalled node fails
// the test instead of hanging it.
const lookBound = 20 * time.Second

// Look runs fn with a short-lived client of the node at addr whose reads are
// bounded by their context, for a test's own look at a node.
func Look(t testing.TB, addr string, fn func(context.Context, *redis.Client)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lookBound)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	fn(ctx, rc)
}

// Get returns what rc's node holds under key, "" if nothing.
func Get(t testing.TB, ctx context.Context, rc *redis.Client, key string) string {
	t.Helper()
	v, err := rc.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// CommandCalls returns how many times rc's node has run each command (lower
// case), from INFO commandstats; commands run by scripts count too.
func CommandCalls(t testing.TB, ctx context.Context, rc *redis.Client) map[string]int {
	t.Helper()
	info, err := rc.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	out := make(map[string]int)
	for line := range strings.Lines(info) {
		// cmdstat_set:calls=12,usec=...
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		cmd, rest, _ := strings.Cut(rest, ":calls=")
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		require.NoError(t, err, line)
		out[cmd] = n
	}
	return out
}

// ErrorCounts reads how many error replies of each code (LATE, NOSCRIPT...)
// rc's node has sent (INFO errorstats): a script's error reply counts
// under its first word.
func ErrorCounts(t testing.TB, ctx context.Context, rc *redis.Client) map[string]int {
	t.Helper()
	info, err := rc.Info(ctx, "errorstats").Result()
	require.NoError(t, err)
	out := make(map[string]int)
	for line := range strings.Lines(info) {
		// errorstat_LATE:count=3
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_")
		if !ok {
			continue
		}
		code, count, _ := strings.Cut(rest, ":count=")
		n, err := strconv.Atoi(count)
		require.NoError(t, err, line)
		out[code] = n
	}
	return out
}
