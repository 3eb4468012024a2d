package redlock

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

// MaxShared is the most shared Locks that one key holds at once on a node:
// a shared Acquire beyond it waits, and a TryAcquire fails, as for a held
// key.
const MaxShared = 1000

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
	return acquireOptionFunc(func(c *acquireConfig) { c.shared = true })
}

// Shared reports whether the Lock holds its key shared (Shared); false for
// a nil Lock.
func (l *Lock) Shared() bool { return l != nil && l.shared }
