package redlock

import (
	"context"
	"time"
)

// A fence is a hybrid of a per-key counter and the nodes' clocks, both read
// by the acquire script in one atomic step with taking the key. Each node
// contributes its reading, the larger of its counter and its clock in
// microseconds since the Unix epoch, and the fence is one more than the
// highest reading of the quorum that confirmed. The counter alone makes
// fences increase while counters survive (docs/fencing.md has the
// argument); the clock part is what a node whose counter was lost (a
// restart without persistence, FLUSHALL, eviction, a failover to a replica
// that lacked it, or the counter's own expiry after the horizon) still
// contributes: a value above every fence issued before the loss, as long as
// the clocks of the nodes agree to within the time since. The clock only
// ever raises a fence.
//
// Fences are near 1.8e15 today (microseconds since 1970) and grow by about
// 3.2e13 a year: far inside a signed 64-bit column, and below 2^53, so the
// scripts compare them exactly as Lua numbers until the year 2255.

// fenceReading is one node's contribution to a fence: the larger of its
// counter and its clock (seconds and microseconds, as TIME gives them).
func fenceReading(counter, sec, usec int64) int64 {
	return max(counter, sec*1_000_000+usec)
}

// fenceAbove returns the fence for a quorum whose readings are given: one
// more than the highest.
func fenceAbove(readings ...int64) uint64 {
	var highest int64
	for _, r := range readings {
		highest = max(highest, r)
	}
	return uint64(highest) + 1
}

// commitFence is the second round of a fenced acquire. The fence is above
// every reading (counter or clock) of the nodes that confirmed the acquire,
// and it is recorded on a quorum of nodes that still hold our key before
// anyone may use it; docs/fencing.md argues why that makes fences strictly
// increase across holders. The nodes whose commit was not confirmed in time
// (and whose acquire was not refused: our key may be there) get it again in
// the background, so that lagging counters catch up.
func (c *Client) commitFence(ctx context.Context, l *Lock, v value, acq *tally, timeout, ttl time.Duration) (uint64, *tally, error) {
	var highest int64
	for _, r := range acq.replies {
		if r.status == statusOK {
			highest = max(highest, r.val)
		}
	}
	fence := fenceAbove(highest)
	op := fenceCommitOp(l.key, l.fenceKey, v, fence, c.cfg.horizonArg)
	t, err := c.nodes.run(ctx, l.seq, writeRound(op, timeout, ttl))
	if err == nil && t.reached() && t.ok < len(t.replies) {
		late := t.where(func(r reply) bool {
			return r.status == statusUnknown && acq.replies[r.node].status != statusRefused
		})
		c.nodes.launch(context.Background(), l.seq, roundSpec{kind: opWrite, op: op,
			wait: c.cfg.cleanupTimeout, ttl: ttl, only: late})
	}
	return fence, t, err
}
