package logs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLines: each event is one line at the level WithLogger documents,
// with its fields, and an error's text only when there is one.
func TestLines(t *testing.T) {
	var b bytes.Buffer
	g := New(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})))
	boom := errors.New("boom")
	ctx := context.Background()
	for _, c := range []struct {
		log  func()
		want []string
	}{
		{func() { g.Attempt(ctx, "k", 2, time.Millisecond, nil) }, []string{"level=DEBUG", `msg="redlock: attempt"`, "key=k", "attempt=2", "acquired=true"}},
		{func() { g.Done(ctx, "release", "k", time.Millisecond, boom) }, []string{"level=DEBUG", `msg="redlock: release"`, "err=boom"}},
		{func() { g.NodeError(ctx, "delete", "k", 1, "a:1", true, boom) }, []string{"level=DEBUG", "op=delete", "node=1", "addr=a:1", "timeout=true"}},
		{func() { g.Rollback(ctx, "k", 3) }, []string{"level=DEBUG", `msg="redlock: rollback"`, "nodes=3"}},
		{func() { g.CleanupRetry(ctx, "k", 0, "a:1", 2, 20*time.Millisecond) }, []string{"level=INFO", "try=2", "wait=20ms"}},
		{func() { g.CleanupAbandoned(ctx, "k", 0, "a:1", 5, boom) }, []string{"level=WARN", "tries=5", "err=boom"}},
		{func() { g.Renewal(ctx, "k", time.Millisecond, nil) }, []string{"level=DEBUG", `msg="redlock: renewal"`}},
		{func() { g.Lost(ctx, "k", boom) }, []string{"level=WARN", `msg="redlock: lock lost"`, "err=boom"}},
		{func() { g.CampaignStarted(ctx, "k") }, []string{"level=DEBUG", `msg="redlock: campaign"`, "key=k"}},
		{func() { g.Elected(ctx, "k", 7, time.Millisecond) }, []string{"level=INFO", `msg="redlock: elected"`, "term=7", "elapsed=1ms"}},
		{func() { g.LeadershipEnded(ctx, "k", 7, time.Second, false, boom) }, []string{"level=INFO", `msg="redlock: leadership ended"`, "term=7", "lost=false", "err=boom"}},
		{func() { g.LeadershipEnded(ctx, "k", 7, time.Second, true, boom) }, []string{"level=WARN", "lost=true", "err=boom"}},
		{func() { g.LeaderObserved(ctx, "k", 8) }, []string{"level=INFO", `msg="redlock: leader observed"`, "term=8"}},
	} {
		b.Reset()
		c.log()
		line := b.String()
		require.Equal(t, 1, strings.Count(line, "\n"), line)
		for _, w := range c.want {
			assert.Contains(t, line, w)
		}
		if !strings.Contains(line, "boom") {
			assert.NotContains(t, line, "err=", "an error attribute without an error")
		}
	}
}

// TestNilLog: a Client without a logger has a nil Log, which writes
// nothing and does not panic.
func TestNilLog(t *testing.T) {
	g := New(nil)
	require.Nil(t, g)
	ctx := context.Background()
	g.Attempt(ctx, "k", 1, 0, nil)
	g.Done(ctx, "acquire", "k", 0, nil)
	g.NodeError(ctx, "acquire", "k", 0, "", false, nil)
	g.Rollback(ctx, "k", 1)
	g.CleanupRetry(ctx, "k", 0, "", 1, 0)
	g.CleanupAbandoned(ctx, "k", 0, "", 1, nil)
	g.Renewal(ctx, "k", 0, nil)
	g.Lost(ctx, "k", nil)
	g.CampaignStarted(ctx, "k")
	g.Elected(ctx, "k", 1, 0)
	g.LeadershipEnded(ctx, "k", 1, 0, false, nil)
	g.LeaderObserved(ctx, "k", 1)
}

// ctxKey marks the context TestContext logs with.
type ctxKey struct{}

// ctxHandler records the value of ctxKey in each record's context.
type ctxHandler struct {
	slog.Handler
	seen *[]any
}

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	*h.seen = append(*h.seen, ctx.Value(ctxKey{}))
	return nil
}

// TestContext: each line reaches the handler with the context of its
// call, so that a handler can take a trace id or baggage from it.
func TestContext(t *testing.T) {
	var seen []any
	g := New(slog.New(ctxHandler{slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}), &seen}))
	ctx := context.WithValue(context.Background(), ctxKey{}, "call")
	g.Attempt(ctx, "k", 1, 0, nil)
	g.NodeError(ctx, "delete", "k", 0, "", false, nil)
	g.Elected(ctx, "k", 1, 0)
	require.Equal(t, []any{"call", "call", "call"}, seen)
}
