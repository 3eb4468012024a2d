package redlock

import (
	"context"
	"slices"
	"time"
)

// Handing a released lock to the next waiter. A fair handoff through the
// nodes is a release round, a wake-up and an acquire round; when the next
// waiter is an Acquire of the same Client, Release does both rounds in one:
// on each node, in one script (scripts/handover.lua), it takes its own value
// away and writes the waiter's, counted against the waiter's quorum and
// validity as the waiter's own attempt would be. The waiter still acquires
// on the nodes, with its own token, TTL and generation, and its Lock is
// valid only with a quorum of them; a node that another client's waiter
// subscribes to (a subscriber of the key's release channel other than this
// Client) releases instead and announces it, so a Client hands over only
// while nobody else waits and processes stay as fair to each other as
// without it. A waiter offers to be handed the lock while it waits at the
// head of its queue; a Release takes the offer, runs the round, and
// settles it: the Lock is held, or the waiter attempts again at once.

// handOffer is a waiting Acquire's standing offer to be handed the lock.
type handOffer struct {
	l      *Lock
	ttl    time.Duration
	ttlArg any

	// done is made when a Release takes the offer (under waiters.mu) and
	// closed by that Release once the offer is settled.
	done chan struct{}
	got  bool // the waiter's Lock is held; set before done closes
}

// handsOver reports whether this Client's locks may be handed over: the
// handover script neither fences nor guards against restarts.
func (c *Client) handsOver() bool {
	return !c.cfg.fencing && c.cfg.restartGuard == 0
}

// newOffer is l's newOffer to be handed the lock while it waits, or nil when this
// Client does not hand over.
func (c *Client) newOffer(l *Lock, ttl time.Duration, ttlArg any) *handOffer {
	if !c.handsOver() {
		return nil
	}
	return &handOffer{l: l, ttl: ttl, ttlArg: ttlArg}
}

// maxStreak is how many handovers in a row a Client makes while other
// clients wait for the key; then its Release announces the key to all of
// them. A streak buys throughput (a handover is one round, a contest of
// several processes' waiters two or more, with split votes) for a bounded
// unfairness: another process's waiter waits at most that many more turns
// for each contest, and every process's winner gets the same streak.
const maxStreak = 3

// awaitHandover is await with an offer to be handed the lock meanwhile (none
// when off is nil). It reports whether a Release handed it over. Once a
// Release took the offer it waits for the outcome, even when ctx ends:
// the round is bounded by the node deadline, and a Lock handed over to an
// Acquire that has since given up is released again.
func (c *Client) awaitHandover(ctx context.Context, wt *waiter, off *handOffer, ch <-chan struct{}, timeUp <-chan time.Time) (bool, error) {
	if off == nil {
		return false, c.await(ctx, ch, timeUp)
	}
	c.waits.postOffer(wt, off)
	err := c.await(ctx, ch, timeUp)
	taken := c.waits.withdraw(wt)
	if taken == nil {
		return false, err
	}
	<-taken.done
	if !taken.got {
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
	t, _ := c.nodes.sendAndCount(context.Background(), l.seq, l.deleteAll(c.cfg.nodeTimeout(ttl), c.cfg.cleanupTimeout))
	if t.reached() {
		c.waits.released(l.key)
	}
}

// handOver releases l by handing its key to the waiter that posted off, in
// one round on the waiter's lanes, and settles the offer. It returns the
// nodes where l's value is gone, as far as the replies in time tell: taken
// over by the waiter or deleted. Where a node's outcome is unknown, l's
// value may still be there, and l's delete goes there in the background,
// with its usual retries. Unless l's value is gone from a quorum, the caller
// then releases l as usual.
func (c *Client) handOver(ctx context.Context, l *Lock, off *handOffer, subscribed, streak bool) []bool {
	w := off.l
	n := len(c.nodes.nodes)
	// Each node's reply, whenever it comes: where l's value is gone, and
	// where it may not be (no answer, or an error), l's delete follows, with
	// its retries, as a Release's would. The replies also go to seen, for
	// l's own outcome: the round returns at the waiter's, which can come
	// before enough nodes said that l's value is gone.
	seen := make(chan reply, n)
	note := func(r reply) {
		switch {
		case handedAway(r):
			l.noteDeleted(reply{node: r.node, status: statusOK})
		case r.status == statusUnknown:
			only := make([]bool, n)
			only[r.node] = true
			c.deleteOn(l, only)
		}
		seen <- r
	}
	start := c.cfg.clock.Now()
	until := c.cfg.validUntil(start, off.ttl)
	deadline := time.Now().Add(c.cfg.nodeTimeout(off.ttl))
	v := w.nextValue()
	t, _ := c.nodes.sendAndCount(ctx, w.seq, roundSpec{kind: opWrite, op: handoverOp(l.key, v, off.ttlArg, l.prefixArg, subscribed, streak),
		wait: time.Until(deadline), ttl: off.ttl, note: note})
	// Where a call of l may still land (an acquire or restore that has not
	// returned, which could write l's value where the key is absent), l's
	// delete goes too, behind it in l's lane, so that no late write of ours
	// outlives the handover; it leaves the waiter's value alone. A call
	// that has returned by now ran before the waiter could release, so it
	// found the key taken. This runs before the waiter learns the outcome.
	if late := l.seq.unsettled(); late != nil {
		c.deleteOn(l, late)
	}
	c.settleHandover(l.key, off, v, t, until)
	return l.awaitGone(seen, deadline)
}

// settleHandover settles off, whose handover round of the waiter's value v
// for key ended with t: the waiter's Lock is held until until, or the
// round is rolled back. Then it wakes the waiter.
func (c *Client) settleHandover(key string, off *handOffer, v value, t *tally, until time.Time) {
	w := off.l
	got := t.reached() && c.cfg.clock.Now().Before(until)
	if got {
		w.mu.Lock()
		w.until, w.ttl = until, off.ttl
		w.mu.Unlock()
	} else {
		c.rollback(w, v, off.ttl, t)
	}
	// The streak goes on while the waiter got the key with others waiting,
	// and ends with a handover nobody else waited for, or a release.
	inStreak := got && slices.ContainsFunc(t.replies, func(r reply) bool { return r.val == handedInStreak })
	c.waits.handedOver(key, inStreak)
	off.got = got
	close(off.done)
	// Wake the waiter. Where the nodes released and announced the key to
	// other clients' waiters, it is woken by the same announcements as
	// they are, so that it does not always win the contest that follows.
	if got || !slices.ContainsFunc(t.replies, func(r reply) bool { return r.val == releasedHandover }) {
		c.waits.released(key)
	}
}

// awaitGone reads the handover round's replies from seen until deadline,
// and returns the nodes where l's value is gone: handed away, or deleted.
func (l *Lock) awaitGone(seen <-chan reply, deadline time.Time) []bool {
	p := l.client.nodes
	n := len(p.nodes)
	gone := make([]bool, n)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for replied := 0; replied < n && count(gone) < p.quorum; replied++ {
		select {
		case r := <-seen:
			gone[r.node] = handedAway(r)
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
