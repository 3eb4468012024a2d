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
// |SRTT − R| and SRTT an eighth of the way to R; RTO = 3·SRTT + max(G,
// 4·RTTVAR) (three round trips: a call may set up a connection first).
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
	if rto, _ := e.rto(); rto != 500*time.Millisecond {
		t.Fatalf("first RTO %v, want 500ms", rto)
	}
	e.sample(20 * time.Millisecond)
	srtt, rttvar, _ = e.usual()
	// RTTVAR = 3/4·50 + 1/4·80 = 57.5; SRTT = 7/8·100 + 1/8·20 = 90.
	if srtt != 90*time.Millisecond || rttvar != 57500*time.Microsecond {
		t.Fatalf("second sample: srtt %v rttvar %v, want 90ms 57.5ms", srtt, rttvar)
	}
	// Steady samples converge on the round trip, and the variation on 0:
	// RTO falls to three round trips (a call may set up a connection
	// first) and the clock granularity.
	for range 200 {
		e.sample(20 * time.Millisecond)
	}
	srtt, rttvar, _ = e.usual()
	rto, _ := e.rto()
	if srtt < 20*time.Millisecond || srtt > 21*time.Millisecond || rttvar > 100*time.Microsecond || rto != 3*srtt+rttG {
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
	far.rtt.sample(150 * time.Millisecond) // RTO 750ms
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

// Calls in flight together are one round trip, whose sample is the
// longest of their replies: a burst of twenty sent within a millisecond
// and answered 400 ms later, as a batch or a queue on one link answers
// them, moves a 50 ms node's SRTT an eighth of the way, and its RTTVAR
// up, not SRTT all the way and RTTVAR to nothing. A call of the burst that
// paid a connection's set-up, answered after the first, makes the sample
// its own. A call sent after the sample's reply is a sample again.
func TestRTTOneSampleARoundTrip(t *testing.T) {
	var e rttEstimate
	at := time.Now()
	for range 100 {
		e.observe(at, at.Add(50*time.Millisecond))
		at = at.Add(60 * time.Millisecond)
	}
	for i := range 20 {
		d := time.Duration(i) * 50 * time.Microsecond
		e.observe(at.Add(d), at.Add(400*time.Millisecond+d))
	}
	srtt, rttvar, _ := e.usual()
	if srtt < 90*time.Millisecond || srtt > 100*time.Millisecond || rttvar < 80*time.Millisecond {
		t.Fatalf("after a burst: srtt %v rttvar %v; want one sample's move, 50 → ~94 ms, rttvar ~88 ms", srtt, rttvar)
	}
	at = at.Add(time.Second)
	e.observe(at, at.Add(50*time.Millisecond))
	s1, _, _ := e.usual()
	if s1 >= srtt {
		t.Fatalf("a call sent after the burst's replies: srtt %v, was %v; want it taken", s1, srtt)
	}
	// In flight with that one, a call that set up a connection first.
	e.observe(at.Add(time.Millisecond), at.Add(160*time.Millisecond))
	s2, _, _ := e.usual()
	if want := s1 + (160*time.Millisecond-s1)/8 - 50*time.Microsecond; s2 < want {
		t.Fatalf("the burst's longest reply: srtt %v, want the 50ms sample replaced by 160ms: about %v", s2, want)
	}
	// And one more of the burst, shorter: nothing changes.
	e.observe(at.Add(2*time.Millisecond), at.Add(55*time.Millisecond))
	if s3, _, _ := e.usual(); s3 != s2 {
		t.Fatalf("a shorter reply of the burst moved srtt %v → %v", s2, s3)
	}
}

// A reply undoes a doubling of the backoff only if it came within the
// deadline one fewer doubling gives: one later than that shows the
// deadline short still.
func TestRTTLateReplyKeepsBackoff(t *testing.T) {
	var e rttEstimate
	at := time.Now()
	for range 50 {
		e.observe(at, at.Add(20*time.Millisecond)) // RTO about 61 ms
		at = at.Add(30 * time.Millisecond)
	}
	e.timedOut(false)
	e.timedOut(false)
	e.observe(at, at.Add(500*time.Millisecond))
	if b := e.backoff.Load(); b != 2 {
		t.Fatalf("backoff %d after a reply past the deadline, want 2", b)
	}
	at = at.Add(time.Second)
	e.observe(at, at.Add(20*time.Millisecond))
	if b := e.backoff.Load(); b != 1 {
		t.Fatalf("backoff %d after a reply in time, want 1", b)
	}
}
