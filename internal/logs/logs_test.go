package logs

import (
	"bytes"
	"errors"
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
	for _, c := range []struct {
		log  func()
		want []string
	}{
		{func() { g.Attempt("k", 2, time.Millisecond, nil) }, []string{"level=DEBUG", `msg="redlock: attempt"`, "key=k", "attempt=2", "acquired=true"}},
		{func() { g.Done("release", "k", time.Millisecond, boom) }, []string{"level=DEBUG", `msg="redlock: release"`, "err=boom"}},
		{func() { g.NodeError("delete", "k", 1, "a:1", true, boom) }, []string{"level=DEBUG", "op=delete", "node=1", "addr=a:1", "timeout=true"}},
		{func() { g.Rollback("k", 3) }, []string{"level=DEBUG", `msg="redlock: rollback"`, "nodes=3"}},
		{func() { g.CleanupRetry("k", 0, "a:1", 2, 20*time.Millisecond) }, []string{"level=INFO", "try=2", "wait=20ms"}},
		{func() { g.CleanupAbandoned("k", 0, "a:1", 5, boom) }, []string{"level=WARN", "tries=5", "err=boom"}},
		{func() { g.Renewal("k", time.Millisecond, nil) }, []string{"level=DEBUG", `msg="redlock: renewal"`}},
		{func() { g.Lost("k", boom) }, []string{"level=WARN", `msg="redlock: lock lost"`, "err=boom"}},
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
	g.Attempt("k", 1, 0, nil)
	g.Done("acquire", "k", 0, nil)
	g.NodeError("acquire", "k", 0, "", false, nil)
	g.Rollback("k", 1)
	g.CleanupRetry("k", 0, "", 1, 0)
	g.CleanupAbandoned("k", 0, "", 1, nil)
	g.Renewal("k", 0, nil)
	g.Lost("k", nil)
}
