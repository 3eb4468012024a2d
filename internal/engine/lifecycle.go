package engine

import (
	"sync"
)

// Life counts the work in progress — public calls, Do calls, node
// calls, parked delete retries — so that Close can wait for all of it, and
// keeps the leases that Close ends.
type Life struct {
	mu      sync.Mutex    // lock order: a leaf, taken under any other (docs/internals.md)
	active  int           // public calls in progress plus node jobs and their retries
	closed  bool          // set by Close: begin fails from then on
	Closing chan struct{} // closed by Close, wakes Acquire's retry wait and idle workers
	idle    chan struct{} // closed when active drops to 0 after Close
	// abandon is closed when Close's context ended before the work did:
	// parked deletes then give up at their next try.
	abandon chan struct{}
	// leases are the KeepAlive renewals running: Close ends them (lease.go).
	leases map[any]struct{}
}

func (l *Life) init() {
	l.Closing = make(chan struct{})
	l.abandon = make(chan struct{})
	l.leases = make(map[any]struct{})
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Begin registers a public call, or reports ErrClosed. Everything the call
// starts, including a rollback after it failed, is covered by it, so Close
// cannot return between a failed attempt and its rollback.
func (l *Life) Begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.active++
	return nil
}

// BeginRelease registers a Release that sends. It is never refused: Close
// does not take a Lock from its holder, so the holder's Release, during
// Close or after, must still reach the nodes.
func (l *Life) BeginRelease() {
	l.Add(1)
}

// add registers k node jobs; only called while a public call is registered
// or by a job that is still registered.
func (l *Life) Add(k int) {
	l.mu.Lock()
	l.active += k
	l.mu.Unlock()
}

// End unregisters one public call or node job.
func (l *Life) End() {
	l.mu.Lock()
	l.active--
	if l.active == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
	l.mu.Unlock()
}

// Shut refuses new calls and returns the leases running, on the first
// call.
func (l *Life) Shut() []any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.Closing)
	leases := make([]any, 0, len(l.leases))
	for ls := range l.leases {
		leases = append(leases, ls)
	}
	return leases
}

// Idle returns a channel closed once nothing runs; after shut.
func (l *Life) Idle() <-chan struct{} {
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

// GiveUp makes parked deletes stop at their next try.
func (l *Life) GiveUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.abandon:
	default:
		close(l.abandon)
	}
}

func (l *Life) abandoned() bool {
	select {
	case <-l.abandon:
		return true
	default:
		return false
	}
}

// AddLease records a lease that starts renewing, unless Close has begun.
func (l *Life) AddLease(ls any) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.leases[ls] = struct{}{}
	return true
}

// DropLease forgets a lease that stopped renewing.
func (l *Life) DropLease(ls any) {
	l.mu.Lock()
	delete(l.leases, ls)
	l.mu.Unlock()
}

// IsClosed reports whether Close has begun.
func (l *Life) IsClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
