package engine

import (
	"github.com/redis/go-redis/v9"
)

// Op is one script with its keys and arguments, run on each node of a
// round. It is built once per round and kept by value inside the round, its
// keys and arguments in its own arrays, so that a round costs no allocation
// per node. read turns a node's reply into a status; anything unexpected,
// including a Redis error reply or a code the script does not return, is
// Unknown: we cannot tell what the node did.
type Op struct {
	Script *redis.Script
	Read   func(*redis.Cmd) Reply
	Keys   [MaxKeys]string
	Args   [MaxArgs]any
	NKeys  int
	NArgs  int
	// Many, when set, holds all the op's keys instead of Keys: an op over
	// more keys than Keys holds (a lock over several keys). Keys[0] is
	// then Many[0], for the hooks and the log. The rounds share it,
	// read-only.
	Many []string
	// Refusals, when set, makes the op a Lock's write or delete under the
	// late-write rule (docs/late-writes.md, scripts/late.lua): each call
	// sends the Lock's refusals key before the op's keys, and before its
	// arguments a node-clock millisecond of that node's own: a write's
	// deadline (the round's, on the node's clock), after which it changes
	// nothing; a delete's, the latest deadline of the Lock's writes sent
	// to that node (its lanes'), until which it leaves a refusal of them.
	Refusals string
	// Leaving, on a write that also deletes another Lock's value (a
	// handover), is that Lock's lanes, and LeavingRefusals its refusals
	// key: they follow the op's own pair, as a delete's pair of that Lock.
	Leaving         *Lanes
	LeavingRefusals string
}

// latePairs is how many refusals keys, and node-clock milliseconds, o's
// calls send before its own keys and arguments.
func (o *Op) latePairs() int {
	switch {
	case o.Refusals == "":
		return 0
	case o.Leaving != nil:
		return 2
	}
	return 1
}

// The most keys and arguments an op holds in its arrays: the lock's key,
// its fence counter and the restart marker; a guarded fenced acquire of
// several keys has seven arguments (take.lua's four, the number of keys,
// the counters' horizon and the guard), a handover eight.
const (
	MaxKeys = 3
	MaxArgs = 8
)

// KeyList is every key of o, in order.
func (o *Op) KeyList() []string {
	if o.Many != nil {
		return o.Many
	}
	return o.Keys[:o.NKeys]
}
