package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/testbed"
)

// counted counts the commands a go-redis hook saw.
type counted struct{ n atomic.Int64 }

func (c *counted) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counted) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *counted) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestBoundPlainClient: on a *redis.Client without ContextTimeoutEnabled,
// a call whose reply is lost returns at its deadline, not at go-redis's
// ReadTimeout, and frees its connection: the client's pool of one serves
// the next call at once. The hook the user added before sees every call,
// once, with two Sets over the client.
func TestBoundPlainClient(t *testing.T) {
	bed := testbed.Start(t, 1)
	clients := bed.Clients(func(o *redis.Options) {
		o.ReadTimeout = 10 * time.Second
		o.PoolSize = 1
	})
	hook := &counted{}
	clients[0].AddHook(hook)
	var sets []*Set
	for range 2 {
		p, err := NewSet(clients, Config{Scripts: testScripts, Sources: testSources, KeyLife: testKeyLife, Timing: testTiming})
		require.NoError(t, err)
		require.True(t, p.nodes[0].bounded, "a plain client's calls are not bounded")
		sets = append(sets, p)
		t.Cleanup(func() { p.Life.Shut() })
	}
	e := &laneNodes{t: t, p: sets[0], bed: bed, proxies: bed.Proxies}
	require.NoError(t, e.p.Warm(t.Context(), func(i int, _ string, err error) error { return err }))

	var log replyLog
	e.launch(NewLanes(1), writeSpec("ut:bound:1", utValue("utB.", 1), waitLimit, &log))
	require.Equal(t, OK, log.waitN(t, 1, "a write's reply")[0].Status)
	require.EqualValues(t, 1, hook.n.Load(), "the user's hook did not see the call once")

	bed.Proxies[0].SetDropReplies(true)
	var lost replyLog
	start := time.Now()
	e.launch(NewLanes(1), writeSpec("ut:bound:2", utValue("utB.", 2), 200*time.Millisecond, &lost))
	rep := lost.waitN(t, 1, "the write whose reply is lost")[0]
	took := time.Since(start)
	require.Equal(t, Unknown, rep.Status)
	require.Less(t, took, 5*time.Second, "the call waited for go-redis's ReadTimeout")
	bed.Proxies[0].SetDropReplies(false)

	var next replyLog
	start = time.Now()
	e.launch(NewLanes(1), writeSpec("ut:bound:3", utValue("utB.", 3), waitLimit, &next))
	require.Equal(t, OK, next.waitN(t, 1, "the next write's reply")[0].Status, "the pool's one connection is still held")
	require.Less(t, time.Since(start), 5*time.Second)
	require.EqualValues(t, 3, hook.n.Load(), "the user's hook saw the calls other than once each")
}
