package main

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ceilings: what no library can beat in a workload, measured in the same
// loop as the libraries. The floors of pingfloor bound one operation's
// latency; these bound throughput.

// ---- the pipelined PING floor (many keys): the bare floor with batching.
// Each node has a sender that takes every PING waiting for that node and
// sends them as one pipeline; while it waits for the reply, the next PINGs
// queue for the next pipeline. So each node sees one pipeline per round,
// however many goroutines fan out, which is the most any batching lock can
// save; a fan-out returns once a quorum of its PINGs has answered.

type pipeFloor struct {
	nodes  []*pipeNode
	quorum int
}

// pipeNode batches the PINGs of one node.
type pipeNode struct {
	c  *redis.Client
	mu sync.Mutex
	// waiting are the replies owed to the PINGs not yet sent; sending is
	// true while a sender goroutine runs. Both guarded by mu.
	waiting []chan<- error
	sending bool
	rounds  int // pipelines sent, guarded by mu: the tests see the batching
}

func openPipeFloor(clients []*redis.Client, _ *scenario) (locker, error) {
	f := &pipeFloor{quorum: len(clients)/2 + 1}
	for _, c := range clients {
		f.nodes = append(f.nodes, &pipeNode{c: c})
	}
	return f, nil
}

// ping queues one PING whose reply goes to out, and starts a sender when
// none runs.
func (n *pipeNode) ping(out chan<- error) {
	n.mu.Lock()
	n.waiting = append(n.waiting, out)
	start := !n.sending
	n.sending = true
	n.mu.Unlock()
	if start {
		go n.send()
	}
}

// send sends what is waiting as one pipeline, round after round, until
// nothing is.
func (n *pipeNode) send() {
	var batch []chan<- error
	for {
		n.mu.Lock()
		batch, n.waiting = n.waiting, batch[:0]
		if len(batch) == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		n.rounds++
		n.mu.Unlock()
		p := n.c.Pipeline()
		cmds := make([]*redis.StatusCmd, len(batch))
		for i := range batch {
			cmds[i] = p.Ping(context.Background())
		}
		_, _ = p.Exec(context.Background())
		for i, out := range batch {
			out <- cmds[i].Err()
		}
		clear(batch)
	}
}

// fanOut sends PING to every node through its sender and returns once a
// quorum has answered.
func (f *pipeFloor) fanOut() error {
	out := make(chan error, len(f.nodes))
	for _, n := range f.nodes {
		n.ping(out)
	}
	ok := 0
	for pending := len(f.nodes); pending > 0 && ok < f.quorum && ok+pending >= f.quorum; pending-- {
		if <-out == nil {
			ok++
		}
	}
	if ok < f.quorum {
		return errNotAcquired
	}
	return nil
}

func (f *pipeFloor) lock(context.Context, string) (any, error) { return nil, f.fanOut() }
func (f *pipeFloor) unlock(context.Context, any) error         { return f.fanOut() }
func (*pipeFloor) close(context.Context) error                 { return nil }

// ---- the local mutex (contention): a sync.Mutex in the process, with the
// same critical section as the libraries' (benchkit.Contend's hold). No
// distributed lock can hand over faster than it, so its rate and wait are
// the ceiling of the contention scenarios, and a library's cycle time beyond
// the mutex's is what its handoff costs.

type mutexCeiling struct{ mu sync.Mutex }

func openMutex([]*redis.Client, *scenario) (locker, error) { return &mutexCeiling{}, nil }

// lock ignores ctx: every holder releases after the hold, so a waiter
// blocked at the end of a slice gets the lock within goroutines × hold.
func (m *mutexCeiling) lock(context.Context, string) (any, error) {
	m.mu.Lock()
	return nil, nil
}

func (m *mutexCeiling) unlock(context.Context, any) error {
	m.mu.Unlock()
	return nil
}

func (*mutexCeiling) close(context.Context) error { return nil }

// ---- the batched minimal deadline lock (many keys): min-deadline's
// scripts, each node's sent as the pipelined floor sends its PINGs (every
// call waiting for a node goes out in that node's next pipeline). What a
// lock with the property would reach with perfect batching and nothing
// else: the scripts' own cost on the nodes, one pipeline per node per
// round.

type batchedScripts struct {
	nodes  []*scriptNode
	skew   []int64
	quorum int
}

// scriptNode batches the script calls of one node.
type scriptNode struct {
	c  *redis.Client
	mu sync.Mutex
	// waiting are the calls not yet sent; sending is true while a sender
	// goroutine runs. Both guarded by mu.
	waiting []scriptCall
	sending bool
	rounds  int // pipelines sent, guarded by mu: the tests see the batching
}

// scriptCall is one call of a script on a node and where its answer goes
// (whether the script returned 1).
type scriptCall struct {
	run func(p redis.Pipeliner) *redis.Cmd
	out chan<- bool
}

func openBatchedScripts(clients []*redis.Client, sc *scenario) (locker, error) {
	m, err := openMinimal(deadlines)(clients, sc)
	if err != nil {
		return nil, err
	}
	b := &batchedScripts{quorum: len(clients)/2 + 1, skew: m.(*minimalLocker).skew}
	for _, c := range clients {
		// A pipeline sends EVALSHA alone, with no fallback to EVAL.
		for _, s := range []*redis.Script{minDeadlineAcquireScript, minDeadlineReleaseScript} {
			if err := s.Load(context.Background(), c).Err(); err != nil {
				return nil, err
			}
		}
		b.nodes = append(b.nodes, &scriptNode{c: c})
	}
	return b, nil
}

func (n *scriptNode) call(c scriptCall) {
	n.mu.Lock()
	n.waiting = append(n.waiting, c)
	start := !n.sending
	n.sending = true
	n.mu.Unlock()
	if start {
		go n.send()
	}
}

func (n *scriptNode) send() {
	var batch []scriptCall
	for {
		n.mu.Lock()
		batch, n.waiting = n.waiting, batch[:0]
		if len(batch) == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		n.rounds++
		n.mu.Unlock()
		p := n.c.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i, c := range batch {
			cmds[i] = c.run(p)
		}
		_, _ = p.Exec(context.Background())
		for i, c := range batch {
			v, err := cmds[i].Int()
			c.out <- err == nil && v == 1
		}
		clear(batch)
	}
}

// fanOut queues run's call on every node and returns once a quorum has
// answered 1.
func (b *batchedScripts) fanOut(run func(i int, p redis.Pipeliner) *redis.Cmd) bool {
	out := make(chan bool, len(b.nodes))
	for i, n := range b.nodes {
		n.call(scriptCall{run: func(p redis.Pipeliner) *redis.Cmd { return run(i, p) }, out: out})
	}
	ok := 0
	for pending := len(b.nodes); pending > 0 && ok < b.quorum && ok+pending >= b.quorum; pending-- {
		if <-out {
			ok++
		}
	}
	return ok >= b.quorum
}

func (b *batchedScripts) lock(ctx context.Context, key string) (any, error) {
	l := &minimalLock{key: key, token: rand.Text(), deadline: make([]int64, len(b.nodes))}
	sent := time.Now().Add(minDeadlineWindow).UnixMilli()
	for i := range b.nodes {
		l.deadline[i] = sent + b.skew[i]
	}
	keys := []string{key, refusalKey(key, l.token)}
	if !b.fanOut(func(i int, p redis.Pipeliner) *redis.Cmd {
		return minDeadlineAcquireScript.EvalSha(ctx, p, keys, l.token, ttl.Milliseconds(), l.deadline[i])
	}) {
		return nil, errNotAcquired
	}
	return l, nil
}

func (b *batchedScripts) unlock(ctx context.Context, h any) error {
	l := h.(*minimalLock)
	keys := []string{l.key, refusalKey(l.key, l.token)}
	if !b.fanOut(func(i int, p redis.Pipeliner) *redis.Cmd {
		return minDeadlineReleaseScript.EvalSha(ctx, p, keys, l.token, l.deadline[i])
	}) {
		return errNotReleased
	}
	return nil
}

func (*batchedScripts) close(context.Context) error { return nil }
