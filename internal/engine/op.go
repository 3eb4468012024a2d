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
