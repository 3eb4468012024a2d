package redlock

import "sync"

// lifecycle counts the work in progress — public calls, node calls, parked
// delete retries — so that Close can wait for all of it.
type lifecycle struct {
	mu      sync.Mutex    // lock order: a leaf, taken under any other (docs/internals.md)
	active  int           // public calls in progress plus node jobs and their retries
	closed  bool          // set by Close: begin fails from then on
	closing chan struct{} // closed by Close, wakes Acquire's retry wait and idle workers
	idle    chan struct{} // closed when active drops to 0 after Close
	// abandon is closed when Close's context ended before the work did:
	// parked deletes then give up at their next try.
	abandon chan struct{}
}

func (l *lifecycle) init() {
	l.closing = make(chan struct{})
	l.abandon = make(chan struct{})
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

// close refuses new calls and returns a channel closed once nothing runs.
func (l *lifecycle) close() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.closing)
	}
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
