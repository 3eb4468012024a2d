package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Each node's deadline is learned from its latency, as TCP sets its
// retransmission timeout (RFC 6298): a smoothed round trip (SRTT) and its
// variation (RTTVAR), from one sample a round trip (observe), and the
// deadline
//
//	RTO = 3·SRTT + max(G, 4·RTTVAR)
//
// (RFC 6298's SRTT + max(G, 4·RTTVAR) with SRTT taken three times: a call
// may have to set up a connection first, rttSetUp, three round trips where
// one was counted, each as variable as the others)
// doubled on each round in which the node did not answer in time (three
// times when the call's connection was closed at the deadline, as the next
// call pays go-redis's connection set-up), and halved back at each reply
// that came within what the deadline would be without that doubling: a
// reply right after a jump in latency, one that found no warm connection,
// does not bring the deadline back below what the next call needs, as
// resetting it would. The first sample is the node's first contact (the
// handshake and INFO of its identification, a dial included: generous,
// which the samples that follow smooth away). The Client bounds it
// (Waits): a floor that keeps near nodes as tight as ever, and the TTL's
// validity budget.

// Estimator gains and the clock granularity of RFC 6298.
const (
	rttAlpha = 8 // SRTT moves 1/8 of the way to each sample
	rttBeta  = 4 // RTTVAR moves 1/4 of the way to each deviation
	rttK     = 4
	rttG     = time.Millisecond
	// rttSetUp: a call may find no idle connection to its node and pay
	// go-redis's connection set-up first (HELLO, then CLIENT SETINFO), or
	// wait for a flight ahead of it (batch.go): a deadline is three
	// smoothed round trips and their variation, however steady they are.
	// Three alone leave no margin: a node 80 ms away whose call set up a
	// connection answered in 240 ms and a little more.
	rttSetUp = 3
	// rttMaxBackoff is how many times in a row a node's deadline doubles
	// for calls it did not answer in time, and rttBackoffCeil the longest
	// the doubling takes it (a node's own RTO may be longer): enough to
	// reach, after one timeout or two, a node whose latency jumped
	// tenfold or a hundredfold, and little enough that a stalled node
	// does not hold undecided rounds for long.
	rttMaxBackoff  = 8
	rttBackoffCeil = time.Second
	// rttQuick is a reply always in time, whatever the backoff: the
	// lowest floor a Client gives a deadline (DefaultNodeTimeoutMin). A
	// near node's RTO is far below its floor, which the engine's estimate
	// does not know.
	rttQuick = 10 * time.Millisecond
	// rttMaxUs keeps a sample within what the packed estimate holds.
	rttMaxUs = 1<<31 - 1
)

// rttEstimate is one node's SRTT and RTTVAR, in microseconds, packed into
// one word (SRTT in the high half) so that a round reads them with one
// load; zero until the first sample. Replies update it under mu.
type rttEstimate struct {
	packed  atomic.Uint64
	backoff atomic.Int32 // calls in a row not answered in time, up to rttMaxBackoff

	mu sync.Mutex
	// The last sample's call, whose burst the replies of the calls sent
	// before its reply join (observe): when that reply came (gotNs, since
	// rttEpoch), its round trip (lastUs: the longest of the burst's so
	// far), and the estimate before it (before).
	gotNs  int64
	lastUs int64
	before uint64
}

// rttEpoch is what the estimates' times count from, on the monotonic
// clock.
var rttEpoch = time.Now()

// observe takes the reply of a call sent at sent and answered at got, as
// TCP times one segment at a time: a call sent after the last sample's
// reply is a new sample; one sent before it, in flight together with it
// (a batch, batch.go, or calls queued on one link), is the same round
// trip, and joins that sample, which becomes the longest of them. Each
// reply of a burst taken as a sample of its own moved SRTT all the way to
// the last burst's latency and RTTVAR to nothing (a node jittering 50 to
// 500 ms had deadlines from 0.2 s to 5 s); taking only the first reply of
// a burst missed the one that paid a connection's set-up, and the
// estimate fell short of what a call needs after a jump in latency. A
// reply undoes one doubling of the backoff, unless it came after what the
// deadline would be without it (timedOut): it shows the deadline short.
func (e *rttEstimate) observe(sent, got time.Time) {
	from, to := int64(sent.Sub(rttEpoch)), int64(got.Sub(rttEpoch))
	r := min(max(got.Sub(sent).Microseconds(), 1), rttMaxUs)
	e.mu.Lock()
	old := e.packed.Load()
	if old != 0 && from < e.gotNs {
		if r > e.lastUs {
			e.lastUs = r
			e.packed.Store(nextRTT(e.before, r))
		}
	} else {
		e.before, e.lastUs, e.gotNs = old, r, to
		e.packed.Store(nextRTT(old, r))
	}
	e.mu.Unlock()
	e.replied(time.Duration(r)*time.Microsecond, old)
}

// nextRTT is the estimate old moved by one sample of r microseconds
// (RFC 6298, 2.2 and 2.3).
func nextRTT(old uint64, r int64) uint64 {
	if old == 0 {
		return packRTT(r, r/2)
	}
	srtt, rttvar := unpackRTT(old)
	dev := srtt - r
	if dev < 0 {
		dev = -dev
	}
	rttvar += (dev - rttvar) / rttBeta
	srtt += (r - srtt) / rttAlpha
	return packRTT(srtt, rttvar)
}

func unpackRTT(v uint64) (srtt, rttvar int64) { return int64(v >> 32), int64(v & 0xffffffff) }

func packRTT(srtt, rttvar int64) uint64 {
	srtt = min(max(srtt, 1), rttMaxUs)
	rttvar = min(max(rttvar, 0), rttMaxUs)
	return uint64(srtt)<<32 | uint64(rttvar)
}

// sample takes one round trip as a sample of its own, whatever was in
// flight with it (observe does not): the unit tests' estimator.
func (e *rttEstimate) sample(d time.Duration) {
	r := min(max(d.Microseconds(), 1), rttMaxUs)
	e.mu.Lock()
	old := e.packed.Load()
	e.packed.Store(nextRTT(old, r))
	e.mu.Unlock()
	e.replied(d, old)
}

// replied undoes one doubling of the backoff for a reply that took d,
// when d is within the deadline that one fewer doubling gives under the
// estimate before it (was), the one the call was sent under, or within
// rttQuick: a node that answers past it still needs the longer one.
func (e *rttEstimate) replied(d time.Duration, was uint64) {
	rto, ok := rtoOf(was)
	for {
		b := e.backoff.Load()
		if b == 0 {
			return
		}
		if ok && d > max(min(rto<<(b-1), max(rto, rttBackoffCeil)), rttQuick) {
			return
		}
		if e.backoff.CompareAndSwap(b, b-1) {
			return
		}
	}
}

// timedOut notes a call the node did not answer in time: its deadline
// doubles, up to rttMaxBackoff times, until its next reply. reconnect says
// that the call's connection was closed at its deadline (a client that
// bounds its calls: ContextTimeoutEnabled, or the library's bounded copy of
// a plain one), so that the next call pays go-redis's connection set-up,
// HELLO then CLIENT SETINFO, three round trips where one was counted: the
// deadline then grows eightfold, the doubling and the set-up's ×3 rounded
// up to the next doubling.
func (e *rttEstimate) timedOut(reconnect bool) {
	step := int32(1)
	if reconnect {
		step = 3
	}
	for {
		b := e.backoff.Load()
		if b >= rttMaxBackoff || e.backoff.CompareAndSwap(b, min(b+step, rttMaxBackoff)) {
			return
		}
	}
}

// rto is the node's retransmission timeout, without backoff; ok is false
// before the first sample.
func (e *rttEstimate) rto() (time.Duration, bool) { return rtoOf(e.packed.Load()) }

// rtoOf is the retransmission timeout of packed estimate v.
func rtoOf(v uint64) (time.Duration, bool) {
	if v == 0 {
		return 0, false
	}
	srtt, rttvar := unpackRTT(v)
	s := time.Duration(srtt) * time.Microsecond
	return rttSetUp*s + max(rttG, rttK*time.Duration(rttvar)*time.Microsecond), true
}

// usual is the node's smoothed round trip and its variation; ok is false
// before the first sample.
func (e *rttEstimate) usual() (srtt, rttvar time.Duration, ok bool) {
	v := e.packed.Load()
	if v == 0 {
		return 0, 0, false
	}
	s, r := unpackRTT(v)
	return time.Duration(s) * time.Microsecond, time.Duration(r) * time.Microsecond, true
}

// Waits says how long a round waits for each node. Fixed, when set
// (WithNodeTimeout), is every node's deadline. Otherwise each node's is its
// learned RTO, doubled for each call in a row it did not answer in time,
// within [Floor, Cap]; before its first reply, Cap while its first contact
// is under way or to come, and Floor once one ended without a reply (a
// node down is not waited for long).
type Waits struct {
	Fixed      time.Duration
	Floor, Cap time.Duration
}

// set reports whether w says anything: a zero Waits leaves Spec.Wait to
// every node.
func (w Waits) set() bool { return w.Fixed > 0 || w.Cap > 0 }

// of is node n's deadline under w.
func (w Waits) of(n *node) time.Duration {
	if w.Fixed > 0 {
		return w.Fixed
	}
	rto, ok := n.rtt.rto()
	if !ok {
		if n.triedIdentify() {
			// Asked and never answered (a refused connection, a node
			// down): no first contact to wait for.
			return w.Floor
		}
		return w.Cap
	}
	base := max(rto, w.Floor)
	d := min(base<<n.rtt.backoff.Load(), max(base, rttBackoffCeil))
	return min(d, w.Cap)
}

// triedIdentify reports whether a first contact with n has ended, or a
// wait for one ran out.
func (n *node) triedIdentify() bool {
	n.identMu.Lock()
	defer n.identMu.Unlock()
	return !n.identTried.IsZero()
}

// Wait is node i's deadline under w.
func (p *Set) Wait(i int, w Waits) time.Duration { return w.of(p.nodes[i]) }

// MaxWait is the longest of the nodes' deadlines under w: how long a round
// that needs every node may wait.
func (p *Set) MaxWait(w Waits) time.Duration {
	var d time.Duration
	for _, n := range p.nodes {
		d = max(d, w.of(n))
	}
	return d
}

// Latency is node i's smoothed round trip and its variation as learned
// from its replies; ok is false before its first reply.
func (p *Set) Latency(i int) (srtt, rttvar time.Duration, ok bool) {
	return p.nodes[i].rtt.usual()
}

// noReply is a node that did not answer within its deadline: ErrNoReply,
// with the deadline and the node's usual latency, so that a deadline too
// short for the network shows as one.
type noReply struct {
	wait  time.Duration
	srtt  time.Duration
	known bool
}

func (e *noReply) Error() string {
	if !e.known {
		return fmt.Sprintf("%v (deadline %v; no reply from the node yet)", ErrNoReply.Error(), e.wait)
	}
	return fmt.Sprintf("%v (deadline %v; the node usually answers in %v)", ErrNoReply.Error(), e.wait, e.srtt.Round(10*time.Microsecond))
}

func (e *noReply) Unwrap() error { return ErrNoReply }

// silentFor is the error of node i, silent past its deadline wait in a
// round.
func (p *Set) silentFor(i int, wait time.Duration) error {
	n := p.nodes[i]
	if n.lastCause.Load() != nil {
		return n.silence() // what went wrong says more
	}
	srtt, _, ok := n.rtt.usual()
	return &noReply{wait: wait, srtt: srtt, known: ok}
}

// Probe asks node i for its clock in the background, unless a read of it
// is under way: its reply is a sample of the node's latency, and the
// clock reading a fresh one. A caller that sends the node nothing, having
// found its latency too long, calls it so that the estimate still follows
// the node back down.
func (p *Set) Probe(i int) {
	n := p.nodes[i]
	if !n.clock.refreshing.CompareAndSwap(false, true) {
		return
	}
	p.Life.Add(1)
	go func() {
		defer p.Life.End()
		defer n.clock.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), p.timing.IdentifyTimeout)
		defer cancel()
		_ = n.readClock(ctx, p.timing.ClockDrift)
	}()
}
