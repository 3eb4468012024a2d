package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Each node's deadline is learned from its latency, as TCP sets its
// retransmission timeout (RFC 6298): a smoothed round trip (SRTT) and its
// variation (RTTVAR) from every reply, and the deadline
//
//	RTO = max(SRTT + max(G, 4·RTTVAR), 3·SRTT)
//
// (the second term ours: a call may have to set up a connection first,
// rttSetUp)
// doubled on each round in which the node did not answer in time (three
// times when the call's connection was closed at the deadline, as the next
// call pays go-redis's connection set-up), and halved back at each reply: a reply right after a
// jump in latency, one that found no warm connection, does not bring the
// deadline back below what the next call needs, as resetting it would. The first sample is the node's first contact (the handshake and
// INFO of its identification, a dial included: generous, which the
// samples that follow smooth away). The Client bounds it (Waits): a floor
// that keeps near nodes as tight as ever, and the TTL's validity budget.

// Estimator gains and the clock granularity of RFC 6298.
const (
	rttAlpha = 8 // SRTT moves 1/8 of the way to each sample
	rttBeta  = 4 // RTTVAR moves 1/4 of the way to each deviation
	rttK     = 4
	rttG     = time.Millisecond
	// rttSetUp: a call may find no idle connection to its node and pay
	// go-redis's connection set-up first (HELLO, then CLIENT SETINFO), or
	// wait for a flight ahead of it (batch.go): a deadline is at least
	// three smoothed round trips, however steady they are.
	rttSetUp = 3
	// rttMaxBackoff is how many times in a row a node's deadline doubles
	// for calls it did not answer in time, and rttBackoffCeil the longest
	// the doubling takes it (a node's own RTO may be longer): enough to
	// reach, after one timeout or two, a node whose latency jumped
	// tenfold or a hundredfold, and little enough that a stalled node
	// does not hold undecided rounds for long.
	rttMaxBackoff  = 8
	rttBackoffCeil = time.Second
	// rttMaxUs keeps a sample within what the packed estimate holds.
	rttMaxUs = 1<<31 - 1
)

// rttEstimate is one node's SRTT and RTTVAR, in microseconds, packed into
// one word (SRTT in the high half) so that a reply updates both with one
// compare-and-swap and a round reads them with one load; zero until the
// first sample.
type rttEstimate struct {
	packed  atomic.Uint64
	backoff atomic.Int32 // calls in a row not answered in time, up to rttMaxBackoff
}

func unpackRTT(v uint64) (srtt, rttvar int64) { return int64(v >> 32), int64(v & 0xffffffff) }

func packRTT(srtt, rttvar int64) uint64 {
	srtt = min(max(srtt, 1), rttMaxUs)
	rttvar = min(max(rttvar, 0), rttMaxUs)
	return uint64(srtt)<<32 | uint64(rttvar)
}

// sample takes one round trip: the time from sending a call to its reply.
// It undoes one doubling of the backoff.
func (e *rttEstimate) sample(d time.Duration) {
	r := min(max(d.Microseconds(), 1), rttMaxUs)
	for {
		old := e.packed.Load()
		var next uint64
		if old == 0 {
			next = packRTT(r, r/2)
		} else {
			srtt, rttvar := unpackRTT(old)
			dev := srtt - r
			if dev < 0 {
				dev = -dev
			}
			rttvar += (dev - rttvar) / rttBeta
			srtt += (r - srtt) / rttAlpha
			next = packRTT(srtt, rttvar)
		}
		if e.packed.CompareAndSwap(old, next) {
			break
		}
	}
	for {
		b := e.backoff.Load()
		if b == 0 || e.backoff.CompareAndSwap(b, b-1) {
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
func (e *rttEstimate) rto() (time.Duration, bool) {
	v := e.packed.Load()
	if v == 0 {
		return 0, false
	}
	srtt, rttvar := unpackRTT(v)
	s := time.Duration(srtt) * time.Microsecond
	return max(s+max(rttG, rttK*time.Duration(rttvar)*time.Microsecond), rttSetUp*s), true
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
