package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Effect tells a node's lane what a call is for, and so when it may be
// dropped, retried or overtaken.
type Effect uint8

const (
	// Write sets or refreshes our key (acquire, extend, restore, fence
	// commit). Its only use is to be counted by its round: once the round's
	// deadline has passed it is not sent, since it could only leave a key
	// behind, and the lane stops waiting for it.
	Write Effect = iota
	// Delete removes our key (release, rollback). It must reach the node:
	// without a definite answer it is tried again, with backoff, until the
	// key would have expired anyway. A later delete of the same lock queued
	// behind it covers it (it deletes the same generations or more), so only
	// the last of several queued deletes is sent.
	Delete
)

// Lanes runs one lock's calls on each node one at a time, in order: its
// lanes. Without it a rollback or release could overtake a slow SET of the
// same lock on the same node, and the late SET would leave our key for a
// whole TTL.
//
// A lane never waits for a write whose round is over. A node that stalls
// holds such a call until go-redis gives up (its ReadTimeout unless the
// client bounds reads by the context); the lane goes on without it, and if
// a delete ran meanwhile and the write may have landed, the delete is sent
// again once the write returns. Values carry a generation, so a stale write
// that lands after a later one of ours changes nothing.
//
// A stalled node costs each lock one call at a time, not one per retry:
// writes whose round is over are dropped, of several queued deletes only the
// last one runs, and a delete waiting for its next try is parked on a timer,
// not on a goroutine.
type Lanes struct {
	mu    sync.Mutex // lock order: after Lock.mu, before roundCtx.mu (docs/internals.md)
	lanes []lane
	// key is the lock's key, boxed once for the command lines of all its
	// rounds (see keyArg).
	key    any
	keyStr string
	// many is the keys of an op over many keys (Op.Many), boxed once for
	// the command lines of the lock's rounds; manyOf is the slice it boxes.
	many   []any
	manyOf []string
}

// keyArg returns k boxed, from the Lanes' cache when it is the lock's
// key, as it always is for a lock's first key.
func (s *Lanes) keyArg(k string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil || s.keyStr != k {
		s.key, s.keyStr = k, k
	}
	return s.key
}

// manyArgs returns keys boxed, from the Lanes' cache when keys is the
// slice it boxed last: a lock over many keys sends the same slice in each
// of its rounds.
func (s *Lanes) manyArgs(keys []string) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.manyOf) != len(keys) || len(keys) == 0 || &s.manyOf[0] != &keys[0] {
		s.many = make([]any, len(keys))
		for i, k := range keys {
			s.many[i] = k
		}
		s.manyOf = keys
	}
	return s.many
}

// lane is one lock's calls to one node.
type lane struct {
	queue   []*job
	busy    bool // a job is on a worker, or a delete is parked for its next try
	current *job // the job on a worker that the lane waits for; nil while parked
	// expireBy is the latest time a key written by one of our writes here
	// may live to: past it a delete has nothing left to remove.
	expireBy time.Time
	// lateBy is the latest deadline, on the node's clock (Unix
	// milliseconds), of the writes queued here (Op.Refusals): until then a
	// copy of one may still land, and a delete leaves a refusal of them.
	lateBy     int64
	lastDelete *round // the newest delete queued here, sent again by a redo
	deletes    uint64 // deletes started here
	// strandedDeletes counts deletes the lane gave up waiting for that
	// go-redis still holds: at most one.
	strandedDeletes int
	// strandedWrites counts the writes the lane went on without that
	// go-redis still holds.
	strandedWrites int
}

// NewLanes makes the Lanes of a lock over n nodes, in one allocation for the
// usual numbers of nodes (up to maxInline). The Lanes and its lanes are
// built once, by packedSequencer; each case only names its array length,
// which Go needs as a constant (TestNewSequencerOneAllocation pins the one
// allocation).
func NewLanes(n int) *Lanes {
	switch n {
	case 1:
		return packedSequencer(func(l *[1]lane) []lane { return l[:] })
	case 2:
		return packedSequencer(func(l *[2]lane) []lane { return l[:] })
	case 3:
		return packedSequencer(func(l *[3]lane) []lane { return l[:] })
	case 4:
		return packedSequencer(func(l *[4]lane) []lane { return l[:] })
	case 5:
		return packedSequencer(func(l *[5]lane) []lane { return l[:] })
	case 6:
		return packedSequencer(func(l *[6]lane) []lane { return l[:] })
	case 7:
		return packedSequencer(func(l *[7]lane) []lane { return l[:] })
	}
	return &Lanes{lanes: make([]lane, n)}
}

// packedSequencer allocates a Lanes together with its lanes, an array
// L that lanes slices.
func packedSequencer[L any](lanes func(*L) []lane) *Lanes {
	x := new(struct {
		s Lanes
		l L
	})
	x.s.lanes = lanes(&x.l)
	return &x.s
}

// job is one round's call on one node, and for a delete its retries.
type job struct {
	r    *round
	node int
	slot int32 // index in r.jobs, sent on r.out
	// first is the reply of the first try, written before slot is sent on
	// r.out and never again.
	first Reply
	// reported is set once the reply went to the round; retries and redos
	// report only to the round's note.
	reported bool
	skip     error        // set when dequeued: the job is obsolete and not sent
	shared   bool         // a delete's first try, started at once: it runs under its round's deadline
	blocking bool         // a write that later jobs wait behind: its round's end unsticks the lane (roundCtx.unstickOnEnd)
	detached bool         // a write the lane no longer waits for
	mark     uint64       // the lane's delete count when it was detached
	tries    atomic.Int32 // deletes: sends so far; read by the deadlines of earlier tries
	retrying bool         // a delete parked for, or on, another try: counted in PendingCleanups
	// inline: the round's caller runs this first try itself (runInline) on a
	// node whose client bounds the call; a delete's then ends at the
	// round's wait, and an unknown outcome is retried as usual.
	inline bool
	// args is the job's own command line, for an op under the late-write
	// rule (Op.Refusals): the round's, with this node's node-clock
	// milliseconds; nil otherwise (the round's is sent). late is a write's
	// deadline there.
	args []any
	late int64
	// deadline is when the round stops waiting for this node: its own
	// (Spec.Nodes) or the round's. A write is not sent after it.
	deadline time.Time
}

// LateBy is the latest deadline, on node i's clock, of the writes queued
// on the lock's lane there (Op.Refusals), 0 when none.
func (s *Lanes) LateBy(i int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lanes[i].lateBy
}

// push queues j on its node's lane and starts it if the lane is idle.
func (s *Lanes) push(p *Set, j *job) {
	s.mu.Lock()
	start := s.enqueue(p, j)
	s.mu.Unlock()
	if start != nil {
		p.work(task{s: s, j: start})
	}
}

// pushInline queues j on its node's lane and, if j is to start now, returns it
// for the caller to run with runInline instead of starting a worker. Another
// job of the lane's that is to start now goes to a worker.
func (s *Lanes) pushInline(p *Set, j *job) *job {
	s.mu.Lock()
	start := s.enqueue(p, j)
	if start == j {
		start.inline = true
		start.shared = false // its own deadline, not the round's
	}
	s.mu.Unlock()
	if start != nil && start != j {
		p.work(task{s: s, j: start})
		return nil
	}
	return start
}

// runInline runs j, which pushInline returned, on the caller's goroutine, and
// hands the lane's next job, if any, to a worker.
func (s *Lanes) runInline(p *Set, j *job) {
	rep := j.send(s, p)
	if next := s.done(p, j, rep); next != nil {
		p.work(task{s: s, j: next})
	}
}

// enqueue adds j to its lane and returns the job to start now, if any: j,
// or the lane's next job when j is queued behind others. Called with s.mu
// held.
func (s *Lanes) enqueue(p *Set, j *job) *job {
	i := j.node
	l := &s.lanes[i]
	if j.r.spec.Effect == Write {
		// A write is never sent after its round's deadline; the key it sets
		// lives ttl from when it lands, plus the nodes' clock drift.
		if exp := j.r.deadline.Add(p.keyLife(j.r.spec.TTL)); exp.After(l.expireBy) {
			l.expireBy = exp
		}
		l.lateBy = max(l.lateBy, j.late)
	} else {
		l.lastDelete = j.r
		p.Life.track(j)
	}
	// A delete that starts at once runs its first try under its round's
	// deadline; one that waited, and every retry, has its own.
	j.shared = j.r.spec.Effect == Delete && !j.reported
	if !l.busy {
		l.busy = true
		s.begin(l, j)
		return j
	}
	if cur := l.current; cur != nil && cur.r.spec.Effect == Write {
		if cur.r.ctx.Err() != nil {
			// The lane does not wait for a write whose round is over: it
			// moves on to its next job, in order. j never overtakes the
			// jobs queued before it (nor the rule that keeps a second
			// delete from being sent while one is stranded).
			s.detach(l, cur)
			if len(l.queue) == 0 {
				s.begin(l, j)
				return j
			}
			j.shared = false
			l.queue = append(l.queue, j)
			return s.dequeue(l)
		}
		if !cur.blocking {
			cur.blocking = true
			cur.r.ctx.unstickOnEnd(cur)
		}
	}
	j.shared = false
	l.queue = append(l.queue, j)
	return nil
}

// Unsettled marks the nodes where a call of the lock is queued, running,
// parked for another try, or still held by go-redis: where something it
// sent may yet land. It returns nil when there is none.
func (s *Lanes) Unsettled() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []bool
	for i := range s.lanes {
		if l := &s.lanes[i]; l.busy || l.strandedWrites > 0 || l.strandedDeletes > 0 {
			if out == nil {
				out = make([]bool, len(s.lanes))
			}
			out[i] = true
		}
	}
	return out
}

// begin makes j the lane's current job.
func (s *Lanes) begin(l *lane, j *job) {
	l.current = j
	if j.r.spec.Effect == Delete {
		l.deletes++
	}
}

// detach stops the lane waiting for a write whose round is over.
func (s *Lanes) detach(l *lane, w *job) {
	l.strandedWrites++
	w.detached = true
	w.mark = l.deletes
	l.current = nil
}

// unstick runs when the round of a write that others wait behind is over:
// the lane moves on without it.
func (s *Lanes) unstick(p *Set, i int, w *job) {
	s.mu.Lock()
	l := &s.lanes[i]
	if l.current != w || len(l.queue) == 0 {
		s.mu.Unlock()
		return
	}
	s.detach(l, w)
	next := s.dequeue(l)
	s.mu.Unlock()
	p.work(task{s: s, j: next})
}

// dequeue takes the lane's next job, marks it obsolete where it is, and
// makes it current. Called with s.mu held and a non-empty queue.
func (s *Lanes) dequeue(l *lane) *job {
	j := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	if j.r.spec.Effect == Delete && hasDelete(l.queue) {
		j.skip = errSuperseded
	}
	s.begin(l, j)
	return j
}

func hasDelete(q []*job) bool {
	for _, j := range q {
		if j.r.spec.Effect == Delete {
			return true
		}
	}
	return false
}

// drain runs j, then the lane's next jobs, for as long as this worker owns
// the lane.
func (s *Lanes) drain(p *Set, j *job) {
	for j != nil {
		rep := j.send(s, p)
		j = s.done(p, j, rep)
	}
}

// done settles j after its call and returns the lane's next job for this
// worker to run, if any.
func (s *Lanes) done(p *Set, j *job, rep Reply) *job {
	n := p.nodes[j.node]
	s.mu.Lock()
	l := &s.lanes[j.node]
	if j.detached {
		// The lane went on without this call. If it is a write, a delete
		// ran since, and the write may have landed after it, delete again.
		// A write that was never sent cannot land: its redo would only
		// supersede the deletes queued before it, and let the writes
		// queued between go out first.
		var redo *job
		if j.r.spec.Effect == Delete {
			l.strandedDeletes--
			p.Life.untrack(j) // its next try, if any, is a job of its own
		} else {
			l.strandedWrites--
		}
		if j.r.spec.Effect == Write && l.deletes > j.mark && rep.Status != Refused && rep.Err != errNotSent && l.lastDelete != nil {
			redo = &job{r: l.lastDelete, node: j.node, reported: true}
			p.Life.Add(1)
			redo = s.enqueue(p, redo)
		}
		s.mu.Unlock()
		p.Life.End()
		if redo != nil {
			p.work(task{s: s, j: redo})
		}
		return nil
	}
	if j.r.spec.Effect == Delete && j.skip == nil && rep.Status == Unknown && s.retry(p, l, j) {
		s.mu.Unlock()
		return nil
	}
	if j.retrying {
		n.pendingCleanups.Add(-1)
	}
	p.Life.untrack(j)
	p.Life.End()
	next := s.advance(l)
	s.mu.Unlock()
	return next
}

// advance moves the lane to its next job, or idles it. Called with s.mu
// held, when the lane no longer waits for anything.
func (s *Lanes) advance(l *lane) *job {
	if len(l.queue) == 0 {
		l.busy, l.current = false, nil
		return nil
	}
	return s.dequeue(l)
}

// retry parks delete j for another try, unless the key it targets would
// have expired by then or the client gave up on its background work.
// Called with s.mu held.
func (s *Lanes) retry(p *Set, l *lane, j *job) bool {
	wait := p.timing.CleanupRetryMin << min(j.tries.Load()-1, 5)
	wait = min(wait, p.timing.CleanupRetryMax)
	if p.Life.abandoned() || time.Now().Add(wait).After(l.expireBy) {
		return false
	}
	j.shared = false
	if !j.retrying {
		j.retrying = true
		p.nodes[j.node].pendingCleanups.Add(1)
	}
	l.current = nil
	p.Life.park(j, time.AfterFunc(wait, func() { s.resume(p, j) })) // before resume can take s.mu
	if p.observe {
		p.obs.CleanupRetry(j.r.base, j.r.spec.Op.Keys[0], j.node, p.nodes[j.node].address(), int(j.tries.Load()), wait)
	}
	return true
}

// giveUpOn runs when delete j's deadline passed while go-redis still holds
// it (a client without ContextTimeoutEnabled waits for its ReadTimeout): the
// lane stops waiting for it and parks a fresh try. A delete that lands late
// is harmless: it removes no generation later than its own.
//
// firstTry is set by the round's shared deadline: it gives up only on first
// tries that run under the round's deadline.
func (s *Lanes) giveUpOn(p *Set, j *job, firstTry bool, try int32) {
	s.mu.Lock()
	l := &s.lanes[j.node]
	if try != 0 && j.tries.Load() != try || l.current != j || j.detached || l.strandedDeletes > 0 || firstTry && !j.shared {
		// With one delete of this lane already left to go-redis, the lane
		// waits for this one: a stalled node holds at most one abandoned
		// write and one abandoned delete per lock.
		s.mu.Unlock()
		return
	}
	l.strandedDeletes++
	j.detached = true
	j.mark = l.deletes
	if j.retrying {
		j.retrying = false
		p.nodes[j.node].pendingCleanups.Add(-1)
	}
	tries := int32(1)
	if !firstTry {
		tries = try
	}
	again := &job{r: j.r, node: j.node, reported: true}
	again.tries.Store(tries)
	p.Life.Add(1)
	if !s.retry(p, l, again) {
		// No time left for another try: the lane goes on.
		p.Life.End()
		next := s.advance(l)
		s.mu.Unlock()
		if next != nil {
			p.work(task{s: s, j: next})
		}
		return
	}
	s.mu.Unlock()
}

// resume sends a parked delete again, unless a later delete now covers it
// or its time is up.
func (s *Lanes) resume(p *Set, j *job) {
	s.mu.Lock()
	l := &s.lanes[j.node]
	if !p.Life.abandoned() && !hasDelete(l.queue) && time.Now().Before(l.expireBy) {
		s.begin(l, j)
		s.mu.Unlock()
		p.work(task{s: s, j: j})
		return
	}
	p.nodes[j.node].pendingCleanups.Add(-1)
	p.Life.untrack(j)
	p.Life.End()
	next := s.advance(l)
	s.mu.Unlock()
	if next != nil {
		p.work(task{s: s, j: next})
	}
}

// cmd returns the round's own go-redis command for try of j when j is the
// round's first job and try its first (a write has no other), and nil
// otherwise (the call makes one). No two calls in flight share it: only that
// try uses it.
func (j *job) cmd(try int32) *redis.Cmd {
	if try == 1 && j == &j.r.jobs[0] {
		return &j.r.cmd0
	}
	return nil
}

// send sends j to its node, unless it is obsolete, and reports the reply.
func (j *job) send(s *Lanes, p *Set) Reply {
	n := p.nodes[j.node]
	r := j.r
	var rep Reply
	switch {
	case j.skip != nil:
		rep = Reply{Err: j.skip}
	case r.spec.Effect == Write:
		rep = j.write(n)
	default:
		rep = j.delete(s, p, n)
	}
	rep.Node = n.index
	if r.spec.Note != nil {
		r.spec.Note(rep)
	}
	if p.observe && rep.Status != OK {
		p.obs.NodeError(r.base, &r.spec.Op, n.index, n.address(), rep.Err)
	}
	if !j.reported {
		j.reported = true
		j.first = rep
		if r.out != nil {
			r.out <- j.slot
		}
		r.leave()
	}
	return rep
}

// write sends write j to n, unless its round's deadline has passed.
func (j *job) write(n *node) Reply {
	r := j.r
	// Not after the round's deadline, whenever its context notices: the
	// lane's expireBy counts on it.
	if r.ctx.Err() != nil || !time.Now().Before(j.deadline) {
		return Reply{Err: errNotSent}
	}
	args := r.args
	if j.args != nil {
		args = j.args
	}
	return n.callOn(n.client, &r.ctx, &r.spec.Op, args, j.cmd(1), j.inline)
}

// delete sends the next try of delete j to n. A delete's deadline runs
// from when it is sent, however long it waited in the lane.
func (j *job) delete(s *Lanes, p *Set, n *node) Reply {
	r := j.r
	try := j.tries.Add(1)
	op, args := &r.spec.Op, r.args
	if op.latePairs() > 0 {
		// Each try its own line, with the latest deadline of the lock's
		// writes queued here by now: a try still held by go-redis keeps
		// the line it was sent with.
		s.mu.Lock()
		late := s.lanes[j.node].lateBy
		s.mu.Unlock()
		if late > 0 && n.oneClock && n.clock.passed(late, time.Now(), n.drift) {
			// Past every deadline by the node's clock, whatever our
			// reading's error: no copy of the lock's writes can land
			// any more, so the delete is a plain one, and leaves no
			// refusal (the common Release, of a lock held longer than
			// its acquire's window). A node reached through a Cluster
			// or Sentinel client may answer with another server's
			// clock than the one read, so it always gets the deadline.
			late = 0
		}
		args = make([]any, len(r.args))
		copy(args, r.args)
		args[lateAt(op)] = late
	}
	if j.inline && try == 1 {
		// On the caller's goroutine, on a client that bounds the call:
		// the round's context ends when the caller stops waiting.
		return n.callOn(n.client, &r.ctx, op, args, j.cmd(try), true)
	}
	if j.shared {
		// Started at once on a worker: the delete's own deadline, with
		// the round's deadline giving up on it.
		return n.call(&r.ctx, op, args, j.cmd(try))
	}
	// A deadline that fires late, once this try is over, must not give
	// up on the job's next try: it names its own.
	c := &roundCtx{expiredF: func() { s.giveUpOn(p, j, false, try) }}
	c.start(&p.sched, r.base, time.Now().Add(r.spec.CallTimeout))
	rep := n.call(c, op, args, j.cmd(try))
	c.end(context.Canceled) // returned in time: nobody to give up on
	return rep
}

// task is a lock's lane on one node, to be drained starting with j.
type task struct {
	s *Lanes
	j *job
}

// work hands t to an idle worker, or starts one. Workers are reused because
// a fresh goroutine grows its stack anew on every call into go-redis, which
// costs more than the call's own work on a loopback node.
func (p *Set) work(t task) {
	select {
	case p.tasks <- t:
	default:
		go p.worker(t)
	}
}

func (p *Set) worker(t task) {
	idle := time.NewTimer(p.timing.WorkerIdle)
	defer idle.Stop()
	for {
		t.s.drain(p, t.j)
		idle.Reset(p.timing.WorkerIdle)
		select {
		case t = <-p.tasks:
		case <-idle.C:
			return
		case <-p.Life.Closing:
			return
		}
	}
}
