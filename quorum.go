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

// sequencer orders one lock's operations per node: an operation on a node
// starts only after the previous one on that node has returned. Without it a
// rollback or release could overtake a slow acquire on the same node, and the
// late SET would leave our key behind for a whole TTL.
type sequencer struct {
	mu    sync.Mutex
	tails []chan struct{}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newSequencer(n int) *sequencer {
	s := &sequencer{tails: make([]chan struct{}, n)}
	for i := range s.tails {
		s.tails[i] = closedChan
	}
	return s
}

// next returns the channel to wait for before running on node i, and the one
// to close when done.
func (s *sequencer) next(i int) (prev <-chan struct{}, done chan struct{}) {
	done = make(chan struct{})
	s.mu.Lock()
	prev, s.tails[i] = s.tails[i], done
	s.mu.Unlock()
	return prev, done
}

// launch starts op on every node, each in its own goroutine and behind the
// lock's previous operation on that node, and returns the channel on which the
// replies arrive (buffered: nobody has to read them). Each call runs under
// context.WithoutCancel(ctx) with its own deadline of timeout: work already
// sent is never abandoned because the caller went away, and a node whose
// reply is late is simply counted as unknown by the reader.
//
// launch must be called between begin and end.
func (p *nodePool) launch(ctx context.Context, seq *sequencer, timeout time.Duration, op nodeOp) (<-chan reply, context.Context) {
	p.add(len(p.nodes))
	base := context.WithoutCancel(ctx)
	// One deadline for the round serves every node whose turn has come;
	// a node still busy with our previous operation gets its own when it
	// starts. The last goroutine out releases the round's timer.
	round, cancel := context.WithTimeout(base, timeout)
	var users atomic.Int32
	users.Store(int32(len(p.nodes)))
	leave := func() {
		if users.Add(-1) == 0 {
			cancel()
		}
	}
	out := make(chan reply, len(p.nodes))
	for i, n := range p.nodes {
		prev, done := seq.next(i)
		go func() {
			defer p.end()
			defer close(done)
			callCtx := round
			select {
			case <-prev:
			default:
				<-prev
				var cancelCall context.CancelFunc
				callCtx, cancelCall = context.WithTimeout(base, timeout)
				defer cancelCall()
			}
			out <- n.call(callCtx, op)
			leave()
		}()
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
func (p *nodePool) fanOut(ctx context.Context, seq *sequencer, timeout time.Duration, op nodeOp, waitCtx bool) (*tally, error) {
	replies, round := p.launch(ctx, seq, timeout, op)
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
