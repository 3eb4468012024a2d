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

// round is one operation sent to the nodes: the jobs, the channel their
// replies arrive on, and the deadline the caller waits for. One allocation
// serves the whole round, and the last job out releases the timer.
type round struct {
	ctx    context.Context // the caller's deadline; writes run under it
	cancel context.CancelFunc
	base   context.Context // without cancel; a delete's own deadline derives from it
	call   time.Duration   // a delete's own deadline, from when it is sent
	kind   opKind
	op     nodeOp
	users  atomic.Int32
	out    chan reply
	jobs   []job
}

func (r *round) leave() {
	if r.users.Add(-1) == 0 {
		r.cancel()
	}
}

// job is one round's operation on one node.
type job struct {
	r      *round
	node   int
	waited bool // queued behind an earlier job of the lock
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

// push queues j on its node and hands the node to a worker if it is idle.
func (s *sequencer) push(p *nodePool, j *job) {
	s.mu.Lock()
	if s.running[j.node] {
		j.waited = true
		s.queues[j.node] = append(s.queues[j.node], j)
		s.mu.Unlock()
		return
	}
	s.running[j.node] = true
	s.mu.Unlock()
	p.work(task{s: s, j: j})
}

// drain runs j, then whatever was queued for its node meanwhile.
func (s *sequencer) drain(p *nodePool, j *job) {
	i := j.node
	superseded := false
	for {
		j.run(p.nodes[i], superseded)
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
		superseded = j.r.kind == opDelete && hasDelete(s.queues[i])
		s.mu.Unlock()
	}
}

func hasDelete(q []*job) bool {
	for _, j := range q {
		if j.r.kind == opDelete {
			return true
		}
	}
	return false
}

// run sends j to n, unless it is obsolete, and reports the reply.
func (j *job) run(n *node, superseded bool) {
	r := j.r
	var rep reply
	switch {
	case r.kind == opWrite && r.ctx.Err() != nil:
		rep = reply{err: errNotSent}
	case superseded:
		rep = reply{err: errSuperseded}
	case r.kind == opDelete && j.waited:
		ctx, cancel := context.WithTimeout(r.base, r.call)
		rep = n.call(ctx, &r.op)
		cancel()
	default:
		rep = n.call(r.ctx, &r.op)
	}
	rep.node = n.index
	r.out <- rep
	r.leave()
}

// launch queues op of the given kind on the nodes (every node, or those
// for which only is true), behind the lock's previous operations there, and
// returns the round: its replies arrive on a buffered channel (nobody has to
// read them), and its context ends timeout from now. Calls run under
// context.WithoutCancel(ctx): work already sent is never abandoned because
// the caller went away, and a reply that comes late is simply not counted by
// the reader. A delete's call has its own deadline, call, which may outlast
// the round: the caller waits for the round only, the delete goes on until
// it has reached the node. launch returns nil when there is no node to send
// to.
//
// launch must be called between begin and end.
func (p *nodePool) launch(ctx context.Context, seq *sequencer, kind opKind, timeout, call time.Duration, op nodeOp, only []bool) *round {
	n := len(p.nodes)
	if only != nil {
		n = 0
		for _, ok := range only {
			if ok {
				n++
			}
		}
		if n == 0 {
			return nil
		}
	}
	base := ctx
	if ctx.Done() != nil {
		base = context.WithoutCancel(ctx)
	}
	if kind == opDelete && call > timeout {
		// The deletes live longer than the caller waits (fanOut keeps the
		// shorter wait itself): the round's deadline is theirs.
		timeout = call
	}
	r := &round{base: base, call: call, kind: kind, op: op, out: make(chan reply, n), jobs: make([]job, 0, n)}
	r.ctx, r.cancel = context.WithTimeout(base, timeout)
	r.users.Store(int32(n))
	p.add(n)
	for i := range p.nodes {
		if only == nil || only[i] {
			r.jobs = append(r.jobs, job{r: r, node: i})
			seq.push(p, &r.jobs[len(r.jobs)-1])
		}
	}
	return r
}

// tally is the state of one round of replies.
type tally struct {
	replies []reply // by node index; unanswered nodes hold statusUnknown and errNotAwaited or ErrNoReply
	ok      int
	quorum  int
	buf     [7]reply
}

func newTally(n, quorum int) *tally {
	t := &tally{quorum: quorum}
	if n <= len(t.buf) {
		t.replies = t.buf[:n]
	} else {
		t.replies = make([]reply, n)
	}
	for i := range t.replies {
		t.replies[i] = reply{node: i, err: errNotAwaited}
	}
	return t
}

// unrefused marks the nodes that did not refuse: where a write of ours may
// have landed, and so where a rollback must go.
func (t *tally) unrefused() []bool {
	only := make([]bool, len(t.replies))
	for i, r := range t.replies {
		only[i] = r.status != statusRefused
	}
	return only
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
	r := p.launch(ctx, seq, kind, timeout, call, op, nil)
	roundOver := r.ctx.Done()
	var waitOver <-chan time.Time
	if kind == opDelete && call > timeout {
		// The calls live longer than the caller waits.
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		roundOver, waitOver = nil, timer.C
	}
	n := len(p.nodes)
	t := newTally(n, p.quorum)
	var done <-chan struct{}
	if waitCtx {
		done = ctx.Done()
	}
	pending := n
	for pending > 0 && t.ok < t.quorum && t.ok+pending >= t.quorum {
		select {
		case rep := <-r.out:
			t.add(rep)
			pending--
		case <-roundOver:
			pending = t.drain(r.out, pending)
		case <-waitOver:
			pending = t.drain(r.out, pending)
		case <-done:
			return t, ctx.Err()
		}
	}
	return t, nil
}

// drain takes the replies that have arrived when the wait is over; the nodes
// still silent are unknown. The round's context also ends when its last
// job is done, so what has arrived may be everything.
func (t *tally) drain(out <-chan reply, pending int) int {
	for ; pending > 0; pending-- {
		select {
		case rep := <-out:
			t.add(rep)
		default:
			t.timeOut()
			return 0
		}
	}
	return 0
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
