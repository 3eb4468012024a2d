package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
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

// Extend resets the lock's expiry to ttl from now on every node that still
// holds our value. It never creates the key where it is absent, unless a
// quorum of other nodes confirmed our value in the same Extend (then it puts
// the key back on the nodes that lost it, never taking it from another
// holder), and never once Release has started. It succeeds only with a
// quorum and validity left, and then moves Until to start + ttl - drift.
// Extensions of one Lock run one at a time.
//
// A failed Extend may still have reached some nodes with the new TTL: it
// moves Until to the earlier of its old value and what the new TTL allows,
// so Until is never later than any expiry our calls may have set. It fails
// with an error matching ErrNotHeld when the lock was released, has expired,
// or a quorum did not confirm our value; that error also matches ctx.Err()
// when ctx ended first.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil || l.client == nil || !l.client.obs.on {
		return l.extend(ctx, ttl)
	}
	start := time.Now()
	err := l.extend(ctx, ttl)
	l.client.obs.done("extend", l.key, start, err)
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
	if err := c.nodes.life.begin(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	defer c.nodes.life.end()

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
	v := l.nextValue()
	newUntil := c.cfg.validUntil(start, ttl)
	timeout := c.cfg.nodeTimeout(ttl)
	op := extendOp(l.key, v, ttl.Milliseconds())
	if c.cfg.fencing {
		op = extendFencedOp(l.key, l.fenceKey, v, ttl.Milliseconds(), l.Fence(), c.cfg.horizonArg)
	}
	t, err := c.nodes.sendAndCount(ctx, l.seq, writeRound(op, timeout, ttl))
	ok := err == nil && t.reached() && c.cfg.clock.Now().Before(newUntil)

	l.mu.Lock()
	defer l.mu.Unlock()
	if ok && !l.releasing {
		l.until, l.ttl = newUntil, ttl
		// The launch happens under l.mu, before any Release can queue its
		// deletes: on each node the restore runs first and is deleted.
		// Only nodes that said the key is absent: a node not waited for is
		// restored by a later Extend that reads its answer.
		absent := t.where(func(r reply) bool { return errors.Is(r.err, ErrKeyAbsent) })
		c.nodes.launch(ctx, l.seq, roundSpec{kind: opWrite, op: restoreOp(l.key, v, ttl.Milliseconds()),
			wait: timeout, ttl: ttl, only: absent})
		return nil
	}
	if newUntil.Before(l.until) {
		l.until = newUntil
	}
	if l.releasing {
		return fmt.Errorf("%w: %q: released during the extension", ErrNotHeld, showKey(l.key))
	}
	qe := newQuorumError("extend", l.key, ErrNotHeld, err, t, c.nodes)
	if qe.refusedQuorum(len(c.nodes.nodes)) {
		l.lost = true
	}
	return qe
}

// Release deletes the key on every node where it still holds a value this
// Lock wrote, and never where another holder's value is (nor another Lock's
// of the same owner). It returns once a quorum has confirmed; the other
// nodes are cleaned up in the background, and a node that gives no definite
// answer is asked again, with backoff, until it does or the key would have
// expired. Release ignores the cancellation of ctx (a deferred Release after
// a timeout must still free the lock): it waits for the nodes that did not
// answer within the per-node deadline, as they are asked again, until a
// quorum confirmed, or at most the cleanup timeout (WithCleanupTimeout,
// DefaultCleanupTimeout) from its start, or until ctx's deadline if ctx
// is still live and its deadline is earlier.
//
// Release returns nil when a quorum confirmed the delete. Otherwise the error
// matches ErrNotHeld, and its *NodeError entries tell per node whether the
// key had expired (ErrKeyAbsent), belonged to another holder
// (ErrHeldByOther), or did not answer (ErrNoReply). Release stops the lock
// for good: no Extend succeeds after it, and only the first call sends;
// later (and concurrent) calls wait for it and return nil once a quorum has
// confirmed the delete, by then or in the background since, and the first
// call's error otherwise. With a nil ctx the lock is released all the same
// and the error matches ErrInvalidArgument. A Lock its owner acquired more
// than once through this Client (WithOwner) is released on the nodes by the
// last of its Releases; the earlier ones send nothing and return nil. The
// Release that sends ends the lock's KeepAlive contexts (cause ErrReleased)
// before it sends anything.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil || l.client == nil || !l.client.obs.on {
		return l.releaseCall(ctx)
	}
	start := time.Now()
	err := l.releaseCall(ctx)
	l.client.obs.done("release", l.key, start, err)
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
	l.deleted = make([]bool, len(c.nodes.nodes))
	ttl := l.ttl
	l.mu.Unlock()
	l.stopLease(ErrReleased) // lease.go: no renewal is scheduled from now on
	c.owners.forget(l)

	outcome := l.release(ctx, c, ttl)
	l.mu.Lock()
	l.releaseErr = outcome
	l.mu.Unlock()
	close(l.releaseDone)
	return errors.Join(err, outcome)
}

func (l *Lock) release(ctx context.Context, c *Client, ttl time.Duration) error {
	c.nodes.life.beginRelease()
	defer c.nodes.life.end()
	// The next waiter of this Client, if it offers, is handed the key in
	// the same round (handover.go).
	var gone []bool
	if c.handsOver() {
		if off, subscribed, streak := c.waits.takeOffer(l.key); off != nil {
			if gone = c.handOver(ctx, l, off, subscribed, streak); count(gone) >= c.nodes.quorum {
				return nil
			}
		}
	}
	start := time.Now()
	spec := l.deleteAll(c.cfg.nodeTimeout(ttl), c.cfg.cleanupTimeout)
	spec.note = l.noteDeleted
	t, _ := c.nodes.sendAndCount(ctx, l.seq, spec)
	if !l.confirmed(t, gone) {
		// The nodes that did not answer in time are asked again in the
		// background; their confirmations count until the bound.
		bound := start.Add(c.cfg.cleanupTimeout)
		if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && dl.Before(bound) {
			bound = dl
		}
		l.mu.Lock()
		sig := make(chan struct{}, 1)
		l.deletedSig = sig
		l.mu.Unlock()
		timer := time.NewTimer(time.Until(bound))
	wait:
		for !l.confirmed(t, gone) {
			select {
			case <-sig:
			case <-timer.C:
				l.confirmed(t, gone)
				break wait
			}
		}
		timer.Stop()
	}
	if t.reached() {
		c.waits.released(l.key)
		return nil
	}
	return newQuorumError("release", l.key, ErrNotHeld, nil, t, c.nodes)
}

// confirmed counts into t the nodes where l's value is gone, as the round's
// replies, the handover round (gone) and the confirmations of its deletes
// that came since tell, and reports whether they are a quorum.
func (l *Lock) confirmed(t *tally, gone []bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range t.replies {
		if t.replies[i].status != statusOK && (l.deleted[i] || i < len(gone) && gone[i]) {
			t.replies[i] = reply{node: i, status: statusOK}
			t.ok++
		}
	}
	return t.reached()
}

// noteDeleted records a node's confirmed delete, whenever it comes.
func (l *Lock) noteDeleted(r reply) {
	if l.client.nodes.vote(r).status != statusOK {
		return
	}
	l.mu.Lock()
	l.deleted[r.node] = true
	sig := l.deletedSig
	l.mu.Unlock()
	if sig != nil {
		select {
		case sig <- struct{}{}:
		default:
		}
	}
}

// releaseOutcome is what a later Release reports.
func (l *Lock) releaseOutcome() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.releaseErr == nil {
		return nil
	}
	if count(l.deleted) >= l.client.nodes.quorum {
		return nil
	}
	return l.releaseErr
}

// deleteOn deletes l's key, any generation of it, in the background on the
// nodes in only, with a Release's retries and bookkeeping.
func (c *Client) deleteOn(l *Lock, only []bool) {
	spec := l.deleteAll(c.cfg.cleanupTimeout, c.cfg.cleanupTimeout)
	spec.only, spec.note = only, l.noteDeleted
	c.nodes.launch(context.Background(), l.seq, spec)
}

// deleteAll is a round that deletes l's key, any generation of it, and
// keeps every write l has sent from landing after it (roundSpec.tomb). l
// writes nothing more: its release has started.
func (l *Lock) deleteAll(wait, callTimeout time.Duration) roundSpec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return roundSpec{kind: opDelete, op: deleteOp(l.key, l.anyValue(), 0), wait: wait, callTimeout: callTimeout,
		tomb: l.gen, tombMs: tombMs(l.ttl)}
}

// tombMs is how long a tombstone left against writes of ttl lives, in
// milliseconds: a write that lands later still leaves the key for at most
// its ttl, so a longer tombstone would serve nothing.
func tombMs(ttl time.Duration) int64 {
	return max(min(ttl, tombstoneTTL).Milliseconds(), 1)
}
