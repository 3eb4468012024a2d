package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/waiting"
)

// Handover (docs/waiting.md): a Release hands the key to the next waiting
// Acquire of the same Client in one round (scripts/handover.lua), which
// counts as the waiter's own attempt. The waiter posts an offer while it
// waits at the head of its queue; a Release takes the offer, runs the round,
// and settles it: the waiter's Lock is held, or it attempts again at once.

// handOffer is a waiting Acquire's standing offer to be handed the lock.
type handOffer struct {
	l      *Lock
	ttl    time.Duration
	ttlArg any

	got bool // the waiter's Lock is held; set before the Release that took the offer closes its settled channel
}

// handsOver reports whether this Client's locks may be handed over: the
// handover script neither fences nor guards against restarts.
func (c *Client) handsOver(l *Lock) bool {
	return !c.cfg.fencing && !l.fenced() && c.cfg.restartGuard == 0
}

// newOffer makes the offer a waiting Acquire of l for ttl posts, so that a
// Release of this Client may hand it the key; nil when this Client does not
// hand over (fencing or the restart guard is on).
func (c *Client) newOffer(l *Lock, ttl time.Duration, ttlArg any) *handOffer {
	if !c.handsOver(l) {
		return nil
	}
	return &handOffer{l: l, ttl: ttl, ttlArg: ttlArg}
}

// waitHandover is await with an offer to be handed the lock meanwhile (none
// when off is nil). It reports whether a Release handed it over. Once a
// Release took the offer it waits for the outcome, even when ctx ends:
// the round is bounded by the node deadline, and a Lock handed over to an
// Acquire that has since given up is released again.
func (c *Client) waitHandover(ctx context.Context, wt *waiting.Waiter[handOffer], off *handOffer, ch <-chan struct{}, timeUp <-chan time.Time) (bool, error) {
	if off == nil {
		return false, c.waitFor(ctx, ch, timeUp)
	}
	c.waits.PostOffer(wt, off)
	err := c.waitFor(ctx, ch, timeUp)
	settled := c.waits.Withdraw(wt)
	if settled == nil {
		return false, err
	}
	<-settled
	if !off.got {
		return false, err
	}
	if err != nil {
		off.l.discard(c)
		return false, err
	}
	return true, nil
}

// discard deletes a Lock handed over to an Acquire that gave up meanwhile
// (its context ended, or Close began), which will not return it. It runs
// within that Acquire's lifecycle, so also while the Client closes; a
// delete without a definite answer is retried as a Release's is.
func (l *Lock) discard(c *Client) {
	l.mu.Lock()
	l.releasing = true
	ttl := l.ttl
	l.mu.Unlock()
	t, _ := c.nodes.SendAndCount(context.Background(), l.seq, l.deleteAll(c.nodeTimeout(ttl), c.cfg.cleanupTimeout))
	if t.Reached() {
		c.waits.Released(l.key)
	}
}

// handOver releases l by handing its key to the waiter that posted off, in
// one round on the waiter's lanes, and settles the offer. It returns the
// nodes where l's value is gone, as far as the replies in time tell: taken
// over by the waiter or deleted. Where a node's outcome is unknown, l's
// value may still be there, and l's delete goes there in the background,
// with its usual retries. Unless l's value is gone from a quorum, the caller
// then releases l as usual.
func (c *Client) handOver(ctx context.Context, l *Lock, off *handOffer, settled chan<- struct{}, subscribed, streak bool) []bool {
	w := off.l
	n := c.nodes.Len()
	// Each node's reply, whenever it comes: where l's value is gone, and
	// where it may not be (no answer, or an error), l's delete follows, with
	// its retries, as a Release's would. The replies also go to seen, for
	// l's own outcome: the round returns at the waiter's, which can come
	// before enough nodes said that l's value is gone.
	seen := make(chan engine.Reply, n)
	note := func(r engine.Reply) {
		switch {
		case script.HandedAway(r):
			l.noteDeleted(engine.Reply{Node: r.Node, Status: engine.OK})
		case r.Status == engine.Unknown || errors.Is(r.Err, ErrLate):
			// No answer, or the handover reached the node past its
			// deadline and changed nothing: l's value may be there.
			only := make([]bool, n)
			only[r.Node] = true
			c.deleteOn(ctx, l, only)
		}
		seen <- r
	}
	start := c.cfg.clock.Now()
	until := c.cfg.validUntil(start, off.ttl)
	deadline := time.Now().Add(c.nodeTimeout(off.ttl))
	v := w.nextValue(off.ttl)
	l.mu.Lock()
	gone := l.gen
	l.mu.Unlock()
	t, _ := c.nodes.SendAndCount(ctx, w.seq, engine.Spec{Effect: engine.Write, Op: handoverOp(w, l, v, off.ttlArg, gone, subscribed, streak),
		Wait: time.Until(deadline), TTL: off.ttl, Note: note})
	// Where a call of l may still land (an acquire or restore that has not
	// returned, which could write l's value where the key is absent), l's
	// delete goes too, behind it in l's lane, so that no late write of ours
	// outlives the handover; it leaves the waiter's value alone. A call
	// that has returned by now ran before the waiter could release, so it
	// found the key taken. This runs before the waiter learns the outcome.
	if late := l.seq.Unsettled(); late != nil {
		c.deleteOn(ctx, l, late)
	}
	c.settleHandover(ctx, l.key, off, settled, v, t, until)
	return l.collectGone(seen, deadline)
}

// settleHandover settles off, whose handover round of the waiter's value v
// for key ended with t: the waiter's Lock is held until until, or the
// round is rolled back; then it closes settled and wakes the waiter.
func (c *Client) settleHandover(ctx context.Context, key string, off *handOffer, settled chan<- struct{}, v script.Value, t *engine.Tally, until time.Time) {
	w := off.l
	got := t.Reached() && c.cfg.clock.Now().Before(until)
	if got {
		w.mu.Lock()
		w.until, w.ttl = until, off.ttl
		w.mu.Unlock()
	} else {
		c.rollback(ctx, w, v, off.ttl, t)
	}
	// The streak goes on while the waiter got the key with others waiting,
	// and ends with a handover nobody else waited for, or a release.
	inStreak := got && slices.ContainsFunc(t.Replies, func(r engine.Reply) bool { return r.Val == script.HandedInStreak })
	c.waits.HandedOver(key, inStreak)
	off.got = got
	close(settled)
	// Wake the waiter. Where the nodes released and announced the key to
	// other clients' waiters, it is woken by the same announcements as
	// they are, so that it does not always win the contest that follows.
	if got || !slices.ContainsFunc(t.Replies, func(r engine.Reply) bool { return r.Val == script.ReleasedHandover }) {
		c.waits.Released(key)
	}
}

// collectGone reads the handover round's replies from seen until deadline,
// and returns the nodes where l's value is gone: handed away, or deleted.
func (l *Lock) collectGone(seen <-chan engine.Reply, deadline time.Time) []bool {
	p := l.client.nodes
	n := p.Len()
	gone := make([]bool, n)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for replied := 0; replied < n && engine.Count(gone) < p.Quorum; replied++ {
		select {
		case r := <-seen:
			gone[r.Node] = script.HandedAway(r)
		case <-timer.C:
			return l.orDeleted(gone)
		}
	}
	return l.orDeleted(gone)
}

// orDeleted adds to gone the nodes where l's delete was confirmed.
func (l *Lock) orDeleted(gone []bool) []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, d := range l.deleted {
		gone[i] = gone[i] || d
	}
	return gone
}
