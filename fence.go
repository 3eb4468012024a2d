package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// A fence is one more than the highest reading of the quorum that confirmed
// the acquire, a node's reading being the larger of its counter for the key
// and its clock in microseconds: docs/fencing.md has the scheme and why it
// increases. Fences stay below 2^53, where the scripts' Lua numbers are
// exact, until the year 2255.

// commitFence is the second round of a fenced acquire. The fence is above
// every reading (counter or clock) of the nodes that confirmed the acquire,
// and it is recorded on a quorum of nodes that still hold our key before
// anyone may use it; docs/fencing.md argues why that makes fences strictly
// increase across holders. The nodes whose commit was not confirmed in time
// (and whose acquire was not refused: our key may be there) get it again in
// the background, so that lagging counters catch up.
func (c *Client) commitFence(ctx context.Context, l *Lock, v script.Value, acq *engine.Tally, waits engine.Waits, ttl time.Duration) (uint64, *engine.Tally, error) {
	var highest int64
	for _, r := range acq.Replies {
		if r.Status == engine.OK {
			highest = max(highest, r.Val)
		}
	}
	fence := script.FenceAbove(highest)
	op := fenceCommitOp(l, v, fence, c.cfg.horizonArg)
	t, err := c.nodes.SendAndCount(ctx, l.seq, engine.WriteRound(op, waits, ttl))
	if err == nil && t.Reached() && t.Confirmed < len(t.Replies) {
		late := t.Where(func(r engine.Reply) bool {
			return r.Status == engine.Unknown && acq.Replies[r.Node].Status != engine.Refused
		})
		c.nodes.Launch(ctx, l.seq, engine.Spec{Effect: engine.Write, Op: op,
			Wait: c.cfg.cleanupTimeout, TTL: ttl, Only: late})
	}
	return fence, t, err
}

// fenceHorizon is the fencing counters' horizon in milliseconds, for the
// ops of l that keep them, or nil when l is not fenced.
func (c *Client) fenceHorizon(l *Lock) any {
	if l.fenced() {
		return c.cfg.horizonArg
	}
	return nil
}

// fenced tells whether l's ops keep fencing counters: the Client's
// WithFencing, or an Election's Lock, which is always fenced.
func (l *Lock) fenced() bool { return l.fenceKey != "" || l.keysAndCounters != nil }

// FenceKey returns the name of the fencing counter WithFencing keeps beside
// key on every node: for an ACL's key patterns, or to inspect a node (the
// redlock command's status does). It expires a fence horizon after the key's
// last use.
func FenceKey(key string) string { return script.CounterKey(key) }
