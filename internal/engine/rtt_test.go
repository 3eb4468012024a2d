package engine

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// The estimator follows RFC 6298: the first sample R sets SRTT = R and
// RTTVAR = R/2; each later one moves RTTVAR a quarter of the way to
// |SRTT − R| and SRTT an eighth of the way to R; RTO = SRTT + max(G,
// 4·RTTVAR), and at least 3·SRTT.
func TestRTTEstimatorFollowsRFC6298(t *testing.T) {
	var e rttEstimate
	if _, ok := e.rto(); ok {
		t.Fatal("an estimate before any sample")
	}
	e.sample(100 * time.Millisecond)
	srtt, rttvar, ok := e.usual()
	if !ok || srtt != 100*time.Millisecond || rttvar != 50*time.Millisecond {
		t.Fatalf("first sample: srtt %v rttvar %v ok %v, want 100ms 50ms", srtt, rttvar, ok)
	}
	if rto, _ := e.rto(); rto != 300*time.Millisecond {
		t.Fatalf("first RTO %v, want 300ms", rto)
	}
	e.sample(20 * time.Millisecond)
	srtt, rttvar, _ = e.usual()
	// RTTVAR = 3/4·50 + 1/4·80 = 57.5; SRTT = 7/8·100 + 1/8·20 = 90.
	if srtt != 90*time.Millisecond || rttvar != 57500*time.Microsecond {
		t.Fatalf("second sample: srtt %v rttvar %v, want 90ms 57.5ms", srtt, rttvar)
	}
	// Steady samples converge on the round trip, and the variation on 0:
	// RTO falls to three round trips (a call may set up a connection first).
	for range 200 {
		e.sample(20 * time.Millisecond)
	}
	srtt, rttvar, _ = e.usual()
	rto, _ := e.rto()
	if srtt < 20*time.Millisecond || srtt > 21*time.Millisecond || rttvar > 100*time.Microsecond || rto != 3*srtt {
		t.Fatalf("steady 20ms: srtt %v rttvar %v rto %v", srtt, rttvar, rto)
	}
}

// A node whose calls time out gets a deadline doubled for each in a row,
// up to rttMaxBackoff doublings, and back to its RTO at its next reply;
// Waits keeps it within [Floor, Cap], gives Cap before the first sample,
// and Fixed to every node.
func TestWaitsBoundsAndBackoff(t *testing.T) {
	n := &node{}
	w := Waits{Floor: 10 * time.Millisecond, Cap: time.Second}
	if d := w.of(n); d != time.Second {
		t.Fatalf("before any sample: %v, want the cap", d)
	}
	down := &node{identTried: time.Now()}
	if d := w.of(down); d != w.Floor {
		t.Fatalf("a node whose first contact ended without a reply: %v, want the floor", d)
	}
	for range 100 {
		n.rtt.sample(200 * time.Microsecond) // loopback
	}
	if d := w.of(n); d != 10*time.Millisecond {
		t.Fatalf("a loopback node: %v, want the floor", d)
	}
	for i := range 10 {
		n.rtt.timedOut(false)
		want := min(10*time.Millisecond<<min(i+1, rttMaxBackoff), rttBackoffCeil)
		if d := w.of(n); d != want {
			t.Fatalf("after %d timeouts: %v, want %v", i+1, d, want)
		}
	}
	for range rttMaxBackoff {
		n.rtt.sample(200 * time.Microsecond)
	}
	if d := w.of(n); d != 10*time.Millisecond {
		t.Fatalf("after replies: %v, want the floor again", d)
	}
	// A connection closed at the deadline costs the next call go-redis's
	// set-up: eightfold.
	n.rtt.timedOut(true)
	if d := w.of(n); d != 80*time.Millisecond {
		t.Fatalf("after a timeout that closed the connection: %v, want 80ms", d)
	}
	n.rtt.sample(200 * time.Microsecond)
	if d := w.of(n); d != 40*time.Millisecond {
		t.Fatalf("a reply undoes one doubling: %v, want 40ms", d)
	}
	n.rtt.sample(200 * time.Microsecond)
	n.rtt.sample(200 * time.Microsecond)
	for range 50 {
		n.rtt.sample(2 * time.Second) // far beyond the budget
	}
	if d := w.of(n); d != time.Second {
		t.Fatalf("a node beyond the budget: %v, want the cap", d)
	}
	// A far node's backoff stops at the ceiling, or at its own RTO when
	// that is longer.
	far := &node{}
	far.rtt.sample(300 * time.Millisecond) // RTO 900ms
	far.rtt.timedOut(false)
	if d := (Waits{Floor: 10 * time.Millisecond, Cap: 5 * time.Second}).of(far); d != rttBackoffCeil {
		t.Fatalf("a far node's backoff: %v, want the ceiling", d)
	}
	far.rtt.sample(2 * time.Second) // RTO now past the ceiling
	if d := (Waits{Floor: 10 * time.Millisecond, Cap: 5 * time.Second}).of(far); d <= rttBackoffCeil {
		t.Fatalf("a node slower than the ceiling: %v, want its RTO", d)
	}
	if d := (Waits{Fixed: 7 * time.Millisecond, Floor: time.Second, Cap: time.Hour}).of(n); d != 7*time.Millisecond {
		t.Fatalf("fixed: %v", d)
	}
}

// A node 60 ms away keeps a deadline above its round trip through its
// jitter, and one whose latency jumps tenfold gets there within a few
// calls: each timeout doubles it, each late reply teaches it.
func TestRTTFollowsAJump(t *testing.T) {
	n := &node{}
	w := Waits{Floor: 10 * time.Millisecond, Cap: 5 * time.Second}
	for i := range 100 {
		n.rtt.sample(60*time.Millisecond + time.Duration(i%10)*time.Millisecond)
	}
	if d := w.of(n); d < 180*time.Millisecond || d > 250*time.Millisecond {
		t.Fatalf("60–69ms away: deadline %v", d)
	}
	for range 100 {
		n.rtt.sample(time.Millisecond)
	}
	calls := 0
	for rtt := 80 * time.Millisecond; ; calls++ {
		if calls > 5 {
			t.Fatalf("still below 80ms after %d calls: %v", calls, w.of(n))
		}
		if w.of(n) > rtt {
			break
		}
		n.rtt.timedOut(true)
		if calls%2 == 1 {
			n.rtt.sample(rtt) // a late reply, from a client that waits for it
		}
	}
}

// Concurrent samples leave a consistent estimate: the packed word is
// never torn.
func TestRTTConcurrentSamples(t *testing.T) {
	var e rttEstimate
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				e.sample(time.Duration(g+1) * time.Millisecond)
				e.timedOut(g%2 == 0)
			}
		}()
	}
	wg.Wait()
	srtt, rttvar, ok := e.usual()
	if !ok || srtt < time.Millisecond || srtt > 8*time.Millisecond || rttvar > 8*time.Millisecond {
		t.Fatalf("srtt %v rttvar %v", srtt, rttvar)
	}
}

// A node silent past its deadline is shown with the deadline and its usual
// latency, and still matches ErrNoReply.
func TestNoReplyNamesDeadlineAndLatency(t *testing.T) {
	p := &Set{nodes: []*node{{}}}
	err := p.silentFor(0, 50*time.Millisecond)
	if !errors.Is(err, ErrNoReply) || !strings.Contains(err.Error(), "deadline 50ms") || !strings.Contains(err.Error(), "no reply from the node yet") {
		t.Fatalf("before a sample: %v", err)
	}
	p.nodes[0].rtt.sample(150 * time.Millisecond)
	err = p.silentFor(0, 50*time.Millisecond)
	if !errors.Is(err, ErrNoReply) || !strings.Contains(err.Error(), "usually answers in 150ms") {
		t.Fatalf("after a sample: %v", err)
	}
}
