package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/testbed"
)

// stoppedNodeSet is a node set over n real servers of which the last is
// stopped (SIGSTOP) before any contact, and whose identify calls outlast
// every wait of the test: a wait that is not cut short is seen.
func stoppedNodeSet(t *testing.T, n int) *Set {
	t.Helper()
	bed := testbed.Start(t, n)
	stopped := bed.Servers[n-1]
	require.NoError(t, stopped.Pause())
	timing := testTiming
	timing.IdentifyTimeout = time.Minute
	p, err := NewSet(bed.Clients(func(o *redis.Options) { o.ContextTimeoutEnabled = true }),
		Config{Scripts: testScripts, KeyLife: testKeyLife, Timing: timing})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, stopped.Resume()) // its identify call then ends
		p.Life.Shut()
		waitClosed(t, p.Life.Idle(), "the node set's work")
	})
	return p
}

// TestIdentifyWaitsOnce: the first operation waits for the nodes it meets
// first, up to its per-node deadline; a node still silent then is not
// waited for by the operations after it, which a node that stays stopped
// would otherwise cost each its whole deadline.
func TestIdentifyWaitsOnce(t *testing.T) {
	p := stoppedNodeSet(t, 3)
	const wait = 2 * time.Second
	start := time.Now()
	require.NoError(t, p.CheckServers(wait))
	require.GreaterOrEqual(t, time.Since(start), wait, "the first operation did not wait for the node met first")
	for i := range 3 {
		start := time.Now()
		require.NoError(t, p.CheckServers(wait))
		require.Less(t, time.Since(start), wait/2, "operation %d waited again for the stopped node", i+2)
	}
	for i, n := range p.nodes {
		require.Equal(t, i == 2, n.unidentified(), "node %d identified", i)
	}
}

// TestWarmIdentifiesThoseThatAnswer: Warm with a node stopped identifies
// the others, returns the stopped node's error, and leaves no operation
// to wait for that node again.
func TestWarmIdentifiesThoseThatAnswer(t *testing.T) {
	p := stoppedNodeSet(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err := p.Warm(ctx, func(i int, _ string, err error) error { return &warmNodeErr{i, err} })
	require.Error(t, err)
	var ne *warmNodeErr
	require.True(t, errors.As(err, &ne), "Warm's error names no node: %v", err)
	require.Equal(t, 2, ne.node)
	require.False(t, errors.Is(err, ErrInvalidArgument), "%v", err)
	for i, n := range p.nodes {
		require.Equal(t, i == 2, n.unidentified(), "node %d identified", i)
	}
	const wait = 2 * time.Second
	start := time.Now()
	require.NoError(t, p.CheckServers(wait))
	require.Less(t, time.Since(start), wait/2, "the first operation after Warm waited for the stopped node")
}

// warmNodeErr is a node's error as Warm's caller builds it.
type warmNodeErr struct {
	node int
	err  error
}

func (e *warmNodeErr) Error() string { return e.err.Error() }

// TestCompareServersOneSnapshot: a node identified while compareServers
// runs must not be seen unknown by one comparison and known by the
// completeness check of the same call: the set would then be marked
// verified, for good, with two nodes on one server, and every later reply
// of both would count. Found by TestDuplicateServerDownAtFirstContact on a
// loaded CI machine.
func TestCompareServersOneSnapshot(t *testing.T) {
	var clients []redis.UniversalClient
	for i := range 3 {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", i+1)}) // never contacted
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	p, err := NewSet(clients, Config{Scripts: testScripts, KeyLife: testKeyLife, Timing: testTiming})
	require.NoError(t, err)
	t.Cleanup(func() { p.Life.Shut() })
	set := func(n *node, ids []string) {
		n.identMu.Lock()
		n.ident = ids
		n.identMu.Unlock()
	}
	set(p.nodes[0], []string{"same"})
	set(p.nodes[2], []string{"other"})
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		set(p.nodes[1], nil)
		p.verified.Store(false)
		start := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-start
			set(p.nodes[1], []string{"same"})
		}()
		close(start)
		err := p.compareServers()
		<-done
		if err == nil && p.verified.Load() {
			t.Fatalf("try %d: the set was marked verified with nodes 0 and 1 on one server", i)
		}
	}
}
