package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/waiting"
)

// prologue is the common start of Extend and Release: the lock and the
// context must be usable.
func (l *Lock) prologue(op string, ctx context.Context) (*Client, error) {
	if l == nil || l.client == nil {
		return nil, invalid("%s of a nil lock", op)
	}
	if ctx == nil {
		return l.client, invalid("%s of %q: nil context", op, showKey(l.key))
	}
	return l.client, nil
}

// Extend resets the lock's expiry to ttl from now on the nodes that still
// hold its value and, with a quorum and validity left, moves Until to start +
// ttl - drift. Otherwise its error matches ErrNotHeld (and ctx.Err() when ctx
// ended first), and Until can only move earlier. It never takes the key from
// another holder, and fails once Release has started (docs/algorithm.md).
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil || l.client == nil || !l.client.obs.on {
		return l.extend(ctx, ttl)
	}
	start := time.Now()
	err := l.extend(ctx, ttl)
	l.client.obs.done(ctx, "extend", l.key, start, err)
	return err
}

func (l *Lock) extend(ctx context.Context, ttl time.Duration) error {
	c, err := l.prologue("extend", ctx)
	if err != nil {
		return err
	}
	ttl, err = c.cfg.checkTTL(ttl)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	select {
	case l.extending <- struct{}{}:
		defer func() { <-l.extending }()
	case <-ctx.Done():
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), ctx.Err())
	}
	defer l.untilMoved() // lease.go: KeepAlive's loss timer follows Until
	if err := c.nodes.Life.BeginCall(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	defer c.nodes.Life.EndCall()

	start := c.cfg.clock.Now()
	if err := l.extendable(start); err != nil {
		return err
	}
	return l.extendOnNodes(ctx, c, start, ttl)
}

// extendable reports why an extension that starts at start cannot be
// made: the lock is being released, or has expired (then it is lost).
func (l *Lock) extendable(start time.Time) error {
	l.mu.Lock()
	releasing, until := l.releasing, l.until
	l.mu.Unlock()
	if releasing {
		return fmt.Errorf("%w: %q: released", ErrNotHeld, showKey(l.key))
	}
	if !start.Before(until) {
		l.mu.Lock()
		l.lost = true
		l.mu.Unlock()
		return fmt.Errorf("%w: %q: expired at %s", ErrNotHeld, showKey(l.key), until.Format(time.StampMicro))
	}
	return nil
}

// extendOnNodes is an extension's round, started at start, and its
// outcome: Until moves to start + ttl - drift on success, and only ever
// earlier on a failure.
func (l *Lock) extendOnNodes(ctx context.Context, c *Client, start time.Time, ttl time.Duration) error {
	v := l.nextValue(ttl)
	newUntil := c.cfg.validUntil(start, ttl)
	waits := c.cfg.waits(ttl)
	if ctx.Value(renewalKey{}) != nil && waits.Fixed == 0 {
		// A KeepAlive renewal waits for each node the TTL's budget up to
		// renewWait (within the lease's deadline), whatever its learned
		// deadline: nobody waits on a renewal but the lease, whose lock
		// is at stake, and the round still returns as soon as a quorum
		// answers. A deadline learned before a node's latency jumped
		// failed the renewal, and its retry, which paid a new
		// connection's set-up (the timed-out call closed its own), was
		// left too little of the lease. Not the whole budget: each write
		// carries its deadline, and a Release after it leaves a refusal
		// on the nodes until then, seconds for a long TTL.
		waits.Floor = max(waits.Floor, min(waits.Cap, renewWait))
	}
	op := l.kind.extendOp(l, v, ttl.Milliseconds(), l.Fence(), c.fenceHorizon(l))
	t, err := c.nodes.SendAndCount(ctx, l.seq, engine.WriteRound(op, waits, ttl))
	ok := err == nil && t.Reached() && c.cfg.clock.Now().Before(newUntil)

	l.mu.Lock()
	defer l.mu.Unlock()
	if ok && !l.releasing {
		l.until, l.ttl = newUntil, ttl
		// The launch happens under l.mu, before any Release can queue its
		// deletes: on each node the restore runs first and is deleted.
		// Only nodes that said the key is absent: a node not waited for is
		// restored by a later Extend that reads its answer.
		absent := t.Where(func(r engine.Reply) bool { return errors.Is(r.Err, ErrKeyAbsent) })
		c.nodes.Launch(ctx, l.seq, engine.Spec{Effect: engine.Write, Op: l.kind.restoreOp(l, v, ttl.Milliseconds()),
			Nodes: waits, TTL: ttl, Only: absent})
		return nil
	}
	if newUntil.Before(l.until) {
		l.until = newUntil
	}
	if l.releasing {
		return fmt.Errorf("%w: %q: released during the extension", ErrNotHeld, showKey(l.key))
	}
	qe := newQuorumError("extend", l.key, ErrNotHeld, err, t, c.nodes)
	if qe.refusedQuorum(c.nodes.Len()) {
		l.lost = true
	}
	return qe
}

// Release deletes the key on every node where it holds a value this Lock
// wrote, never another holder's, and returns nil once a quorum confirmed; the
// other nodes are cleaned up in the background. It ignores ctx's
// cancellation, so that a deferred Release still frees the lock, and waits at
// most the cleanup timeout (or ctx's deadline). Its error matches ErrNotHeld
// when the lock was no longer held, ErrReleaseUnconfirmed when nodes did not
// answer in time. It ends the Lock's KeepAlive contexts first. Only the first
// call sends; later ones return its outcome (docs/algorithm.md).
func (l *Lock) Release(ctx context.Context) error {
	if l == nil || l.client == nil || !l.client.obs.on {
		return l.releaseCall(ctx)
	}
	start := time.Now()
	err := l.releaseCall(ctx)
	l.client.obs.done(ctx, "release", l.key, start, err)
	return err
}

func (l *Lock) releaseCall(ctx context.Context) error {
	c, err := l.prologue("release", ctx)
	if c == nil {
		return err
	}
	if err != nil {
		ctx = context.Background()
	}
	l.mu.Lock()
	if l.releaseDone == nil && l.holds > 1 {
		l.holds-- // the owner still holds it through another Acquire
		l.mu.Unlock()
		return err
	}
	if done := l.releaseDone; done != nil {
		l.mu.Unlock()
		<-done
		return errors.Join(err, l.releaseOutcome())
	}
	l.releaseDone = make(chan struct{})
	l.releasing = true
	l.deleted = make([]bool, c.nodes.Len())
	ttl := l.ttl
	held := !l.lost && c.cfg.clock.Now().Before(l.until)
	l.mu.Unlock()
	l.stopLease(ErrReleased) // lease.go: no renewal is scheduled from now on
	c.owners.forget(l)

	outcome := l.release(ctx, c, ttl, held)
	l.mu.Lock()
	l.releaseErr = outcome
	l.mu.Unlock()
	close(l.releaseDone)
	return errors.Join(err, outcome)
}

// release is the first Release's round and its outcome; held says whether
// the lock was still held, as far as this Lock knows, when Release began.
func (l *Lock) release(ctx context.Context, c *Client, ttl time.Duration, held bool) error {
	c.nodes.Life.BeginRelease()
	defer c.nodes.Life.EndCall()
	// The next waiter of this Client, if it offers, is handed the key in
	// the same round (handover.go).
	var gone []bool
	if c.handsOver(l) && l.kind.handsOver() {
		if off, settled, subscribed, streak := c.waits.ClaimOffer(l.key); off != nil {
			if gone = c.handOver(ctx, l, off, settled, subscribed, streak); engine.Count(gone) >= c.nodes.Quorum {
				return nil
			}
		}
	}
	start := time.Now()
	rr := &l.rel // in the Lock's own allocation: only the first Release runs
	rr.l, rr.gone = l, gone
	spec := l.deleteAll(c.nodeTimeout(ttl), c.cfg.cleanupTimeout)
	spec.Note = rr.note
	rr.t, _ = c.nodes.SendAndCount(ctx, l.seq, spec)
	if !rr.decided() {
		// The nodes that did not answer in time are asked again in the
		// background; their answers count until the bound.
		bound := start.Add(c.cfg.cleanupTimeout)
		if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && dl.Before(bound) {
			bound = dl
		}
		rr.await(bound)
	}
	if rr.t.Reached() {
		l.kind.released(c, l)
		return nil
	}
	return releaseError(c, l.key, rr.t, held)
}

// releaseError is the outcome of a Release that no quorum confirmed in
// time. The lock was not held when its validity had ended (or it was found
// lost) before Release began, or when so many nodes refused that no quorum
// could confirm it; otherwise nodes that did not answer leave it
// unconfirmed, and it may still be held on them until it expires.
func releaseError(c *Client, key string, t *engine.Tally, held bool) error {
	qe := newQuorumError("release", key, ErrReleaseUnconfirmed, nil, t, c.nodes)
	if !held || qe.refusedQuorum(c.nodes.Len()) {
		qe.sentinel = ErrNotHeld
	}
	return qe
}

// releaseRound is a Release's delete round and the answers that came after
// it returned. The round stops waiting once a quorum of confirmations is out
// of reach, counting as refusals the nodes where a handover has just put the
// waiter's value; once those count as confirmations, the answers the round
// did not wait for decide the outcome.
type releaseRound struct {
	l    *Lock
	t    *engine.Tally // the round's replies, read and changed by Release alone
	gone []bool        // nodes where the handover took l's value away
	// first holds each node's first reply that was not a confirmation, Node
	// -1 until one comes; sig is signalled by a refusal. Both under l.mu.
	// Within Release's wait a node's first reply is its first try's: a try
	// is given up on and sent again only after the cleanup timeout.
	first []engine.Reply
	sig   chan struct{}
}

// note takes in a reply of the round, of the first try or a retry,
// whenever it comes.
func (rr *releaseRound) note(r engine.Reply) {
	l := rr.l
	if r.Status == engine.OK {
		l.noteDeleted(r)
		return
	}
	l.mu.Lock()
	if rr.first == nil {
		rr.first = make([]engine.Reply, len(l.deleted))
		for i := range rr.first {
			rr.first[i].Node = -1
		}
	}
	if rr.first[r.Node].Node < 0 {
		rr.first[r.Node] = r
	}
	sig := rr.sig
	l.mu.Unlock()
	if r.Status == engine.Refused {
		waiting.Wake(sig)
	}
}

// decided counts into the round's tally what came since it returned: the
// nodes where l's value is gone (deleted since, or by the handover)
// confirm, and a node the round did not wait for, or that answered too late,
// counts its first reply. It reports whether the outcome is decided: a
// quorum confirmed, or so many refused that none can.
func (rr *releaseRound) decided() bool {
	l, t := rr.l, rr.t
	l.mu.Lock()
	for i, r := range t.Replies {
		switch {
		case r.Status == engine.OK:
		case l.deleted[i] || i < len(rr.gone) && rr.gone[i]:
			t.Replies[i] = engine.Reply{Node: i, Status: engine.OK}
			t.Confirmed++
		case r.Status == engine.Unknown && rr.first != nil && rr.first[i].Node >= 0 &&
			(r.Err == engine.ErrNotNeeded || rr.first[i].Status == engine.Refused):
			t.Replies[i] = rr.first[i]
		}
	}
	l.mu.Unlock()
	if t.Reached() {
		return true
	}
	qe := newQuorumError("release", l.key, ErrNotHeld, nil, t, l.client.nodes)
	return qe.refusedQuorum(l.client.nodes.Len())
}

// await waits until the outcome is decided or bound passes; the nodes still
// silent then did not answer in time.
func (rr *releaseRound) await(bound time.Time) {
	l := rr.l
	l.mu.Lock()
	sig := make(chan struct{}, 1)
	l.deletedSig, rr.sig = sig, sig
	l.mu.Unlock()
	timer := time.NewTimer(time.Until(bound))
	defer timer.Stop()
	for !rr.decided() {
		select {
		case <-sig:
		case <-timer.C:
			if !rr.decided() {
				rr.silent()
			}
			return
		}
	}
}

// silent marks the nodes the round did not wait for, and that have not
// answered since, as not answering in time: Release did wait for them.
func (rr *releaseRound) silent() {
	for i, r := range rr.t.Replies {
		if r.Status == engine.Unknown && r.Err == engine.ErrNotNeeded {
			rr.t.Replies[i].Err = ErrNoReply
		}
	}
}

// noteDeleted records a node's confirmed delete, whenever it comes.
func (l *Lock) noteDeleted(r engine.Reply) {
	if l.client.nodes.Vote(r).Status != engine.OK {
		return
	}
	l.mu.Lock()
	l.deleted[r.Node] = true
	sig := l.deletedSig
	l.mu.Unlock()
	waiting.Wake(sig)
}

// releaseOutcome is what a later Release reports.
func (l *Lock) releaseOutcome() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.releaseErr == nil {
		return nil
	}
	if engine.Count(l.deleted) >= l.client.nodes.Quorum {
		return nil
	}
	return l.releaseErr
}

// deleteOn deletes l's key, any generation of it, in the background on the
// nodes in only, with a Release's retries and bookkeeping.
func (c *Client) deleteOn(ctx context.Context, l *Lock, only []bool) {
	spec := l.deleteAll(c.cfg.cleanupTimeout, c.cfg.cleanupTimeout)
	spec.Only, spec.Note = only, l.noteDeleted
	c.nodes.Launch(ctx, l.seq, spec)
}

// deleteAll is a round that deletes l's key, any generation of it, and
// keeps every write l has sent from landing after it (deleteOp). l writes
// nothing more: its release has started.
func (l *Lock) deleteAll(wait, CallTimeout time.Duration) engine.Spec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return engine.Spec{Effect: engine.Delete, Op: l.kind.deleteOp(l, l.anyValue(), 0, l.gen), Wait: wait, CallTimeout: CallTimeout}
}
