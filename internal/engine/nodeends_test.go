package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// contendedRound sends an acquire of key on e's three nodes under w, node
// 2 a far node (its latency learned at 300 ms, its link delayed as much),
// and returns the tally and how long the caller waited.
func contendedRound(t *testing.T, e *laneNodes, key string, w Waits) (*Tally, time.Duration) {
	t.Helper()
	if err := e.p.Life.BeginCall(); err != nil {
		t.Fatal(err)
	}
	defer e.p.Life.EndCall()
	start := time.Now()
	tl, err := e.p.SendAndCount(context.Background(), NewLanes(3), WriteRound(acquireOp(key, utValue("utC.", 1), int64(10_000)), w, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return tl, time.Since(start)
}

// A round whose deadlines are learned waits out a far node's only while
// the key is not contended. Once a node refused because another Lock
// holds the key, and no quorum confirmed, the others are waited for the
// floor at most: the round's confirmation would otherwise keep the other
// contenders out for the far node's whole deadline, for a vote that the
// contenders' own writes, there first, make a refusal too. The far node is
// not counted as silent, so its deadline does not grow. Without a
// refusal the far node's vote is still waited for.
func TestContendedRoundWaitsTheFloor(t *testing.T) {
	e := newLaneNodes(t, 3, true)
	w := Waits{Floor: 20 * time.Millisecond, Cap: 5 * time.Second}
	far := e.p.nodes[2]
	for range 20 {
		far.rtt.sample(300 * time.Millisecond) // a deadline of 900 ms
	}
	e.proxies[2].SetDelay(300 * time.Millisecond)

	// Node 1 silent, nothing refused: the far node's confirmation makes
	// the quorum.
	e.proxies[1].SetBlackhole(true)
	tl, waited := contendedRound(t, e, "ut:uncontended", w)
	if !tl.Reached() || tl.Replies[2].Status != OK || waited < 300*time.Millisecond {
		t.Fatalf("without contention: reached %v after %v, far node %+v; want its confirmation waited for", tl.Reached(), waited, tl.Replies[2])
	}
	e.proxies[1].SetBlackhole(false)
	backoff := far.rtt.backoff.Load()

	const key = "ut:contended"
	for _, i := range []int{1, 2} {
		if err := e.bed.Direct[i].Set(context.Background(), key, "another Lock", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	tl, waited = contendedRound(t, e, key, w)
	if tl.Replies[0].Status != OK || tl.Replies[1].Status != Refused || !tl.Replies[1].Held {
		t.Fatalf("replies %+v; want node 0 confirming, node 1 refusing as held", tl.Replies)
	}
	if waited > 200*time.Millisecond || tl.Reached() {
		t.Fatalf("a contended round waited %v for the far node (reached %v); want the floor", waited, tl.Reached())
	}
	if tl.Replies[2].Err != ErrNotNeeded || far.rtt.backoff.Load() != backoff {
		t.Fatalf("the far node: %v, backoff %d; want it not awaited, its deadline unchanged", tl.Replies[2].Err, far.rtt.backoff.Load())
	}
}

// A round stops waiting for each node at that node's own deadline: two
// near nodes that stall are silent at theirs, 20 ms, and the quorum is out
// of reach then, however long the far node's deadline is; their writes,
// which carry that deadline to the node, could only be refused as late
// past it.
func TestRoundStopsWaitingAtEachNodesDeadline(t *testing.T) {
	e := newLaneNodes(t, 3, true)
	w := Waits{Floor: 20 * time.Millisecond, Cap: 5 * time.Second}
	for i, rtt := range []time.Duration{time.Millisecond, time.Millisecond, 300 * time.Millisecond} {
		for range 50 {
			e.p.nodes[i].rtt.sample(rtt)
		}
		e.proxies[i].SetDelay(300 * time.Millisecond)
	}
	if d := w.of(e.p.nodes[0]); d != w.Floor {
		t.Fatalf("a near node's deadline: %v, want the floor", d)
	}
	tl, waited := contendedRound(t, e, "ut:stalled", w)
	if waited > 200*time.Millisecond || tl.Reached() {
		t.Fatalf("waited %v (reached %v) with both near nodes past their deadline; want their deadline", waited, tl.Reached())
	}
	for i := range 2 {
		if err := tl.Replies[i].Err; !errors.Is(err, ErrNoReply) || !strings.Contains(err.Error(), "deadline 20ms") {
			t.Errorf("near node %d: %v; want no reply within its own deadline", i, err)
		}
	}
	if tl.Replies[2].Err != ErrNotNeeded {
		t.Errorf("the far node: %v; want it not awaited, the outcome decided", tl.Replies[2].Err)
	}
}
