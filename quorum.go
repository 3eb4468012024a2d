package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// The Redlock round, as the algorithm reads: an attempt writes the key on
// every node in parallel (the engine's SendAndCount, each node under its
// own deadline), counts the votes against the validity left, and decides;
// without a quorum and validity it rolls back, on every node that did not
// refuse, in the background. docs/algorithm.md states the algorithm.

// attempt is one attempt of the Redlock algorithm: write the key on every
// node in parallel (and with fencing commit the fence, a second round), count
// the confirmations, and keep the lock only with a quorum and validity left.
// Otherwise delete what we may have written, everywhere.
// Each attempt writes its own generation, so the rollback of a failed attempt
// can never delete what a later attempt wrote.
func (c *Client) attempt(ctx context.Context, l *Lock, ttl time.Duration, ttlArg any, n int) (err error) {
	if c.obs.on {
		start := time.Now()
		defer func() { c.obs.attempt(ctx, l.key, n, start, err) }()
	}
	waits := c.cfg.waits(ttl)
	// A first contact may take the TTL's budget (three round trips to a
	// far node), but never past ctx's deadline.
	first := c.nodes.MaxWait(waits)
	if dl, ok := ctx.Deadline(); ok {
		first = max(min(first, time.Until(dl)), 0)
	}
	if err := c.nodes.CheckServers(first); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), err)
	}
	if err := c.checkLatency(ttl); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), err)
	}
	start := c.cfg.clock.Now()
	until := c.cfg.validUntil(start, ttl)
	v := l.nextValue(ttl)

	op := l.kind.acquireOp(l, v, ttlArg, c.fenceHorizon(l))
	if c.cfg.restartGuard > 0 {
		op = guarded(op, c.cfg.guardArg)
	}
	spec := engine.WriteRound(op, waits, ttl)
	spec.HearAll = l.vals.TakesOver()
	spec.ByVal = l.kind.byVal()
	t, err := c.nodes.SendAndCount(ctx, l.seq, spec)
	acq := t
	var fence uint64
	if err == nil && t.Reached() && l.fenced() && l.kind.fences() {
		fence, t, err = c.commitFence(ctx, l, v, t, waits, ttl)
	}
	quorum := err == nil && t.Reached()
	now := c.cfg.clock.Now()
	if quorum && now.Before(until) {
		l.mu.Lock()
		l.until, l.ttl, l.fence = until, ttl, fence
		l.kind.held(l, t)
		l.mu.Unlock()
		c.dropChains(ctx, l, v, ttl, acq)
		c.dropStray(ctx, l, v, t)
		return nil
	}
	l.kind.missed(l, t)
	c.rollback(ctx, l, v, ttl, t)
	qe := newQuorumError("acquire", l.key, ErrNotAcquired, err, t, c.nodes)
	if quorum {
		qe.Elapsed = now.Sub(start)
	}
	return qe
}

// rollback deletes, in the background, what l's failed write of v for ttl
// may have left: on every node that did not refuse it, only v's generation
// or an earlier one, leaving what refuses the write's copies still in the
// network. A node that refused it ran the one copy sent (engine: a
// command is sent once) and changed nothing. ctx, the call's, lends its
// values (the hooks' Event.Context), not its cancellation.
func (c *Client) rollback(ctx context.Context, l *Lock, v script.Value, ttl time.Duration, t *engine.Tally) {
	only := t.Unrefused()
	c.nodes.Launch(ctx, l.seq, engine.Spec{Effect: engine.Delete, Op: l.kind.deleteOp(l, v, v.Gen, v.Gen),
		Wait: c.cfg.cleanupTimeout, CallTimeout: c.cfg.cleanupTimeout, Only: only})
	if c.obs.on {
		c.obs.rollback(ctx, l.key, engine.Count(only))
	}
}

// dropChains drops, in the background, the chain that l's held write of v
// keeps on the nodes where it took over another Lock of its owner
// (take.lua): the Lock holds, so its takeover is final and nothing will be
// put back. An extension of the same generation does it, and changes
// nothing where a later call of l got there first.
// The acquire heard every node once one kept a chain (HearAll); a node
// that did not answer in time keeps its chain until the Lock's next
// extension or its Release.
func (c *Client) dropChains(ctx context.Context, l *Lock, v script.Value, ttl time.Duration, acq *engine.Tally) {
	if acq.Chained == 0 {
		return
	}
	only := acq.Where(func(r engine.Reply) bool { return r.Chained })
	c.nodes.Launch(ctx, l.seq, engine.Spec{Effect: engine.Write, Op: l.kind.extendOp(l, v, ttl.Milliseconds(), 0, nil),
		Nodes: c.cfg.waits(ttl), TTL: ttl, Only: only})
}

// withCause adds a context's error to a failed attempt's error, unless the
// attempt already carries one.
func withCause(err, cause error) error {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	if qe.cause != nil {
		return err
	}
	cp := *qe
	cp.cause = cause
	return &cp
}

// newQuorumError describes a round that did not reach its goal.
func newQuorumError(op, key string, sentinel, cause error, t *engine.Tally, p *engine.Set) *QuorumError {
	qe := &QuorumError{Op: op, Key: key, sentinel: sentinel, cause: cause, OK: t.Confirmed, Quorum: t.Quorum, holderTTL: -1}
	failed := 0
	for i, r := range t.Replies {
		if op == "acquire" && r.Status == engine.Refused && (errors.Is(r.Err, ErrHeldByOther) || errors.Is(r.Err, ErrWriterWaiting)) && r.Val >= 0 {
			qe.holderTTL = max(qe.holderTTL, time.Duration(r.Val)*time.Millisecond)
		}
		if r.Status == engine.OK {
			continue
		}
		err := r.Err
		down := r.Status == engine.Unknown
		switch {
		case err == engine.ErrNotNeeded && cause != nil:
			err, down = errCallEnded, false
		case err == engine.ErrNotNeeded:
			// Decided without it: it counts as down when its latest
			// calls failed, or a majority down reads as "held" whenever
			// the one node left refuses before the others' failures
			// are all in.
			h := p.Health(i)
			down = h.ConsecutiveFailures > 0
			if down {
				err = fmt.Errorf("%w; its latest calls failed (%w)", err, h.LastError)
			}
		case err == ErrNoReply:
			err = p.Silence(i)
		case errors.Is(err, ErrNotAwaited) || err == engine.ErrUnidentified:
			// A reply that came but does not count yet (its server is
			// still being identified) is no sign of a node down.
			down = false
		}
		if down {
			failed++
		}
		qe.Nodes = append(qe.Nodes, &NodeError{Node: i, Addr: p.Addr(i), Err: err})
	}
	qe.unavailable = failed > len(t.Replies)-t.Quorum
	return qe
}

// refused counts the nodes that refused because our value is not there:
// gone from them for good, since Extend puts it back only after a quorum
// of the others confirmed.
func (qe *QuorumError) refused() int {
	n := 0
	for _, ne := range qe.Nodes {
		if errors.Is(ne.Err, ErrKeyAbsent) || errors.Is(ne.Err, ErrHeldByOther) {
			n++
		}
	}
	return n
}

// refusedQuorum reports whether so many of nodes refused that no quorum can
// confirm the lock again: it is lost.
func (qe *QuorumError) refusedQuorum(nodes int) bool { return qe.refused() > nodes-qe.Quorum }
