package engine

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The sequencer's bookkeeping, driven without nodes: a Set whose nodes
// have no client is enough for the rules that send nothing (a job that is
// not sent: a write whose round is over, a superseded delete). The rules
// that send are checked on real nodes in sequencer_nodes_internal_test.go.

// idleNodeSet is a node set of n nodes without clients, for jobs that are
// never sent. Its idle workers and its work are waited for at the test's
// end.
func idleNodeSet(t *testing.T, n int) *Set {
	t.Helper()
	p := &Set{Quorum: n/2 + 1, tasks: make(chan task), keyLife: testKeyLife, timing: testTiming}
	p.Life.init()
	for i := range n {
		p.nodes = append(p.nodes, &node{index: i})
	}
	t.Cleanup(func() {
		p.sched.mu.Lock()
		if p.sched.timer != nil {
			p.sched.timer.Stop()
		}
		p.sched.mu.Unlock()
		p.Life.Shut()
		waitClosed(t, p.Life.Idle(), "the node set's work")
	})
	return p
}

// laneRound is a round of kind on p for seq, with one job per node in
// nodes (not queued yet). Its context ends an hour from now unless a test
// ends it. A test that has a job settled (done) counts it as work of p
// first, as start does.
func laneRound(t *testing.T, p *Set, seq *Lanes, kind Effect, ttl time.Duration, nodes ...int) *round {
	t.Helper()
	r := &round{spec: Spec{Effect: kind, TTL: ttl, CallTimeout: time.Hour}, seq: seq, p: p, base: context.Background()}
	r.ctx.r = r
	r.deadline = time.Now().Add(time.Hour)
	r.jobs = r.jobBuf[:0]
	for _, i := range nodes {
		r.jobs = append(r.jobs, job{r: r, node: i, slot: int32(len(r.jobs))})
	}
	r.users.Store(int32(len(nodes)))
	r.ctx.start(&p.sched, context.Background(), r.deadline)
	t.Cleanup(func() { r.ctx.end(context.Canceled) })
	return r
}

// forget empties s's lanes, so that the rounds' contexts, ended at the
// test's end, hand no job to a worker: a test defers it.
func forget(s *Lanes) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.lanes {
		l := &s.lanes[i]
		l.queue, l.current, l.busy = nil, nil, false
	}
}

// enqueueLocked is Lanes.enqueue under the sequencer's mutex.
func enqueueLocked(s *Lanes, p *Set, j *job) *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueue(p, j)
}

// laneState is a copy of lane i's fields, taken under the mutex.
func laneState(s *Lanes, i int) lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lanes[i]
	l.queue = slices.Clone(l.queue)
	return l
}

// waitLane fails t unless lane i satisfies cond within waitLimit.
func waitLane(t *testing.T, s *Lanes, i int, what string, cond func(l *lane) bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		s.mu.Lock()
		ok := cond(&s.lanes[i])
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLaneOrder: a lane runs one call at a time, in the order queued; a
// delete queued behind a write whose round is still on waits for it (the
// write is watched, so the round's end can unstick the lane); of several
// queued deletes only the last is sent, the others are superseded when
// their turn comes, and the last delete is never dropped; writes are never
// superseded.
func TestLaneOrder(t *testing.T) {
	p := idleNodeSet(t, 1)
	s := NewLanes(1)
	defer forget(s)
	w := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
	d1 := &laneRound(t, p, s, Delete, 0, 0).jobs[0]
	w2 := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
	d2 := &laneRound(t, p, s, Delete, 0, 0).jobs[0]
	w3 := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]

	if got := enqueueLocked(s, p, w); got != w {
		t.Fatal("an idle lane did not start its first job")
	}
	for _, j := range []*job{d1, w2, d2, w3} {
		if got := enqueueLocked(s, p, j); got != nil {
			t.Fatalf("a job (effect %d) overtook the write in progress", j.r.spec.Effect)
		}
	}
	l := laneState(s, 0)
	if !l.busy || l.current != w || !slices.Equal(l.queue, []*job{d1, w2, d2, w3}) {
		t.Fatalf("lane: busy %v, current is w %v, queue %v", l.busy, l.current == w, l.queue)
	}
	if !w.blocking || !slices.Contains(w.r.ctx.stuck, w) {
		t.Fatal("the write others wait behind is not watched by its round's context")
	}
	if d1.shared || d2.shared {
		t.Fatal("a queued delete runs under its round's shared deadline")
	}
	if l.lastDelete != d2.r {
		t.Fatal("lastDelete is not the newest delete queued")
	}

	// The write is done: the lane moves on, one job at a time.
	var ran []*job
	s.mu.Lock()
	for j := s.advance(&s.lanes[0]); j != nil; j = s.advance(&s.lanes[0]) {
		if s.lanes[0].current != j {
			t.Errorf("the job handed out is not the lane's current one")
		}
		ran = append(ran, j)
	}
	l = s.lanes[0]
	s.mu.Unlock()
	if !slices.Equal(ran, []*job{d1, w2, d2, w3}) {
		t.Fatalf("dequeued out of order")
	}
	if d1.skip != errSuperseded {
		t.Fatalf("a delete with a later delete queued behind it was not superseded: skip %v", d1.skip)
	}
	if d2.skip != nil || w2.skip != nil || w3.skip != nil {
		t.Fatalf("the last delete or a write was dropped: %v, %v, %v", d2.skip, w2.skip, w3.skip)
	}
	if l.busy || l.current != nil || l.deletes != 2 {
		t.Fatalf("after the queue: busy %v, current %v, deletes %d; want idle, 2 deletes begun", l.busy, l.current, l.deletes)
	}
	if s.Unsettled() != nil {
		t.Fatal("unsettled marks a lane with nothing queued, running or stranded")
	}
}

// TestLaneExpireBy: every write pushes the lane's expireBy to the latest
// time its key may live (its round's deadline, its TTL and the drift); a
// write that ends earlier never pulls it back; a delete does not move it.
func TestLaneExpireBy(t *testing.T) {
	p := idleNodeSet(t, 1)
	s := NewLanes(1)
	defer forget(s)
	long := laneRound(t, p, s, Write, 10*time.Second, 0)
	short := laneRound(t, p, s, Write, time.Second, 0)
	del := laneRound(t, p, s, Delete, 0, 0)
	enqueueLocked(s, p, &long.jobs[0])
	want := long.deadline.Add(testKeyLife(10 * time.Second))
	if got := laneState(s, 0).expireBy; !got.Equal(want) {
		t.Fatalf("expireBy %v, want %v", got, want)
	}
	enqueueLocked(s, p, &short.jobs[0])
	enqueueLocked(s, p, &del.jobs[0])
	if got := laneState(s, 0).expireBy; !got.Equal(want) {
		t.Fatalf("a shorter write or a delete moved expireBy to %v", got)
	}
}

// TestLaneDetachOverWrite: a job pushed behind a write whose round is over
// starts at once; the lane counts the write as stranded (unsettled keeps
// the node marked until it returns) and remembers how many deletes had
// begun when it let go.
func TestLaneDetachOverWrite(t *testing.T) {
	p := idleNodeSet(t, 2)
	s := NewLanes(2)
	defer forget(s)
	w := &laneRound(t, p, s, Write, time.Second, 1).jobs[0]
	d := &laneRound(t, p, s, Delete, 0, 1).jobs[0]
	if s.Unsettled() != nil {
		t.Fatal("a fresh sequencer is unsettled")
	}
	enqueueLocked(s, p, w)
	if got := s.Unsettled(); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("unsettled with a write running on node 1: %v", got)
	}
	w.r.ctx.end(context.DeadlineExceeded)
	if got := enqueueLocked(s, p, d); got != d {
		t.Fatal("a delete waits behind a write whose round is over")
	}
	l := laneState(s, 1)
	if !w.detached || w.mark != 0 || l.strandedWrites != 1 || l.current != d || l.deletes != 1 {
		t.Fatalf("detach: detached %v, mark %d, stranded %d, current is d %v, deletes %d",
			w.detached, w.mark, l.strandedWrites, l.current == d, l.deletes)
	}
	if !d.shared {
		t.Fatal("a delete that starts at once does not share its round's deadline")
	}
	s.mu.Lock()
	s.advance(&s.lanes[1])
	s.mu.Unlock()
	if got := s.Unsettled(); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("unsettled with a write still held by go-redis on node 1: %v", got)
	}
}

// TestLanePushHere: pushInline hands an idle lane's job to the caller (here, with
// its own deadline rather than the round's shared one) and queues it on a
// busy lane instead.
func TestLanePushHere(t *testing.T) {
	p := idleNodeSet(t, 1)
	s := NewLanes(1)
	defer forget(s)
	d := &laneRound(t, p, s, Delete, 0, 0).jobs[0]
	if got := s.pushInline(p, d); got != d || !d.inline || d.shared {
		t.Fatalf("pushInline on an idle lane: got d %v, here %v, shared %v", got == d, d.inline, d.shared)
	}
	d2 := &laneRound(t, p, s, Delete, 0, 0).jobs[0]
	if got := s.pushInline(p, d2); got != nil || d2.inline {
		t.Fatal("pushInline on a busy lane handed the job to the caller")
	}
	if l := laneState(s, 0); !slices.Equal(l.queue, []*job{d2}) {
		t.Fatal("pushInline on a busy lane did not queue the job")
	}
}

// TestLaneRedoAfterStrandedWrite: a write the lane went on without, which
// returns after a delete began on the lane and was not refused, queues the
// lane's newest delete again (it may have landed after the delete); one
// that was refused, was never sent (its round was over when its worker
// came to it), or after which no delete began, does not.
func TestLaneRedoAfterStrandedWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rep      Reply
		deleteOn bool
		redo     bool
	}{
		{"late confirmation after a delete", Reply{Status: OK}, true, true},
		{"no reply after a delete", Reply{Err: ErrNoReply}, true, true},
		{"refused after a delete", Reply{Status: Refused, Err: errHeldByOther}, true, false},
		{"not sent, after a delete", Reply{Err: errNotSent}, true, false},
		{"confirmation, no delete since", Reply{Status: OK}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := idleNodeSet(t, 1)
			s := NewLanes(1)
			defer forget(s)
			w := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
			enqueueLocked(s, p, w)
			w.r.ctx.end(context.DeadlineExceeded)
			// The next job starts at once, detaching w; a write keeps the
			// lane busy so that a redo is queued, not sent.
			var del *round
			if tc.deleteOn {
				del = laneRound(t, p, s, Delete, 0, 0)
				enqueueLocked(s, p, &del.jobs[0])
				s.mu.Lock()
				s.advance(&s.lanes[0])
				s.mu.Unlock()
			}
			busy := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
			enqueueLocked(s, p, busy)
			if !w.detached {
				t.Fatal("the write was not detached")
			}
			p.Life.Add(1) // what w's first try holds
			if next := s.done(p, w, tc.rep); next != nil {
				t.Fatal("a stranded write's return handed the lane a job: the lane is not its")
			}
			l := laneState(s, 0)
			if l.strandedWrites != 0 {
				t.Fatalf("strandedWrites %d after the write returned", l.strandedWrites)
			}
			if !tc.redo {
				if len(l.queue) != 0 {
					t.Fatalf("a redo was queued: %v", l.queue)
				}
				return
			}
			if len(l.queue) != 1 || l.queue[0].r != del || !l.queue[0].reported || l.queue[0].node != 0 {
				t.Fatalf("no redo of the newest delete queued: %v", l.queue)
			}
			// The redo is work of its own until it runs; it is not run here.
			forget(s)
			p.Life.End()
		})
	}
}

// TestLaneRetryBounds: a delete without a reply is not parked for another
// try once the key it targets would have expired by then (no write ever set
// one here), nor once the client gave up on its background work.
func TestLaneRetryBounds(t *testing.T) {
	p := idleNodeSet(t, 1)
	s := NewLanes(1)
	defer forget(s)
	d := &laneRound(t, p, s, Delete, 0, 0).jobs[0]
	d.tries.Store(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.lanes[0]
	if s.retry(p, l, d) {
		t.Fatal("a delete was parked on a lane where no key of ours can live")
	}
	l.expireBy = time.Now().Add(time.Hour)
	p.Life.GiveUp()
	if s.retry(p, l, d) {
		t.Fatal("a delete was parked after the client gave up on its background work")
	}
	if d.retrying || p.nodes[0].pendingCleanups.Load() != 0 {
		t.Fatal("a delete not parked counts as a pending cleanup")
	}
}

// TestRoundCtxWatch: when the round of a write that a lane waits for ends,
// the lane moves on without it (roundCtx.unstickOnEnd, Lanes.unstick): the
// write is stranded and the next job runs, here a write whose own round is
// over, which is not sent. A write watched after its round ended unsticks
// its lane at once.
func TestRoundCtxWatch(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := map[bool]string{false: "watched before the end", true: "watched after the end"}[late]
		t.Run(name, func(t *testing.T) {
			p := idleNodeSet(t, 1)
			s := NewLanes(1)
			defer forget(s)
			w := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
			next := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
			next.r.ctx.end(context.DeadlineExceeded)
			p.Life.Add(1) // next's first try, run by a worker
			enqueueLocked(s, p, w)
			if late {
				s.mu.Lock()
				s.lanes[0].queue = append(s.lanes[0].queue, next)
				s.mu.Unlock()
				w.r.ctx.end(context.Canceled)
				w.r.ctx.unstickOnEnd(w)
			} else {
				if enqueueLocked(s, p, next) != nil {
					t.Fatal("a write overtook a write whose round is on")
				}
				w.r.ctx.end(context.DeadlineExceeded)
			}
			waitLane(t, s, 0, "the lane moving on without the write", func(l *lane) bool { return !l.busy })
			l := laneState(s, 0)
			if !w.detached || l.strandedWrites != 1 {
				t.Fatalf("the write the lane went on without: detached %v, stranded %d", w.detached, l.strandedWrites)
			}
			if next.first.Err != errNotSent {
				t.Fatalf("a write whose round was over when its turn came: reply %+v, want errNotSent", next.first)
			}
		})
	}
}
