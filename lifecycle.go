package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// lifecycle counts the work in progress — public calls, Do calls, node
// calls, parked delete retries — so that Close can wait for all of it, and
// keeps the leases that Close ends.
type lifecycle struct {
	mu      sync.Mutex    // lock order: a leaf, taken under any other (docs/internals.md)
	active  int           // public calls in progress plus node jobs and their retries
	closed  bool          // set by Close: begin fails from then on
	closing chan struct{} // closed by Close, wakes Acquire's retry wait and idle workers
	idle    chan struct{} // closed when active drops to 0 after Close
	// abandon is closed when Close's context ended before the work did:
	// parked deletes then give up at their next try.
	abandon chan struct{}
	// leases are the KeepAlive renewals running: Close ends them (lease.go).
	leases map[*lease]struct{}
}

func (l *lifecycle) init() {
	l.closing = make(chan struct{})
	l.abandon = make(chan struct{})
	l.leases = make(map[*lease]struct{})
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
// does not take a Lock from its holder, so the holder's Release, during
// Close or after, must still reach the nodes.
func (l *lifecycle) beginRelease() {
	l.add(1)
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

// shut refuses new calls and returns the leases running, on the first
// call.
func (l *lifecycle) shut() []*lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.closing)
	leases := make([]*lease, 0, len(l.leases))
	for ls := range l.leases {
		leases = append(leases, ls)
	}
	return leases
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

// addLease records a lease that starts renewing, unless Close has begun.
func (l *lifecycle) addLease(ls *lease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.leases[ls] = struct{}{}
	return true
}

// dropLease forgets a lease that stopped renewing.
func (l *lifecycle) dropLease(ls *lease) {
	l.mu.Lock()
	delete(l.leases, ls)
	l.mu.Unlock()
}

// isClosed reports whether Close has begun.
func (l *lifecycle) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// keep returns l, which Acquire got after err, unless Close began
// meanwhile: then l is released again (given back, for an owner's Lock
// re-entered) and the Acquire fails with ErrClosed, as later calls do.
func (c *Client) keep(l *Lock, err error) (*Lock, error) {
	if err != nil || !c.nodes.life.isClosed() {
		return l, err
	}
	closed := fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), ErrClosed)
	return nil, errors.Join(closed, l.Release(context.Background()))
}
