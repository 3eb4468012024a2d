package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// lifecycle counts the work in progress — public calls, Do calls, node
// calls, parked delete retries — so that Close can wait for all of it, and
// keeps the Locks that Close must release.
type lifecycle struct {
	mu      sync.Mutex    // lock order: a leaf, taken under any other (docs/internals.md)
	active  int           // public calls in progress plus node jobs and their retries
	closed  bool          // set by Close: begin fails from then on
	closing chan struct{} // closed by Close, wakes Acquire's retry wait and idle workers
	idle    chan struct{} // closed when active drops to 0 after Close
	// abandon is closed when Close's context ended before the work did:
	// parked deletes then give up at their next try.
	abandon chan struct{}
	// held are the Locks that Acquire returned and no Release has sent
	// for, each with the number of Do calls running their function under
	// it. Close releases them: at once those in no Do, the others when
	// their last Do returns.
	held map[*Lock]int
}

func (l *lifecycle) init() {
	l.closing = make(chan struct{})
	l.abandon = make(chan struct{})
	l.held = make(map[*Lock]int)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// begin registers a public call, or reports ErrClosed. Everything the call
// starts, including a rollback after it failed, is covered by it, so Close
// cannot return between a failed attempt and its rollback.
func (l *lifecycle) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.active++
	return nil
}

// beginRelease registers a Release that sends. It is never refused: Close
// releases the Locks still held through Release, and a Release of the
// holder's that runs meanwhile, or a Do's once Close's wait is over, must
// still reach the nodes.
func (l *lifecycle) beginRelease() {
	l.add(1)
}

// endRelease unregisters a Release that sent, and forgets its Lock.
func (l *lifecycle) endRelease(lk *Lock) {
	l.mu.Lock()
	delete(l.held, lk)
	l.mu.Unlock()
	l.end()
}

// add registers k node jobs; only called while a public call is registered
// or by a job that is still registered.
func (l *lifecycle) add(k int) {
	l.mu.Lock()
	l.active += k
	l.mu.Unlock()
}

// end unregisters one public call or node job.
func (l *lifecycle) end() {
	l.mu.Lock()
	l.active--
	if l.active == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
	l.mu.Unlock()
}

// heldLock is a Lock that Close found held, and whether a Do runs under it.
type heldLock struct {
	l    *Lock
	inDo bool
}

// shut refuses new calls and returns the Locks held, on the first call.
func (l *lifecycle) shut() []heldLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.closing)
	held := make([]heldLock, 0, len(l.held))
	for lk, dos := range l.held {
		held = append(held, heldLock{l: lk, inDo: dos > 0})
	}
	return held
}

// idleChan returns a channel closed once nothing runs; after shut.
func (l *lifecycle) idleChan() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active == 0 {
		return closedChan
	}
	if l.idle == nil {
		l.idle = make(chan struct{})
	}
	return l.idle
}

// giveUp makes parked deletes stop at their next try.
func (l *lifecycle) giveUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.abandon:
	default:
		close(l.abandon)
	}
}

func (l *lifecycle) abandoned() bool {
	select {
	case <-l.abandon:
		return true
	default:
		return false
	}
}

// pruneSample is how many other held Locks each new one has looked at, to
// forget those that can no longer hold their key (Client.prune).
const pruneSample = 2

// hold records lk, which an Acquire is about to return, as held, and
// reports whether the Acquire may return it: not once Close has begun
// (Close found an owner's Lock that was re-entered meanwhile already, and
// releases it). It also returns a few other held Locks, picked at random,
// for the caller to prune.
func (l *lifecycle) hold(lk *Lock) (ok bool, sample [pruneSample]*Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, sample
	}
	n, seen := 0, 0
	for other, dos := range l.held { // map order: a random start
		if seen++; seen > 2*len(sample) || n == len(sample) {
			break
		}
		if dos == 0 && other != lk {
			sample[n] = other
			n++
		}
	}
	if _, ok := l.held[lk]; !ok {
		l.held[lk] = 0
	}
	return true, sample
}

// forget drops lk, unless a Do runs under it.
func (l *lifecycle) forget(lk *Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if dos, ok := l.held[lk]; ok && dos == 0 {
		delete(l.held, lk)
	}
}

// enterDo registers a Do that is about to run its function under lk, a
// Lock held, unless Close has begun (then Close releases lk).
func (l *lifecycle) enterDo(lk *Lock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.active++
	l.held[lk]++
	return true
}

// leaveDo notes that a Do's function returned, and reports whether the Do
// must release all of lk's holds: Close has begun and left lk to its Do
// calls, of which this was the last. The Do stays registered until it
// returns (end).
func (l *lifecycle) leaveDo(lk *Lock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	dos, ok := l.held[lk]
	if !ok {
		return l.closed
	}
	l.held[lk] = dos - 1
	return l.closed && dos == 1
}

// keep records l, which Acquire is about to return after err, as held, for
// Close to release. An Acquire that ends once Close has begun gives its hold
// back instead (which releases l on the nodes unless its owner holds it
// otherwise) and fails with ErrClosed.
func (c *Client) keep(l *Lock, err error) (*Lock, error) {
	if err != nil {
		return l, err
	}
	ok, sample := c.nodes.life.hold(l)
	for _, other := range sample {
		if other != nil {
			c.prune(other)
		}
	}
	if ok {
		return l, nil
	}
	closed := fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), ErrClosed)
	return nil, errors.Join(closed, l.Release(context.Background()))
}

// prune forgets l, so that Close does not release it, when l can no longer
// hold its key: its validity is over, and every key its writes set has
// expired with nothing of it in flight. A Lock its holder never released
// then costs the Client nothing for long.
func (c *Client) prune(l *Lock) {
	if c.gone(l) {
		c.nodes.life.forget(l)
	}
}

// gone reports whether l can no longer hold its key, nor be extended.
func (c *Client) gone(l *Lock) bool {
	return !c.cfg.clock.Now().Before(l.Until()) && l.seq.settled(time.Now())
}

// maxCloseReleases bounds the releases that Close runs at once.
const maxCloseReleases = 64

// releaseHeld ends the leases of the Locks that Close found held (cause
// ErrClosed) and releases those in no Do, at most maxCloseReleases at a
// time, with ctx (Release ignores its cancellation); Do calls release their
// own Lock when their function returns. Once Close has given up waiting,
// the releases not started yet are not.
func (c *Client) releaseHeld(ctx context.Context, held []heldLock) {
	var todo []*Lock
	for _, h := range held {
		h.l.closeLease(ErrClosed)
		if !h.inDo && !c.gone(h.l) {
			todo = append(todo, h.l)
		}
	}
	workers := min(len(todo), maxCloseReleases)
	c.nodes.life.add(workers)
	next := make(chan *Lock, len(todo))
	for _, l := range todo {
		next <- l
	}
	close(next)
	for range workers {
		go func() {
			defer c.nodes.life.end()
			for l := range next {
				if !c.nodes.life.abandoned() {
					_ = l.releaseAll(ctx)
				}
			}
		}()
	}
}

// releaseAll releases l on the nodes whatever its holds, for Close: an
// owner's Lock re-entered by several Acquire and Do calls is released once,
// and their later Releases report that outcome.
func (l *Lock) releaseAll(ctx context.Context) error {
	l.mu.Lock()
	l.holds = 1
	l.mu.Unlock()
	return l.Release(ctx)
}
