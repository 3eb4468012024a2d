package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// status is what one node's reply tells us about our key.
type status uint8

const (
	// statusUnknown: no reply yet, no reply in time, or an error. The command
	// may or may not have run; it never counts as success.
	statusUnknown status = iota
	statusOK             // the node confirmed the operation
	statusRefused        // the node definitely did not do it (see err)
)

// reply is one node's answer to one operation.
type reply struct {
	node   int
	status status
	val    int64 // operation-specific: a fencing counter
	err    error // why it is not OK: a per-node sentinel or the client's error
}

func (r reply) transportErr() error {
	if r.status == statusUnknown {
		return r.err
	}
	return nil
}

// nodeOp runs one script on one node. It must honour ctx where go-redis does;
// the fan-out never relies on it to return on time.
type nodeOp func(ctx context.Context, n *node) reply

// opKind tells the per-node queue what an operation is for, and so when it
// may be dropped.
type opKind uint8

const (
	// opWrite sets or refreshes our key (acquire, extend, fence commit).
	// Its only use is to be counted by its round: once the round's deadline
	// has passed it is not sent, since it could only leave a key behind.
	opWrite opKind = iota
	// opDelete removes our key (release, rollback). It must reach the node,
	// unless a later delete of the same lock is queued there: that one
	// leaves the node in the same state.
	opDelete
)

// job is one operation of one round, for one node.
type job struct {
	kind   opKind
	op     nodeOp
	round  context.Context // the round's deadline; writes run under it
	base   context.Context // without cancel; a delete's own deadline derives from it
	call   time.Duration   // a delete's own deadline, from when it is sent
	waited bool            // queued behind an earlier job of the lock
	ownCtx bool            // a delete that cannot use the round's deadline
	out    chan<- reply
	leave  func()
}

// sequencer runs one lock's operations on each node one at a time, in order.
// Without it a rollback or release could overtake a slow SET of the same lock
// on the same node, and the late SET would leave our key for a whole TTL; or
// a rollback could delete the key a later attempt has just counted.
//
// A node that stalls holds its current call until go-redis gives up (its
// ReadTimeout unless the client bounds reads by the context). The jobs queued
// meanwhile are mostly obsolete by then: writes whose round is over are
// dropped, and of several queued deletes only the last runs, so a stalled
// node costs each lock one call at a time, not one per retry.
type sequencer struct {
	mu      sync.Mutex
	queues  [][]*job
	running []bool
}

func newSequencer(n int) *sequencer {
	return &sequencer{queues: make([][]*job, n), running: make([]bool, n)}
}

// push queues j for node i and starts the node's worker if it is idle.
func (s *sequencer) push(p *nodePool, i int, j *job) {
	s.mu.Lock()
	if s.running[i] {
		j.waited = true
		s.queues[i] = append(s.queues[i], j)
		s.mu.Unlock()
		return
	}
	s.running[i] = true
	s.mu.Unlock()
	go s.drain(p, i, j)
}

// drain runs j, then whatever was queued for node i meanwhile.
func (s *sequencer) drain(p *nodePool, i int, j *job) {
	n := p.nodes[i]
	superseded := false
	for {
		j.run(n, superseded)
		p.end()
		s.mu.Lock()
		q := s.queues[i]
		if len(q) == 0 {
			s.running[i] = false
			s.mu.Unlock()
			return
		}
		j, q[0] = q[0], nil
		s.queues[i] = q[1:]
		superseded = j.kind == opDelete && hasDelete(s.queues[i])
		s.mu.Unlock()
	}
}

func hasDelete(q []*job) bool {
	for _, j := range q {
		if j.kind == opDelete {
			return true
		}
	}
	return false
}

// run sends j to n, unless it is obsolete, and reports the reply.
func (j *job) run(n *node, superseded bool) {
	var r reply
	switch {
	case j.kind == opWrite && j.round.Err() != nil:
		r = reply{err: errNotSent}
	case superseded:
		r = reply{err: errSuperseded}
	case j.kind == opDelete && (j.waited || j.ownCtx):
		ctx, cancel := context.WithTimeout(j.base, j.call)
		r = n.call(ctx, j.op)
		cancel()
	default:
		r = n.call(j.round, j.op)
	}
	r.node = n.index
	j.out <- r
	j.leave()
}

// launch queues op of the given kind on every node, behind the lock's
// previous operations there, and returns the channel on which the replies
// arrive (buffered: nobody has to read them) and the round's context, whose
// deadline is timeout from now. Calls run under context.WithoutCancel(ctx):
// work already sent is never abandoned because the caller went away, and a
// reply that comes late is simply not counted by the reader. A delete's call
// has its own deadline, call, which may outlast the round: the caller waits
// for the round only, the delete goes on until it has reached the node.
//
// launch must be called between begin and end.
func (p *nodePool) launch(ctx context.Context, seq *sequencer, kind opKind, timeout, call time.Duration, op nodeOp) (<-chan reply, context.Context) {
	p.add(len(p.nodes))
	base := context.WithoutCancel(ctx)
	// One deadline serves the whole round; the last job out releases its
	// timer.
	round, cancel := context.WithTimeout(base, timeout)
	var users atomic.Int32
	users.Store(int32(len(p.nodes)))
	leave := func() {
		if users.Add(-1) == 0 {
			cancel()
		}
	}
	out := make(chan reply, len(p.nodes))
	for i := range p.nodes {
		seq.push(p, i, &job{kind: kind, op: op, round: round, base: base, call: call, ownCtx: call != timeout, out: out, leave: leave})
	}
	return out, round
}

// tally is the state of one round of replies.
type tally struct {
	replies []reply // by node index; unanswered nodes hold statusUnknown and errNotAwaited or ErrNoReply
	ok      int
	quorum  int
}

func (t *tally) nodeErrors(p *nodePool) []*NodeError {
	var errs []*NodeError
	for i, r := range t.replies {
		if r.status != statusOK {
			errs = append(errs, &NodeError{Node: i, Addr: p.nodes[i].addr, Err: r.err})
		}
	}
	return errs
}

// fanOut runs op on every node and returns as soon as the outcome is decided:
// a quorum confirmed, or so many refused or failed that a quorum is out of
// reach, or the round's deadline passed (the silent nodes count as unknown).
// It returns early with ctx.Err() if ctx ends first; the calls go on in the
// background either way. With waitCtx false, the caller's cancellation is
// ignored while waiting (release must report its real outcome).
func (p *nodePool) fanOut(ctx context.Context, seq *sequencer, kind opKind, timeout, call time.Duration, op nodeOp, waitCtx bool) (*tally, error) {
	replies, round := p.launch(ctx, seq, kind, timeout, call, op)
	n := len(p.nodes)
	t := &tally{replies: make([]reply, n), quorum: p.quorum}
	for i := range t.replies {
		t.replies[i] = reply{node: i, err: errNotAwaited}
	}
	var done <-chan struct{}
	if waitCtx {
		done = ctx.Done()
	}
	pending := n
	for pending > 0 && t.ok < t.quorum && t.ok+pending >= t.quorum {
		select {
		case r := <-replies:
			t.add(r)
			pending--
		case <-round.Done():
			// The deadline passed, or every call returned and the last one
			// released the round: take what has arrived, the rest is unknown.
			for ; pending > 0; pending-- {
				select {
				case r := <-replies:
					t.add(r)
				default:
					t.timeOut()
					return t, nil
				}
			}
		case <-done:
			return t, ctx.Err()
		}
	}
	return t, nil
}

// timeOut marks the nodes that had not answered by the deadline.
func (t *tally) timeOut() {
	for i := range t.replies {
		if t.replies[i].err == errNotAwaited {
			t.replies[i].err = ErrNoReply
		}
	}
}

func (t *tally) add(r reply) {
	t.replies[r.node] = r
	if r.status == statusOK {
		t.ok++
	}
}
