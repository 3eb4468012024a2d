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
// value, on every node, whatever happened to the caller's context. A delete
// that gets no definite answer is tried again, with backoff, until it gets
// one or the key would have expired anyway (Client.Nodes shows the pending
// ones; Close waits for them). Each lock's calls to one node run in order, so
// a delete cannot overtake a slow SET on the same node; a write whose round
// is over is not waited for.
//
// The value under the key is the token, a dot and a generation: each attempt
// and each extension of a Lock writes a higher one. The scripts recognise the
// holder by the token and order its own calls by the generation, so a call
// that lands late (on a connection given up on) cannot undo a later one, a
// rollback never deletes a later attempt's key, and a retry takes over its
// own earlier attempt's key: a write whose reply was lost does not lock its
// own holder out for the TTL.
//
// Release and Extend run holder-checked scripts on every node and need a
// quorum of confirmations. Extend only refreshes nodes that still hold our
// value; it puts the key back on a node that lost it only after a quorum
// confirmed in the same Extend, and never once Release has started. A failed
// Extend can only move Until earlier. Two nodes that are one server (two
// addresses, two clients of one cluster or Sentinel master) are found at
// first contact by the server's run_id, and then every operation fails.
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
//     node that held the key: asynchronous replication can lose it), and no
//     two of them are one server;
//   - no node evicts keys: maxmemory-policy noeviction (a volatile-* policy
//     evicts lock keys, which carry a TTL; an allkeys-* policy evicts the
//     fencing counters as well);
//   - every node's clock advances at most the drift faster than ours over one
//     TTL (large clock jumps on a node, e.g. by NTP stepping, break this);
//   - a node that restarts either kept its keys (AOF with appendfsync always)
//     or stays down for at least the longest TTL in use; a node that restarts
//     empty at once lets a second client reach a quorum while the first
//     still holds the lock;
//   - the holder stops using the lock at Until.
//
// CheckNodes checks what of this can be seen from a client: eviction
// policy, persistence, clock offset, two nodes that are one server.
//
// # What it does not guarantee
//
// The last assumption is the weak one. A holder can be paused after it
// checked Until (a GC pause, a page fault, SIGSTOP, a slow network write) and
// touch the protected resource after the lock passed to someone else. No lock
// service can prevent that alone; the resource must reject the late write.
// That is what fencing tokens are for: with WithFencing, Lock.Fence returns a
// number that strictly increases across successive holders of a key, as long
// as no node of the previous holder's quorum lost its data (persistence with
// appendfsync always and noeviction are required; waiting out a TTL does not
// bring a lost counter back). Send it with every write and have the storage
// refuse a fence lower than the highest it has seen (an equal one is the same
// holder's next write). Use fencing whenever a late write would corrupt data (payments,
// ledgers, files); plain locks suffice when overlap only costs duplicated
// work. Fencing costs a second round trip per acquisition and one counter key
// per lock key that is kept forever, so that fences never go back; see
// docs/fencing.md for the scheme and its argument.
//
// Redlock gives no ordering or fairness among waiters, and a lock is only as
// live as a quorum of its nodes: with a majority down, every Acquire fails
// with ErrNotAcquired within its deadlines.
package redlock
