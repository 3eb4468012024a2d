package redlock

import (
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// A shared Lock (docs/shared.md) holds its key together with any number of
// other shared Locks, and never with an exclusive one. On each node the key
// then holds one entry per shared Lock, each expiring by the node's clock
// (scripts/shared.lua); an exclusive acquire refuses while an entry is live
// (scripts/take.lua), a shared acquire while an exclusive Lock holds the
// key. A shared Lock and an exclusive one would each need a quorum of
// nodes, and two quorums share a node, whose script admitted only one of
// them. Who goes first is the waiting room's (announce.go): new shared
// Locks wait behind a waiting exclusive one, and shared Locks that waited
// through an exclusive one's turn go before the next.

// maxSharedArg is MaxShared, boxed once for the shared acquire script.
var maxSharedArg any = int64(MaxShared)

// Shared takes the key shared (Acquire, TryAcquire, Do): any number of
// shared Locks hold a key together, and while one does no exclusive Lock
// (Acquire without Shared, AcquireAll) holds it, and the reverse. Each
// shared Lock is its own Lock: Release, Extend, KeepAlive, Until and TTL
// touch its share alone, which expires by the nodes' clocks. Once an
// exclusive Acquire waits for the key, new shared Locks wait behind it
// (their refusal is ErrWriterWaiting), and a shared Acquire that waited
// through an exclusive Lock's turn goes before the next one.
// Fence of a shared Lock is 0: fences order exclusive holders. A shared
// Lock has no owner (WithOwner with Shared is ErrInvalidArgument) and is
// never upgraded to an exclusive one: two holders upgrading would wait for
// each other forever; release the share, then acquire (docs/shared.md).
func Shared() AcquireOption {
	return acquireOptionFunc(func(c *acquireConfig) { c.shared, c.kind = true, sharedKind{} })
}

// Shared reports whether the Lock holds its key shared (Shared); false for
// a nil Lock.
func (l *Lock) Shared() bool { return l != nil && l.shared }

// sharedKind is a shared Lock (Shared): one key, no fencing, its own
// scripts; the acquire enters a refused Lock in the key's waiting room for
// roomArg milliseconds.
type sharedKind struct{ exclusiveKind }

func (k sharedKind) acquireOp(l *Lock, v script.Value, ttlMs, _ any) engine.Op {
	op := engine.Op{Script: acquireSharedScript, Read: script.ReadAcquireShared, Args: script.WriteArgs(v, ttlMs, true), NArgs: 6}
	op.Args[4], op.Args[5] = maxSharedArg, l.roomArg
	if l.roomArg == nil {
		op.Args[5] = int64(0)
	}
	address(l, &op, false)
	return op
}

func (k sharedKind) extendOp(l *Lock, v script.Value, ttlMs any, _ uint64, _ any) engine.Op {
	op := engine.Op{Script: extendSharedScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
	address(l, &op, false)
	return op
}

func (k sharedKind) restoreOp(l *Lock, v script.Value, ttlMs any) engine.Op {
	op := k.exclusiveKind.restoreOp(l, v, ttlMs)
	op.Script = restoreSharedScript
	return op
}

func (k sharedKind) deleteOp(l *Lock, v script.Value, upTo, gone uint64) engine.Op {
	op := k.exclusiveKind.deleteOp(l, v, upTo, gone)
	op.Script = releaseSharedScript
	return op
}

func (sharedKind) handsOver() bool { return false }

// waitAs: a shared Lock's acquire enters it in the key's waiting room when
// refused, for as long as its announcements last; it goes first once it
// waited through a writer's turn (ErrHeldByOther: entitledBy).
func (sharedKind) waitAs(c *Client, l *Lock, ttl time.Duration) string {
	l.roomArg = c.cfg.announceLife(c.nodeTimeout(ttl)).Milliseconds()
	return waitsShared
}

func (sharedKind) entitledBy(err error) bool { return errors.Is(err, ErrHeldByOther) }

func (sharedKind) fences() bool { return false }

// holding: a node holds a shared Lock while the key is taken shared, no
// writer holds it (a count of 0) and one of the shares is the Lock's.
func (sharedKind) holding(l *Lock, r *keyRead) (time.Duration, error) {
	if r.in.Shares == nil || r.in.Count != 0 {
		return 0, ErrHeldByOther
	}
	return r.ownShare(l, -1)
}
