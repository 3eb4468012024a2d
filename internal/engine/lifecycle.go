package engine

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Life counts the work in progress — public calls, Do calls, node
// calls, parked delete retries — so that Close can wait for it, and keeps
// the leases that Close ends and the deletes it may give up on.
type Life struct {
	mu     sync.Mutex // lock order: a leaf, taken under any other (docs/internals.md)
	active int        // public calls in progress plus node jobs and their retries
	calls  int        // public calls in progress (BeginCall), counted in active too
	closed bool       // set by Close: begin fails from then on
	// Closing is closed by Close, wakes Acquire's retry wait and idle workers.
	Closing chan struct{}
	idle    chan struct{} // closed when active drops to 0 after Close
	callsIn chan struct{} // closed when calls drops to 0 after Close
	// abandon is closed when Close gave up on the background work: parked
	// deletes then give up at their next try.
	abandon chan struct{}
	// leases are the KeepAlive renewals running: Close ends them (lease.go).
	leases map[any]struct{}
	// deletes are the deletes not yet answered: queued, on a try or
	// parked for the next (with the timer of its next try). Close hurries
	// the parked ones, and reports all of them when it gives up.
	deletes map[*job]*time.Timer
}

func (l *Life) init() {
	l.Closing = make(chan struct{})
	l.abandon = make(chan struct{})
	l.leases = make(map[any]struct{})
	l.deletes = make(map[*job]*time.Timer)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// BeginCall registers a public call, or reports ErrClosed; EndCall
// unregisters it. Everything the call starts, including a rollback after
// it failed, is covered by it, so Close cannot return between a failed
// attempt and its rollback.
func (l *Life) BeginCall() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.active++
	l.calls++
	return nil
}

// BeginRelease registers a Release that sends, as BeginCall does. It is
// never refused: Close does not take a Lock from its holder, so the
// holder's Release, during Close or after, must still reach the nodes.
func (l *Life) BeginRelease() {
	l.mu.Lock()
	l.active++
	l.calls++
	l.mu.Unlock()
}

// EndCall unregisters a public call.
func (l *Life) EndCall() {
	l.mu.Lock()
	l.calls--
	if l.calls == 0 && l.callsIn != nil {
		close(l.callsIn)
		l.callsIn = nil
	}
	l.mu.Unlock()
	l.End()
}

// Add registers k node jobs; only called while a public call is registered
// or by a job that is still registered.
func (l *Life) Add(k int) {
	l.mu.Lock()
	l.active += k
	l.mu.Unlock()
}

// End unregisters one node job.
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

// CallsDone returns a channel closed once no public call runs; after
// shut. Node jobs may still run then.
func (l *Life) CallsDone() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == 0 {
		return closedChan
	}
	if l.callsIn == nil {
		l.callsIn = make(chan struct{})
	}
	return l.callsIn
}

// Abandoned is a delete that Close gave up on: the node did not answer
// it, and the key it targets stays there until its TTL.
type Abandoned struct {
	Key   string // the first key of the delete's op
	Node  int
	Tries int // the tries sent so far
	// Ctx is the context the delete's round was launched with, for its
	// values (the hooks'): it may have ended long before.
	Ctx context.Context
}

// GiveUp makes parked deletes stop at their next try, and returns the
// deletes not yet answered (queued, on a try or parked), by node and key:
// one per lock and node, since a lock's later delete covers its earlier
// ones there.
func (l *Life) GiveUp() []Abandoned {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.abandon:
	default:
		close(l.abandon)
	}
	type lane struct {
		seq  *Lanes
		node int
	}
	seen := make(map[lane]bool, len(l.deletes))
	out := make([]Abandoned, 0, len(l.deletes))
	for j := range l.deletes {
		if seen[lane{j.r.seq, j.node}] {
			continue
		}
		seen[lane{j.r.seq, j.node}] = true
		out = append(out, Abandoned{Key: j.r.spec.Op.Keys[0], Node: j.node, Tries: int(j.tries.Load()), Ctx: j.r.base})
	}
	slices.SortFunc(out, func(a, b Abandoned) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// track keeps delete j, queued, for GiveUp's report.
func (l *Life) track(j *job) {
	l.mu.Lock()
	l.deletes[j] = nil
	l.mu.Unlock()
}

// park keeps delete j, parked until next fires, for Hurry and GiveUp.
// Called with the lock's Lanes.mu held, which next's function takes: it
// cannot have run yet.
func (l *Life) park(j *job, next *time.Timer) {
	l.mu.Lock()
	l.deletes[j] = next
	l.mu.Unlock()
}

// Hurry sends at once the deletes parked for their next try, so that
// Close's wait gives each a try whatever its backoff.
func (p *Set) Hurry() {
	var now []*job
	p.Life.mu.Lock()
	for j, next := range p.Life.deletes {
		if next != nil && next.Stop() {
			p.Life.deletes[j] = nil
			now = append(now, j)
		}
	}
	p.Life.mu.Unlock()
	for _, j := range now {
		j.r.seq.resume(p, j)
	}
}

// untrack forgets j, a delete that got its answer, was given up, or was
// left to go-redis while a job of its own makes the next try; a write,
// which is never tracked, costs nothing.
func (l *Life) untrack(j *job) {
	if j.r.spec.Effect != Delete {
		return
	}
	l.mu.Lock()
	delete(l.deletes, j)
	l.mu.Unlock()
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
