package waiting

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
)

// Announcer keeps one waiting call's entry in the waiting rooms of its
// Lock's keys: entered at once, renewed every so often, and taken out
// when the call stops waiting (Stop). Its calls run on lanes of their own,
// never queued behind the Lock's writes and deletes nor standing for them;
// the removal is retried as a delete is, until the entry would have
// expired anyway.
type Announcer struct {
	nodes   *engine.Set
	op      func(what string, end bool) engine.Op // the entry's op (announce.lua); with end, its removal
	what    string
	life    time.Duration // of the entry, from each renewal
	wait    time.Duration // each renewal's node deadline
	every   time.Duration // between renewals
	cleanup time.Duration // the removal's node deadline
	seq     *engine.Lanes
	// ctx is the waiting call's context, whose values (not cancellation)
	// the renewals and the removal carry (engine.Set.Launch): the hooks
	// report their node errors as that call's.
	ctx context.Context

	mu      sync.Mutex // a leaf but for the engine's Lanes.mu and Life.mu (docs/internals.md)
	timer   *time.Timer
	stopped bool
}

// Announce enters a waiting call, which waits as what says, in its keys'
// waiting rooms with op, for life from each renewal, and renews the entry
// every every until Stop; wait is each renewal's node deadline, cleanup the
// removal's.
func Announce(ctx context.Context, nodes *engine.Set, op func(what string, end bool) engine.Op, what string, life, wait, every, cleanup time.Duration) *Announcer {
	a := &Announcer{nodes: nodes, op: op, what: what, life: life, wait: wait, every: every, cleanup: cleanup, seq: engine.NewLanes(nodes.Len()), ctx: ctx}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.send()
	a.timer = time.AfterFunc(every, a.renew)
	return a
}

// renew renews the entry, on its timer.
func (a *Announcer) renew() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	a.send()
	a.timer.Reset(a.every)
}

// send sends one renewal, with a.mu held, to the nodes where no call of
// the announcer is still out: a stalled node holds one renewal at most. A
// renewal that misses its deadline is dropped: the next one comes a.every
// later.
func (a *Announcer) send() {
	only := a.seq.Unsettled()
	if only != nil {
		for i := range only {
			only[i] = !only[i]
		}
		if engine.Count(only) == 0 {
			return
		}
	}
	a.nodes.Launch(a.ctx, a.seq, engine.Spec{Effect: engine.Write,
		Op: a.op(a.what, false), Wait: a.wait, TTL: a.life, Only: only})
}

// Entitle announces the call as what from now, on every node, unless it
// does already: a waiting shared Lock that waited through an exclusive
// Lock's turn (a node refused it for an exclusive holder); otherwise a
// node where it waits behind a writer and one where the writer waits for
// it would keep both out. nil does nothing.
func (a *Announcer) Entitle(what string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped || a.what == what {
		return
	}
	a.what = what
	a.send()
}

// Stop ends the renewals and takes the entry out of the rooms, in the
// background; nil does nothing. It must be called, once the call stops
// waiting, before the call returns (within its lifecycle).
func (a *Announcer) Stop() {
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
	a.nodes.Launch(a.ctx, a.seq, engine.Spec{Effect: engine.Delete,
		Op: a.op(a.what, true), Wait: a.cleanup, CallTimeout: a.cleanup})
}
