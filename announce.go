package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/waiting"
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

// announce enters l, waiting as what says, in its keys' waiting rooms, and
// renews the entry until Stop. ttl is the TTL l asks for, which sets the
// node deadline of its renewals.
func (c *Client) announce(ctx context.Context, l *Lock, what string, ttl time.Duration) *waiting.Announcer {
	wait := c.nodeTimeout(ttl)
	life := c.cfg.announceLife(wait)
	return waiting.Announce(ctx, c.nodes, func(what string, end bool) engine.Op {
		return announceOp(l, what, life.Milliseconds(), end)
	}, what, life, wait, announceEvery, c.cfg.cleanupTimeout)
}
