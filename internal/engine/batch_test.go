package engine

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/testbed"
)

// sends counts the scripts a go-redis client sent (EVALSHA, EVAL): alone,
// and in pipelines with their sizes. Other commands (identifying the
// server) are not counted.
type sends struct {
	mu        sync.Mutex
	singles   int
	pipelines []int
}

func (s *sends) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *sends) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			s.mu.Lock()
			s.singles++
			s.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (s *sends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if isScript(c) {
				n++
			}
		}
		if n > 0 {
			s.mu.Lock()
			s.pipelines = append(s.pipelines, n)
			s.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func isScript(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" }

func (s *sends) get() (int, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.singles, append([]int(nil), s.pipelines...)
}

func (s *sends) reset() {
	s.mu.Lock()
	s.singles, s.pipelines = 0, nil
	s.mu.Unlock()
}

// newBatchNodes is newLaneNodes over one node whose client counts its sends.
func newBatchNodes(t *testing.T, bounded bool) (*laneNodes, *sends) {
	t.Helper()
	bed := testbed.Start(t, 1)
	s := &sends{}
	clients := bed.Clients(func(o *redis.Options) {
		o.ContextTimeoutEnabled = bounded
		o.ReadTimeout = 10 * time.Second
	})
	clients[0].AddHook(s)
	p, err := NewSet(clients, Config{Scripts: testScripts, Sources: testSources, KeyLife: testKeyLife, Timing: testTiming})
	require.NoError(t, err)
	require.NoError(t, p.Warm(t.Context(), func(int, string, error) error { return nil }))
	t.Cleanup(func() {
		bed.ResetFaults()
		p.Life.Shut()
		select {
		case <-p.Life.Idle():
		case <-time.After(15 * time.Second):
			t.Error("the background work did not end")
		}
	})
	s.reset()
	// The tests hold flights at the proxy: they count until their deadline,
	// however long the node's flights take.
	p.nodes[0].batch.minStall = time.Hour
	return &laneNodes{t: t, p: p, bed: bed, proxies: bed.Proxies}, s
}

// TestBatchLoneCallGoesAlone: a call to an idle node goes at once, as a
// single command: no pipeline, no wait.
func TestBatchLoneCallGoesAlone(t *testing.T) {
	e, s := newBatchNodes(t, false)
	var log replyLog
	e.launch(NewLanes(1), writeSpec("ut:lone", utValue("utL.", 1), waitLimit, &log))
	reps := log.waitN(t, 1, "the write's reply")
	require.Equal(t, OK, reps[0].Status, "%+v", reps[0])
	singles, pipes := s.get()
	require.Equal(t, 1, singles)
	require.Empty(t, pipes)
}

// TestBatchCallsGoTogether: the calls of many locks that reach a node while
// a call is in flight to it go out as one pipeline once it returns, each
// with its own reply; the calls of the same node never wait for a timer.
func TestBatchCallsGoTogether(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		t.Run("bounded="+strconv.FormatBool(bounded), func(t *testing.T) {
			e, s := newBatchNodes(t, bounded)
			firstLogs := e.holdFlights(t, "utB", waitLimit)

			const n = 20
			logs := make([]replyLog, n)
			for i := range n {
				v := utValue("utB"+strconv.Itoa(i)+".", 1)
				e.launch(NewLanes(1), writeSpec("ut:batch:"+strconv.Itoa(i), v, waitLimit, &logs[i]))
			}
			waitFor(t, "every write queued behind the first", func() bool {
				e.p.nodes[0].batch.mu.Lock()
				defer e.p.nodes[0].batch.mu.Unlock()
				return len(e.p.nodes[0].batch.queue) == n
			})
			e.proxies[0].ReleaseHeld()
			for i := range firstLogs {
				require.Equal(t, OK, firstLogs[i].waitN(t, 1, "a held write's reply")[0].Status)
			}
			for i := range n {
				rep := logs[i].waitN(t, 1, "a batched write's reply")[0]
				require.Equal(t, OK, rep.Status, "write %d: %+v", i, rep)
				require.Equal(t, "utB"+strconv.Itoa(i)+".1", e.get(0, "ut:batch:"+strconv.Itoa(i)))
			}
			singles, pipes := s.get()
			require.Equal(t, maxFlights, singles, "only the held writes went alone")
			require.Equal(t, []int{n}, pipes, "the writes that waited went as one pipeline")
		})
	}
}

// TestBatchOverdueFlightHoldsNobody: a flight past its calls' deadlines (a
// reply the network holds) does not hold the node's later calls until
// go-redis gives up on it: those queued behind it go at its deadline, and
// one that comes after it goes at once.
func TestBatchOverdueFlightHoldsNobody(t *testing.T) {
	e, s := newBatchNodes(t, false)
	heldLogs := e.holdFlights(t, "utO", 300*time.Millisecond)
	var queuedLog, laterLog replyLog
	start := time.Now()
	e.launch(NewLanes(1), writeSpec("ut:over:queued", utValue("utQ.", 1), waitLimit, &queuedLog))
	rep := queuedLog.waitN(t, 1, "the queued write's reply")[0]
	require.Equal(t, OK, rep.Status, "%+v", rep)
	require.Less(t, time.Since(start), 4*time.Second, "the queued write waited for go-redis to give up on the held ones")
	require.Equal(t, maxFlights, e.proxies[0].HeldCount(), "the held writes are still in the network")

	e.launch(NewLanes(1), writeSpec("ut:over:later", utValue("utR.", 1), waitLimit, &laterLog))
	rep = laterLog.waitN(t, 1, "the later write's reply")[0]
	require.Equal(t, OK, rep.Status, "%+v", rep)
	e.proxies[0].ReleaseHeld()
	for i := range heldLogs {
		heldLogs[i].waitN(t, 1, "a held write's reply")
	}
	singles, pipes := s.get()
	require.Equal(t, maxFlights+2, singles, "each write went alone: %v", pipes)
}

// holdFlights fills the node's flights with writes whose replies the proxy
// holds, each waited for up to wait, and returns their logs.
func (e *laneNodes) holdFlights(t *testing.T, prefix string, wait time.Duration) []replyLog {
	t.Helper()
	logs := make([]replyLog, maxFlights)
	for i := range logs {
		v := utValue(prefix+"held"+strconv.Itoa(i)+".", 1)
		caught := e.proxies[0].HoldNext([]byte(v.s))
		e.launch(NewLanes(1), writeSpec("ut:"+prefix+":held:"+strconv.Itoa(i), v, wait, &logs[i]))
		waitClosed(t, caught, "a held write reaching the proxy")
	}
	return logs
}

// TestBatchNoScript: calls that meet a node which lost its scripts (a
// restart, SCRIPT FLUSH) in a batch each load theirs and get their reply.
func TestBatchNoScript(t *testing.T) {
	e, _ := newBatchNodes(t, false)
	firstLogs := e.holdFlights(t, "utN", waitLimit)
	direct := redis.NewClient(&redis.Options{Addr: e.bed.Addrs()[0], Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}})
	defer direct.Close()
	require.NoError(t, direct.ScriptFlush(t.Context()).Err())
	logs := make([]replyLog, 5)
	for i := range logs {
		e.launch(NewLanes(1), writeSpec("ut:noscript:"+strconv.Itoa(i), utValue("utN"+strconv.Itoa(i)+".", 1), waitLimit, &logs[i]))
	}
	waitFor(t, "the writes queued", func() bool {
		e.p.nodes[0].batch.mu.Lock()
		defer e.p.nodes[0].batch.mu.Unlock()
		return len(e.p.nodes[0].batch.queue) == len(logs)
	})
	e.proxies[0].ReleaseHeld()
	for i := range firstLogs {
		firstLogs[i].waitN(t, 1, "a held write's reply")
	}
	for i := range logs {
		rep := logs[i].waitN(t, 1, "a write's reply")[0]
		require.Equal(t, OK, rep.Status, "write %d: %+v", i, rep)
	}
}
