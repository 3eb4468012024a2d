package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
)

// NodeStatus is a snapshot of one node's health as this Client has seen it.
type NodeStatus struct {
	Index int    // position in the slice given to New
	Addr  string // address, when the client exposes one; a Sentinel master's once resolved
	// InFlight counts calls still running. Calls given up on at their deadline
	// keep their connection until go-redis's own timeout; a node with many
	// such calls is stalled, and its pool may be exhausted for a while after
	// it recovers.
	InFlight int
	// PendingCleanups counts deletes (rollbacks and releases) that got no
	// definite answer from this node and wait to be tried again: at most one
	// per lock. Close waits for them.
	PendingCleanups int
	// ConsecutiveFailures counts the latest calls in a row that failed or
	// answered after their deadline; 0 means the last call was on time.
	ConsecutiveFailures int
	LastError           error // the latest failure, nil if none yet
	// Latency is the node's usual round trip as learned from its replies
	// (smoothed, as TCP's SRTT), and LatencyVar its variation; both 0
	// before its first reply. They give the node's deadline
	// (docs/algorithm.md, NodeTimeout).
	Latency, LatencyVar time.Duration
}

// Nodes reports each node's health as this Client has seen it.
func (c *Client) Nodes() []NodeStatus {
	out := make([]NodeStatus, c.nodes.Len())
	for i := range out {
		h := c.nodes.Health(i)
		out[i] = NodeStatus{Index: i, Addr: h.Addr, InFlight: h.InFlight, PendingCleanups: h.PendingCleanups,
			ConsecutiveFailures: h.ConsecutiveFailures, LastError: h.LastError}
		out[i].Latency, out[i].LatencyVar, _ = c.nodes.Latency(i)
	}
	return out
}

// nodeObserver tells the Client's hooks and log what the engine saw on
// the nodes.
type nodeObserver struct{ o *observer }

func (n nodeObserver) NodeError(ctx context.Context, op *engine.Op, node int, addr string, err error) {
	n.o.nodeError(ctx, opName(op), op.Keys[0], node, addr, err)
}

func (n nodeObserver) CleanupRetry(ctx context.Context, key string, node int, addr string, try int, wait time.Duration) {
	n.o.cleanupRetry(ctx, key, node, addr, try, wait)
}

// NodeTimeouts is each node's deadline, by index, for a call of a lock
// with ttl: WithNodeTimeout's when set, otherwise learned from the node's
// latency (Latency, LatencyVar) within a floor and the TTL's budget
// (docs/algorithm.md). A ttl that is not positive gives nil.
func (c *Client) NodeTimeouts(ttl time.Duration) []time.Duration {
	if ttl <= 0 {
		return nil
	}
	w := c.cfg.waits(min(ttl, MaxTTL))
	out := make([]time.Duration, c.nodes.Len())
	for i := range out {
		out[i] = c.nodes.Wait(i, w)
	}
	return out
}
