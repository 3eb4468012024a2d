// Package redlock implements the Redlock algorithm: a lock held on a majority
// of N independent Redis masters, so that the crash, stall or restart of a
// minority of them neither loses the lock nor hands it to a second holder.
//
// # The algorithm
//
// Acquire generates a random token (130 bits from crypto/rand) and sends one
// Lua script to every node in parallel: set the key to the token with a
// millisecond expiry if the key is absent, or refresh it if it already holds
// the same token. Each node gets its own short deadline, derived from the TTL
// (ttl/200 clamped to 10–50 ms) or fixed with WithNodeTimeout. The lock is
// held when a quorum, N/2+1 nodes, confirmed and validity is left:
//
//	validity = ttl − elapsed − drift,  drift = ttl×0.01 + 2ms
//
// where elapsed runs on Go's monotonic clock from before the first command
// was sent. Lock.Until is start + ttl − drift. Acquire returns as soon as the
// outcome is decided: a quorum confirmed, or enough nodes refused or failed
// that a quorum is out of reach. Calls still in flight finish in the
// background.
//
// A node that did not answer in time, or answered with an error, is unknown:
// its write may have landed. It never counts as a confirmation, and it is
// never forgotten: a failed attempt deletes the key, only where it holds our
// token, on every node, whatever happened to the caller's context. Each
// lock's calls to one node run in order, so that delete cannot overtake a slow
// SET on the same node. Because the acquire script accepts its own token,
// Acquire's retries reuse the token, and a write whose reply was lost does
// not lock its own holder out for the TTL.
//
// Release and Extend run token-checked scripts on every node and need a
// quorum of confirmations. Extend re-creates the key on a node that lost it
// but never takes it from another token; it moves Until only on success.
//
// Each node must honour deadlines. go-redis ignores a context's deadline on
// socket reads unless the client sets ContextTimeoutEnabled; this package
// does not rely on it: the waiting side keeps its own deadline, and a call
// given up on keeps its connection until go-redis's ReadTimeout ends it.
//
// # What Redlock guarantees
//
// While a Lock is valid (now < Until) no other client holds a lock on the same
// key through this package, provided that:
//
//   - the nodes are independent masters (no replicas promoted in place of a
//     node that held the key: asynchronous replication can lose it);
//   - every node's clock advances at most the drift faster than ours over one
//     TTL (large clock jumps on a node, e.g. by NTP stepping, break this);
//   - a node that restarts either kept its keys (AOF with appendfsync always)
//     or stays down for at least the longest TTL in use; a node that restarts
//     empty at once lets a second client reach a quorum while the first
//     still holds the lock;
//   - the holder stops using the lock at Until.
//
// # What it does not guarantee
//
// The last assumption is the weak one. A holder can be paused after it
// checked Until (a GC pause, a page fault, SIGSTOP, a slow network write) and
// touch the protected resource after the lock passed to someone else. No lock
// service can prevent that alone; the resource must reject the late write.
// That is what fencing tokens are for: with WithFencing, Lock.Fence returns a
// number that strictly increases across successive holders of a key. Send it
// with every write and have the storage refuse a fence lower than the highest
// it has seen. Use fencing whenever a late write would corrupt data (payments,
// ledgers, files); plain locks suffice when overlap only costs duplicated
// work. Fencing costs a second round trip per acquisition and one counter key
// per lock key that is kept forever, so that fences never go back; see
// docs/fencing.md for the scheme and its argument.
//
// Redlock gives no ordering or fairness among waiters, and a lock is only as
// live as a quorum of its nodes: with a majority down, every Acquire fails
// with ErrNotAcquired within its deadlines.
package redlock
