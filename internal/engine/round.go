package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Status is what one node's reply tells us about our key.
type Status uint8

const (
	// Unknown: no reply yet, no reply in time, or an error. The command
	// may or may not have run; it never counts as success.
	Unknown Status = iota
	OK             // the node confirmed the operation
	Refused        // the node definitely did not do it (see err)
)

// Reply is one node's answer to one operation.
type Reply struct {
	Node   int
	Status Status
	// Chained: an acquire's value on the node keeps what it took over
	// (take.lua), which the Lock settles once it holds.
	Chained bool
	Val     int64 // operation-specific: a fencing counter
	Err     error // why it is not OK: a per-node sentinel or the client's error
	// TimedOut: the call got no reply by its deadline (node.callOn), which
	// the caller counts against the node's deadline (Tally.receive).
	TimedOut bool
	// Held: a refusal because another Lock holds the key, or waits for
	// it: the key is contended (Tally.contended).
	Held bool
}

func (r Reply) TransportErr() error {
	if r.Status == Unknown {
		return r.Err
	}
	return nil
}

// Spec says what a round sends and how long each side waits.
type Spec struct {
	Effect Effect
	Op     Op
	// Wait is how long the caller waits for replies. A write's call has the
	// same deadline: it is not sent after it.
	Wait time.Duration
	// Nodes, when set, gives each node a deadline of its own (Waits.of) in
	// place of Wait: a write to it is not sent after it, and carries it on
	// the node's clock; the caller waits for each node until its own
	// deadline (nodeEnds), or for Nodes.Floor at most once the key shows
	// contended (Tally.contended), and the round lasts the longest.
	Nodes Waits
	// CallTimeout is a delete's own deadline, from when it is sent; it may
	// outlast wait, since the delete goes on after the caller has moved on.
	CallTimeout time.Duration
	TTL         time.Duration // writes: the expiry they set
	Only        []bool        // the nodes to send to; nil for all
	// Cancellable lets the caller's context end the wait early. Release
	// waits regardless: it must report what the nodes did.
	Cancellable bool
	Note        func(Reply) // sees every reply, retries included; may be nil
	// HearAll keeps the caller waiting past the quorum, up to wait, for
	// every node's reply once a node's acquire kept a chain (take.lua), so
	// that the Lock settles the chains of all the nodes that kept one.
	HearAll bool
	// ByVal counts the confirmations by their Val: the round reaches its
	// quorum once a quorum confirmed the same Val (Tally.Val), as when
	// each node picks what it confirms (a permit's slot).
	ByVal bool
}

// WriteRound is a round of writes that set the key for ttl: each node
// is waited for up to its deadline under w, and no write is sent to it
// after it.
func WriteRound(op Op, w Waits, ttl time.Duration) Spec {
	return Spec{Effect: Write, Op: op, Nodes: w, TTL: ttl, Cancellable: true}
}

// round is one operation sent to the nodes: the jobs, the channel their
// replies arrive on, and the deadline of its writes. One allocation serves
// the whole round, its context, its jobs and its command line included, for
// up to maxInline nodes; its channels are the only others.
type round struct {
	spec     Spec
	ctx      roundCtx // ends at the round's deadline (a delete's: CallTimeout), or when every first try is done
	base     context.Context
	deadline time.Time // when the caller stops waiting; a write is not sent after it
	users    atomic.Int32
	// out carries the index in jobs of each job whose first try has
	// reported (its reply is in the job's first), and -1 once the caller's
	// wait for a delete round is over (waitUp). Its elements hold no
	// pointers, so the channel is a single allocation.
	out    chan int32
	waitUp timed // a delete round's end of wait, scheduled while its caller blocks
	seq    *Lanes
	p      *Set
	jobs   []job
	args   []any // the command line every call of the round sends (evalArgs)
	jobBuf [maxInline]job
	Args   [inlineArgs]any
	tally  Tally
	// cmd0 is the go-redis command of the first try of jobs[0] (job.cmd):
	// one allocation less per round.
	cmd0 redis.Cmd
}

// maxInline is the most nodes whose jobs a round holds in its own
// allocation.
const maxInline = 7

// inlineArgs is the longest command line a round holds in its own
// allocation: "evalsha", the hash and the number of keys, then two keys
// and four arguments, enough for the rounds of a lock without fencing or
// restart guard. A longer line (up to 3 + maxKeys + maxArgs) takes an
// allocation of its own.
const inlineArgs = 3 + 2 + 4

func (r *round) leave() {
	if r.users.Add(-1) == 0 {
		r.ctx.end(context.Canceled) // every first try returned: nobody to give up on
	}
}

// expired runs once the round's context reached its deadline: the first
// tries of a delete that started at once share it, and those still held by
// go-redis are given up on (the lane parks a fresh try).
func (r *round) expired() {
	if r.spec.Effect != Delete {
		return
	}
	for i := range r.jobs {
		r.seq.giveUpOn(r.p, &r.jobs[i], true, 0)
	}
}

// roundWait is a round seen as the end of its caller's wait.
type roundWait round

// fire tells the waiting caller that its wait is over. out has room for it:
// one slot per job and one for this, which fires at most once.
func (w *roundWait) fire() { w.out <- -1 }

// roundCtx is a round's context: the caller's values, the round's deadline,
// and a Done channel closed at that deadline or once every first try has
// returned. It stands in for context.WithDeadline, which costs five
// allocations per round; this one costs its channel, its deadline being an
// entry in the Client's deadlines. It runs context.AfterFunc callbacks
// itself (the afterFuncer interface of package context), so they need no
// goroutine of their own either.
type roundCtx struct {
	base     context.Context
	deadline time.Time
	done     chan struct{}
	at       timed // the deadline's entry in sched
	sched    *deadlines
	r        *round // the round whose context this is; nil for a try's own
	expiredF func() // a try's own: run once at the deadline, before the callbacks; may be nil

	mu    sync.Mutex // lock order: last, after Lanes.mu (docs/internals.md)
	err   error
	funcs []*afterFunc
	// stuck are the round's writes that later jobs wait behind in their
	// lanes (Lanes.enqueue): when the context ends, each lane moves on
	// (Lanes.unstick). A list rather than AfterFunc callbacks, which
	// cost five allocations each.
	stuck    []*job
	stuckBuf [maxInline]*job
}

type afterFunc struct{ f func() }

func (c *roundCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *roundCtx) Done() <-chan struct{}       { return c.done }
func (c *roundCtx) Value(key any) any {
	// The base's values, but not its cancellation: context.Cause and the
	// like find no cancelCtx of the caller's behind a round (as with
	// context.WithoutCancel, which costs an allocation here only when a
	// value is asked for; go-redis asks for none).
	return context.WithoutCancel(c.base).Value(key)
}

func (c *roundCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges for f to run once the context is done, and returns a
// function that cancels that if it has not happened yet.
func (c *roundCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.funcs = append(c.funcs, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if i := slices.Index(c.funcs, a); i >= 0 {
			c.funcs = slices.Delete(c.funcs, i, i+1)
			return true
		}
		return false
	}
}

// start arms the deadline. base only lends its values (see Value): its
// cancellation never reaches the calls.
func (c *roundCtx) start(sched *deadlines, base context.Context, deadline time.Time) {
	c.base = base
	c.deadline = deadline
	c.done = make(chan struct{})
	c.sched = sched
	c.at = timed{at: deadline, f: c}
	sched.add(&c.at)
}

// unstickOnEnd has w's lane move on once the context ends: at once if it has.
// w is a write of this context's round.
func (c *roundCtx) unstickOnEnd(w *job) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go w.r.seq.unstick(w.r.p, w.node, w)
		return
	}
	if c.stuck == nil {
		c.stuck = c.stuckBuf[:0]
	}
	c.stuck = append(c.stuck, w)
	c.mu.Unlock()
}

// fire ends the context at its deadline.
func (c *roundCtx) fire() { c.end(context.DeadlineExceeded) }

// end closes the context with err unless it is closed already, runs the
// callbacks, and reports whether this call closed it.
func (c *roundCtx) end(err error) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.err = err
	funcs, stuck := c.funcs, c.stuck
	c.funcs, c.stuck = nil, nil
	close(c.done)
	c.mu.Unlock()
	if err != context.DeadlineExceeded {
		c.sched.remove(&c.at)
	} else if c.r != nil {
		c.r.expired()
	} else if c.expiredF != nil {
		c.expiredF()
	}
	for _, a := range funcs {
		a.f()
	}
	for _, w := range stuck {
		go w.r.seq.unstick(w.r.p, w.node, w)
	}
	return true
}

// Launch queues a round on the nodes, behind the lock's earlier calls there,
// and returns without waiting: nobody counts its replies, which only
// spec.Note sees. Its calls run under the round's own context, which lends
// ctx's values but not its cancellation: work already sent is never
// abandoned because the caller went away. Launch returns nil when there is
// no node to send to. Call it between Life.BeginCall and Life.EndCall.
func (p *Set) Launch(ctx context.Context, seq *Lanes, spec Spec) *round {
	r, _ := p.start(ctx, seq, spec, -1, false)
	return r
}

// start is launch, except that the job on node here (-1: none), if its lane
// is free, is returned instead of being handed to a worker: the caller runs
// it (Lanes.runInline). waited says that the caller waits for the replies
// (SendAndCount).
func (p *Set) start(ctx context.Context, seq *Lanes, spec Spec, inline int, waited bool) (*round, *job) {
	n := len(p.nodes)
	if spec.Only != nil {
		n = Count(spec.Only)
		if n == 0 {
			return nil, nil
		}
	}
	r := &round{spec: spec, base: ctx, seq: seq, p: p}
	r.ctx.r = r
	// Replies come on out only to a caller that waits for them; with one
	// node, whose reply is in when every first try is, the end of a write
	// round's context says when to look (a delete's too when the caller
	// runs the call itself), and no channel is needed.
	if waited && (n > 1 || spec.Effect == Delete && inline < 0) {
		r.out = make(chan int32, n+1)
	}
	r.jobs = r.jobBuf[:0]
	if n > len(r.jobBuf) {
		r.jobs = make([]job, 0, n)
	}
	r.args = p.evalArgs(seq, &r.spec.Op, r.Args[:0])
	now := time.Now()
	r.deadline = now.Add(spec.Wait)
	perNode := spec.Nodes.set()
	if perNode {
		r.deadline = now
	}
	for i, nd := range p.nodes {
		if spec.Only == nil || spec.Only[i] {
			dl := r.deadline
			if perNode {
				dl = now.Add(spec.Nodes.of(nd))
				r.deadline = later(r.deadline, dl)
			}
			r.jobs = append(r.jobs, job{r: r, node: i, slot: int32(len(r.jobs)), deadline: dl})
		}
	}
	if perNode {
		r.spec.Wait = r.deadline.Sub(now)
	}
	if spec.Effect == Write && spec.Op.latePairs() > 0 {
		p.lateArgs(r)
	}
	switch {
	case spec.Effect == Write:
		r.ctx.start(&p.sched, ctx, r.deadline)
	case inline >= 0:
		// The caller runs the delete's only first try itself (inline), on
		// a client that bounds the call: it ends when the caller stops
		// waiting. Should the lane be busy, the job waits there and gets
		// a deadline of its own when it starts.
		r.ctx.start(&p.sched, ctx, r.deadline)
	default:
		// The first try of each delete that starts at once shares this
		// deadline, and it gives up on those still held by go-redis when it
		// passes (round.expired); a delete that waited in its lane, and
		// every retry, gets a deadline of its own (job.delete).
		r.ctx.start(&p.sched, ctx, time.Now().Add(spec.CallTimeout))
	}
	r.users.Store(int32(n))
	p.Life.Add(n)
	var mine *job
	for i := range r.jobs {
		if j := &r.jobs[i]; j.node == inline {
			mine = seq.pushInline(p, j)
		} else {
			seq.push(p, j)
		}
	}
	return r, mine
}

// lateArgs gives each job of write round r its own command line, with
// its node's deadline for the write: the round's deadline on the node's
// clock (Set.lateMs), and for a handover the leaving Lock's latest
// deadline there (Op.Leaving). A node whose clock is not known yet is not
// sent the write: its server is not identified either, and its vote would
// not count. One allocation holds every job's line.
func (p *Set) lateArgs(r *round) {
	p.freshen(r)
	n, at := len(r.args), lateAt(&r.spec.Op)
	all := make([]any, n*len(r.jobs))
	for k := range r.jobs {
		j := &r.jobs[k]
		j.args = all[k*n : (k+1)*n : (k+1)*n]
		copy(j.args, r.args)
		ms, ok := p.lateMs(j.node, j.deadline)
		if !ok {
			j.skip = p.nodes[j.node].clock.unknown()
			continue
		}
		j.late, j.args[at] = ms, ms
		if leaving := r.spec.Op.Leaving; leaving != nil {
			j.args[at+1] = leaving.LateBy(j.node)
		}
	}
}

// SendAndCount sends spec to every node and returns as soon as the outcome is
// decided: a quorum confirmed, or so many refused or failed that a quorum is
// out of reach, or the wait is over (the silent nodes count as unknown), or
// Spec.Nodes.Floor after the key showed contended (Tally.contended; the
// nodes not heard from then keep ErrNotNeeded, not counted as silent). A
// node whose own deadline passes first is silent from then on (nodeEnds),
// its reply not counted if it comes. It
// returns early with ctx.Err() if ctx ends first and spec is Cancellable;
// the calls go on in the background either way. One node's call, if
// Set.inline picks one, runs on the caller's goroutine: the caller then
// notices its ctx ending only once that call returned, by the node deadline.
func (p *Set) SendAndCount(ctx context.Context, seq *Lanes, spec Spec) (*Tally, error) {
	spec.Only = nil
	r, mine := p.start(ctx, seq, spec, p.inlineNode(), true)
	if mine != nil {
		seq.runInline(p, mine)
	}
	t := &r.tally
	t.Init(len(p.nodes), p.Quorum)
	t.byVal = spec.ByVal
	if r.out == nil {
		return t, p.waitOne(ctx, r, mine != nil)
	}
	// A write round's context ends at the caller's deadline; a delete
	// round's lasts longer, so the end of the caller's wait comes on out,
	// scheduled only if the caller has to block.
	var over <-chan struct{}
	if spec.Effect == Write {
		over = r.ctx.Done()
	}
	var done <-chan struct{}
	if spec.Cancellable {
		done = ctx.Done()
	}
	waiting := false
	var w nodeEnds
	for pending := len(p.nodes); pending > 0 && !t.enough(spec.HearAll) && t.Confirmed+pending >= t.Quorum; {
		select {
		case k := <-r.out:
			pending = t.receive(r, k, pending)
			continue
		default:
		}
		if !waiting && spec.Effect == Delete {
			waiting = true
			r.waitUp = timed{at: r.deadline, f: (*roundWait)(r)}
			p.sched.add(&r.waitUp)
		}
		w.arm(t, r)
		select {
		case k := <-r.out:
			pending = t.receive(r, k, pending)
		case <-over:
			t.receiveArrived(r, pending)
			pending = 0
		case <-w.c:
			pending = w.fired(t, r, pending)
		case <-done:
			p.unwait(r, waiting)
			w.stop()
			return t, ctx.Err()
		}
	}
	p.unwait(r, waiting)
	w.stop()
	return t, nil
}

// nodeEnds wakes a caller waiting for a round's replies before the round's
// deadline: at a node's own deadline, earlier than the round's (its
// latency learned shorter than another's), when the round stops waiting
// for it; and the floor after the key showed contended (Tally.contended),
// when it stops waiting for all. Its timer is made only for such a round.
type nodeEnds struct {
	timer *time.Timer
	c     <-chan time.Time
	at    time.Time // when the timer fires; zero when it is not set
	cut   time.Time // the contended round's end; zero before it shows contended
}

// arm sets the timer for the next of those moments, if there is one.
func (w *nodeEnds) arm(t *Tally, r *round) {
	if w.cut.IsZero() && t.contended(r.spec) {
		w.cut = time.Now().Add(r.spec.Nodes.Floor)
	}
	at := w.cut
	for k := range r.jobs {
		if j := &r.jobs[k]; t.Replies[j.node].Err == ErrNotNeeded && j.deadline.Before(r.deadline) && (at.IsZero() || j.deadline.Before(at)) {
			at = j.deadline
		}
	}
	switch {
	case at.IsZero() || at.Equal(w.at):
	case w.timer == nil:
		w.timer = time.NewTimer(time.Until(at))
		w.c = w.timer.C
	default:
		w.timer.Reset(time.Until(at))
	}
	if !at.IsZero() {
		w.at = at
	}
}

// fired takes what has arrived when the timer fires and ends the wait for
// the nodes whose moment it is; it returns how many are still pending.
func (w *nodeEnds) fired(t *Tally, r *round, pending int) int {
	w.at = time.Time{}
	pending = t.receiveReady(r, pending)
	now := time.Now()
	if !w.cut.IsZero() && !now.Before(w.cut) {
		return 0 // the others keep ErrNotNeeded: not awaited, not silent
	}
	for k := range r.jobs {
		if j := &r.jobs[k]; t.Replies[j.node].Err == ErrNotNeeded && !now.Before(j.deadline) {
			t.silence(r, j.node)
			pending--
		}
	}
	return pending
}

// stop stops the timer, if any.
func (w *nodeEnds) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// contended reports whether a round whose deadlines are learned from each
// node's latency (Spec.Nodes, not Fixed) waits for its nodes the floor at
// most: a node refused because another Lock holds the key, and no quorum
// confirmed yet. The round's confirmations then keep the other contenders
// out for as long as it waits, and the vote it waits for, a slow node's,
// is under contention most likely a refusal too, the others' writes
// having reached it first. Two attempts that took one near node each and
// wait out a far node's long deadline keep the near nodes from ever being
// free together: Redlock's split vote, which only a short wait ends. So a
// contended round waits for the slow nodes as every node was waited for
// before deadlines were learned (docs/algorithm.md).
func (t *Tally) contended(spec Spec) bool {
	return t.held > 0 && !t.Reached() && spec.Nodes.Fixed == 0 && spec.Nodes.Floor > 0
}

// waitOne waits for the only node of a round without out: its first try
// has reported once every first try has (users is 0), and the round's
// context ends then or at the caller's deadline, whichever comes first.
func (p *Set) waitOne(ctx context.Context, r *round, ran bool) error {
	t := &r.tally
	if !ran {
		var done <-chan struct{}
		if r.spec.Cancellable {
			done = ctx.Done()
		}
		select {
		case <-r.ctx.Done():
		case <-done:
			return ctx.Err()
		}
	}
	if r.users.Load() == 0 {
		r.noteTimeout(r.jobs[0].first)
		t.Add(p.Vote(r.jobs[0].first))
	} else {
		t.silent(r)
	}
	return nil
}

// unwait removes the end of the caller's wait, if it was scheduled.
func (p *Set) unwait(r *round, waiting bool) {
	if waiting {
		p.sched.remove(&r.waitUp)
	}
}

// Tally is the state of one round of replies.
type Tally struct {
	Replies []Reply // by node index; unanswered nodes hold Unknown and ErrNotNeeded or ErrNoReply
	// Confirmed counts the confirmations; with ByVal, those of Val, the
	// value the most nodes confirmed (the first to get there on a tie).
	Confirmed int
	Val       int64
	Chained   int // confirmations whose value keeps a chain (reply.chained)
	Quorum    int
	byVal     bool
	held      int              // refusals because another Lock holds the key (Reply.Held)
	buf       [maxInline]Reply // replies for up to maxInline nodes, in the round's allocation
}

func (t *Tally) Init(n, quorum int) {
	t.Quorum = quorum
	if n <= len(t.buf) {
		t.Replies = t.buf[:n]
	} else {
		t.Replies = make([]Reply, n)
	}
	for i := range t.Replies {
		t.Replies[i] = Reply{Node: i, Err: ErrNotNeeded}
	}
}

// Reached reports whether a quorum confirmed.
func (t *Tally) Reached() bool { return t.Confirmed >= t.Quorum }

// enough reports whether the caller may stop waiting: a quorum confirmed,
// and, when HearAll asks for it, no node kept a chain.
func (t *Tally) enough(HearAll bool) bool {
	return t.Reached() && (!HearAll || t.Chained == 0)
}

func (t *Tally) Add(r Reply) {
	t.Replies[r.Node] = r
	if r.Status == Refused && r.Held {
		t.held++
	}
	if r.Status != OK {
		return
	}
	if r.Chained {
		t.Chained++
	}
	if !t.byVal {
		t.Confirmed++
		return
	}
	same := 0
	for _, x := range t.Replies {
		if x.Status == OK && x.Val == r.Val {
			same++
		}
	}
	if same > t.Confirmed {
		t.Confirmed, t.Val = same, r.Val
	}
}

// receive counts k, a report from r.out, and returns how many nodes are still
// pending: k is the index of a job whose first try has reported, or -1 when
// the caller's wait is over (then none is: the silent did not answer in
// time).
func (t *Tally) receive(r *round, k int32, pending int) int {
	if k < 0 {
		t.receiveArrived(r, pending)
		return 0
	}
	if !t.take(r, k) {
		return pending
	}
	return pending - 1
}

// take counts job k's first reply, unless the round stopped waiting for
// its node at the node's deadline (nodeEnds): it reports whether it
// counted.
func (t *Tally) take(r *round, k int32) bool {
	j := &r.jobs[k]
	if t.Replies[j.node].Err != ErrNotNeeded {
		return false
	}
	r.noteTimeout(j.first)
	t.Add(r.p.Vote(j.first))
	return true
}

// noteTimeout counts a write's reply that came too late against its node's
// deadline, on the caller's side, before its next attempt (timedOut).
func (r *round) noteTimeout(rep Reply) {
	if rep.TimedOut && r.spec.Effect == Write {
		n := r.p.nodes[rep.Node]
		n.rtt.timedOut(n.bounded)
	}
}

// receiveArrived takes, of the pending nodes' replies, those that have arrived
// when the wait is over; the nodes still silent did not answer in time. A
// write round's context also ends when its last job is done, so what has
// arrived may be everything.
func (t *Tally) receiveArrived(r *round, pending int) {
	if t.receiveReady(r, pending) > 0 {
		t.silent(r)
	}
}

// receiveReady takes, of the pending nodes' replies, those that have
// arrived, and returns how many nodes are still pending, which keep
// ErrNotNeeded.
func (t *Tally) receiveReady(r *round, pending int) int {
	for pending > 0 {
		select {
		case k := <-r.out:
			if k >= 0 && t.take(r, k) {
				pending--
			}
		default:
			return pending
		}
	}
	return 0
}

// silent marks the nodes that have not answered as not answering in time:
// ErrNoReply, with the deadline r gave each and its usual latency.
// A write round's silent node had a deadline too short: its next one is
// longer (rttEstimate.timedOut), at once, before its caller's next
// attempt.
func (t *Tally) silent(r *round) {
	for i := range t.Replies {
		if t.Replies[i].Err == ErrNotNeeded {
			t.silence(r, i)
		}
	}
}

// silence marks node i as not answering within its deadline in r.
func (t *Tally) silence(r *round, i int) {
	t.Replies[i].Err = r.p.silentFor(i, r.waitOf(i))
	if r.spec.Effect == Write {
		n := r.p.nodes[i]
		n.rtt.timedOut(n.bounded)
	}
}

// waitOf is how long r gave node i: its job's deadline from the round's
// start.
func (r *round) waitOf(i int) time.Duration {
	for k := range r.jobs {
		if r.jobs[k].node == i {
			return r.jobs[k].deadline.Sub(r.deadline.Add(-r.spec.Wait))
		}
	}
	return r.spec.Wait
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Where marks the nodes whose reply satisfies keep.
func (t *Tally) Where(keep func(Reply) bool) []bool {
	only := make([]bool, len(t.Replies))
	for i, r := range t.Replies {
		only[i] = keep(r)
	}
	return only
}

// Unrefused marks the nodes that did not refuse: where a write of ours may
// have landed, and so where a rollback must go.
func (t *Tally) Unrefused() []bool {
	return t.Where(func(r Reply) bool { return r.Status != Refused })
}

// Count is how many of b are set: nodes that did or may do something.
func Count(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}
