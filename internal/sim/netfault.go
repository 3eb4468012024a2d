package sim

import (
	"slices"
	"time"
)

// The network's faults, each on one link (a client's path to a node) and
// lifted by the same call with its zero value. They act on the link's
// connections that carry commands; a pub/sub connection is never faulted
// (pubSubDial says why).

// Blackhole cuts client's link to node (on) or heals one cut of it: while
// cut, every chunk on the link's connections, both ways, waits (as
// segments that TCP retransmits), and dials wait; when the last cut heals
// they go on in order. Cuts of one link by several faults count apart.
func (n *Network) Blackhole(client, node int, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkOf(client, node)
	if on {
		l.cuts++
	} else if l.cuts > 0 {
		l.cuts--
	}
	if l.blackholed == (l.cuts > 0) {
		return
	}
	l.blackholed = l.cuts > 0
	if l.blackholed {
		l.healed = make(chan struct{})
		for c := range l.conns {
			if c.free {
				continue
			}
			for _, h := range []*half{c.out, c.peer.out} {
				for i := range h.queue {
					if !h.queue[i].held {
						h.queue[i].at = time.Time{}
					}
				}
				n.schedule(h, l)
			}
		}
		return
	}
	close(l.healed)
	for c := range l.conns {
		if c.free {
			continue
		}
		for _, h := range []*half{c.out, c.peer.out} {
			n.release(h, l)
		}
	}
}

// release gives the chunks a blackhole held in h their times again, in
// order, with n.mu held.
func (n *Network) release(h *half, l *link) {
	var last time.Time
	for i := range h.queue {
		ch := &h.queue[i]
		if ch.at.IsZero() {
			ch.at = time.Now().Add(n.latency(l))
		}
		if ch.at.Before(last) {
			ch.at = last
		}
		last = ch.at
	}
	n.schedule(h, l)
}

// Delay adds up to d, uniform, to each chunk written on the link from now
// on (0 lifts it): chunks of its different connections then overtake each
// other.
func (n *Network) Delay(client, node int, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.linkOf(client, node).delay = d
}

// Far makes every link to node far (on): its chunks' one-way delay, both
// ways, and a dial's round trip, drawn from base as NetConfig.Bases
// draws, as when a node's traffic is routed through another region, or
// its zone's link fails over; or lifts one such fault of base (off). The
// longest of the far faults acting on a node wins, and its own base once
// none acts. Chunks already on their way keep their times: a chunk
// written after the heal waits behind them on its connection, in order.
func (n *Network) Far(node int, base time.Duration, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if on {
		n.far[node] = append(n.far[node], base)
		return
	}
	if i := slices.Index(n.far[node], base); i >= 0 {
		n.far[node] = slices.Delete(n.far[node], i, i+1)
	}
}

// DropReplies makes the node's replies on the link vanish (on) or lifts
// one such fault; they arrive again once every one is lifted.
func (n *Network) DropReplies(client, node int, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkOf(client, node)
	if on {
		l.drops++
	} else if l.drops > 0 {
		l.drops--
	}
	l.drop = l.drops > 0
}

// HoldNext holds back the next chunk the client writes on the link for
// hold, and resets its connection under the client resetAfter after the
// write: go-redis sees the reset and sends the command again on another
// connection, and the held chunk reaches the node afterwards, which then
// reads the old connection's end.
func (n *Network) HoldNext(client, node int, hold, resetAfter time.Duration) {
	n.HoldNextMatching(client, node, hold, resetAfter, nil)
}

// HoldNextMatching is HoldNext for the next chunk that match accepts
// (any, when nil).
func (n *Network) HoldNextMatching(client, node int, hold, resetAfter time.Duration, match func([]byte) bool) {
	n.HoldNextThen(client, node, hold, resetAfter, match, nil, 0)
}

// HoldNextThen is HoldNextMatching, and once it caught a chunk, holds the
// next chunk that then(chunk) accepts for thenHold, its connection reset
// too: a command sent after the first, held to land after it.
func (n *Network) HoldNextThen(client, node int, hold, resetAfter time.Duration, match func([]byte) bool, then func([]byte) func([]byte) bool, thenHold time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkOf(client, node)
	l.hold, l.resetAfter, l.holdMatch, l.then, l.thenHold = hold, resetAfter, match, then, thenHold
}

// HoldArmed reports whether a hold of client's link to node waits for its
// chunk: set, and nothing caught yet.
func (n *Network) HoldArmed(client, node int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkOf(client, node).hold > 0
}

// Pending reports how many held chunks are still on their way to node,
// from any client.
func (n *Network) Pending(node int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := 0
	for k, l := range n.links {
		if k[1] == node {
			p += l.pending
		}
	}
	return p
}

// Landed is when the last held chunk to node landed (zero: none yet).
func (n *Network) Landed(node int) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.landed[node]
}

// LinkPending reports how many held chunks of client's link to node are
// still on their way, and when the last one landed.
func (n *Network) LinkPending(client, node int) (int, time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkOf(client, node)
	return l.pending, l.landed
}
