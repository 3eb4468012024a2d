package engine

import (
	"slices"
	"testing"
	"time"
)

// TestLaneNoOvertakingAfterEndedWrite: a job pushed while the lane's
// current job is a write whose round is over, with jobs queued behind it
// (a write the lane has just dequeued, which its worker has not run yet),
// does not start ahead of them: the lane moves on to its next job, in
// order, and the new job waits its turn. Before, it started at once; on a
// stalled node a write of a new attempt then went out past the queued
// deletes, and with the delete that followed it four calls of one lock
// were held by go-redis where the bound is three (TestStalledNodeDoesNotPileUp).
func TestLaneNoOvertakingAfterEndedWrite(t *testing.T) {
	p := idleNodeSet(t, 1)
	s := NewLanes(1)
	defer forget(s)
	ended := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
	del := &laneRound(t, p, s, Delete, 0, 0).jobs[0]
	queued := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]
	fresh := &laneRound(t, p, s, Write, time.Second, 0).jobs[0]

	// The lane as dequeue leaves it: the ended write current, the others
	// queued behind it.
	ended.r.ctx.end(errNotSent)
	s.mu.Lock()
	l := &s.lanes[0]
	l.busy, l.current, l.queue = true, ended, []*job{del, queued}
	s.mu.Unlock()

	got := enqueueLocked(s, p, fresh)
	if got == fresh {
		t.Fatal("the new write overtook the jobs queued behind the ended write")
	}
	if got != del {
		t.Fatalf("the lane did not move on to its next job in order (got %p, want the queued delete %p)", got, del)
	}
	st := laneState(s, 0)
	if st.current != del || !slices.Equal(st.queue, []*job{queued, fresh}) {
		t.Fatalf("lane: current is the delete %v, queue %v; want the write queued, then the new one", st.current == del, st.queue)
	}
	if !ended.detached || st.strandedWrites != 1 {
		t.Fatalf("the ended write is not detached: detached %v, stranded writes %d", ended.detached, st.strandedWrites)
	}
}
