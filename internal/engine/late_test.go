package engine

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// overdueCtx is a round's context whose deadline has passed before the
// Client's deadline scheduler told it: Err is still nil.
type overdueCtx struct {
	context.Context
	deadline time.Time
}

func (c overdueCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// TestLateContextErrorIsNoReply: a call that go-redis gave up on with
// context.DeadlineExceeded (a batch's own context, or a dial bounded by it,
// ends on its own timer) once the call's deadline had passed is an unknown
// outcome at the node's deadline, ErrNoReply, even when the round's context
// has not noticed its deadline yet. The chaos suite saw the context error
// reach a failed Acquire's error while the caller's context was still on,
// which errors.Is(err, context.DeadlineExceeded) must not say.
func TestLateContextErrorIsNoReply(t *testing.T) {
	// Every dial fails as a dial bounded by an expired context does.
	dialer := func(context.Context, string, string) (net.Conn, error) { return nil, context.DeadlineExceeded }
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", Dialer: dialer, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	p, err := NewSet([]redis.UniversalClient{rc}, Config{Scripts: testScripts, Sources: testSources, KeyLife: testKeyLife, Timing: testTiming})
	require.NoError(t, err)
	t.Cleanup(func() { p.Life.Shut() })

	op := acquireOp("ut:late", utValue("utLate.", 1), int64(10_000))
	n := p.nodes[0]
	ctx := overdueCtx{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	rep := n.call(ctx, &op, p.evalArgs(nil, &op, nil), nil)
	require.Equal(t, Unknown, rep.Status)
	require.ErrorIs(t, rep.Err, ErrNoReply)
	require.False(t, errors.Is(rep.Err, context.DeadlineExceeded), "a node's deadline reported as a context's: %v", rep.Err)

	// Before its deadline the same error is the node's own failure, as it
	// was.
	ctx.deadline = time.Now().Add(time.Minute)
	rep = n.call(ctx, &op, p.evalArgs(nil, &op, nil), nil)
	require.Equal(t, Unknown, rep.Status)
	require.False(t, errors.Is(rep.Err, ErrNoReply), "%v", rep.Err)
}
