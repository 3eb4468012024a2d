package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
)

// Waiting rooms (docs/shared.md): a Lock that waits for a key enters the
// key's waiting room on every node, an entry that expires by the node's
// clock, renewed while the Lock waits and taken out when it stops. A
// waiting exclusive Lock's entry holds new shared Locks back; a waiting
// shared Lock's tells the next exclusive Lock to let it in first once it
// has waited through a writer's turn (phase-fair, scripts/wait.lua). A
// waiter that is stopped, cut off or killed stops renewing, and its entry
// is gone within its life: nothing rests on a connection staying up.

// waitSuffix names a key's waiting room: the key followed by it. The
// scripts spell it as a Lua literal (scripts/wait.lua, acquire_fast.lua);
// TestWaitRoomSpelling keeps them equal.
const waitSuffix = ":redlock:wait"

// What a waiting Lock announces (announce.lua's ARGV[2]).
const (
	waitsExclusive = "w" // an Acquire of one key: new shared Locks wait behind it
	waitsAll       = "W" // an AcquireAll: the same, on the keys shared Locks hold
	waitsShared    = "r" // a shared Acquire: it goes first once it waited through a writer's turn
	waitsEntitled  = "R" // a shared Acquire that waited through a writer's turn on some node: on every node
)

// announcer keeps one waiting call's entry in the waiting rooms of its
// Lock's keys: entered at once, renewed every announceEvery, and taken out
// when the call stops waiting (stop). Its calls run on lanes of their own,
// never queued behind the Lock's writes and deletes nor standing for them;
// the removal is retried as a delete is, until the entry would have
// expired anyway.
type announcer struct {
	c    *Client
	l    *Lock
	what string
	life time.Duration // of the entry, from each renewal
	wait time.Duration // each renewal's node deadline
	seq  *engine.Lanes

	mu      sync.Mutex // a leaf but for the engine's Lanes.mu and Life.mu (docs/internals.md)
	timer   *time.Timer
	stopped bool
}

// announce enters l, waiting as what says, in its keys' waiting rooms, and
// renews the entry until stop. ttl is the TTL l asks for, which sets the
// node deadline of its renewals.
func (c *Client) announce(l *Lock, what string, ttl time.Duration) *announcer {
	wait := c.cfg.nodeTimeout(ttl)
	a := &announcer{c: c, l: l, what: what, life: c.cfg.announceLife(wait), wait: wait, seq: engine.NewLanes(c.nodes.Len())}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.send()
	a.timer = time.AfterFunc(announceEvery, a.renew)
	return a
}

// renew renews the entry, on its timer.
func (a *announcer) renew() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	a.send()
	a.timer.Reset(announceEvery)
}

// send sends one renewal, with a.mu held, to the nodes where no call of
// the announcer is still out: a stalled node holds one renewal at most. A
// renewal that misses its deadline is dropped: the next one comes an
// announceEvery later.
func (a *announcer) send() {
	only := a.seq.Unsettled()
	if only != nil {
		for i := range only {
			only[i] = !only[i]
		}
		if engine.Count(only) == 0 {
			return
		}
	}
	a.c.nodes.Launch(context.Background(), a.seq, engine.Spec{Kind: engine.Write,
		Op: announceOp(a.l, a.what, a.life.Milliseconds(), false), Wait: a.wait, TTL: a.life, Only: only})
}

// entitle marks a waiting shared Lock as one that waited through an
// exclusive Lock's turn, on every node from now (a node refused it for an
// exclusive holder): otherwise a node where it waits behind a writer and
// one where the writer waits for it would keep both out.
func (a *announcer) entitle() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped || a.what == waitsEntitled {
		return
	}
	a.what = waitsEntitled
	a.send()
}

// stop ends the renewals and takes the entry out of the rooms, in the
// background; nil does nothing. It must be called, once the call stops
// waiting, before the call returns (within its lifecycle).
func (a *announcer) stop() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	a.stopped = true
	a.timer.Stop()
	d := a.c.cfg.cleanupTimeout
	a.c.nodes.Launch(context.Background(), a.seq, engine.Spec{Kind: engine.Delete,
		Op: announceOp(a.l, a.what, a.life.Milliseconds(), true), Wait: d, CallTimeout: d})
}
