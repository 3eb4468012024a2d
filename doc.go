// Package redlock implements the Redlock algorithm: a lock held on a majority
// of N independent Redis masters, so that the crash, stall or restart of a
// minority of them neither loses the lock nor hands it to a second holder.
//
// # Usage
//
// One go-redis client per independent master; Do takes the lock, renews it
// while the work runs, and releases it; the fence orders the writes of
// successive holders:
//
//	locks, err := redlock.New([]redis.UniversalClient{rdb1, rdb2, rdb3}, redlock.WithFencing())
//	if err != nil {
//		return err
//	}
//	defer locks.Close(context.Background())
//	err = locks.Do(ctx, "orders:42", 10*time.Second, func(ctx context.Context, lock *redlock.Lock) error {
//		return store.Write(ctx, order, lock.Fence()) // stop when ctx ends: the lock is lost
//	})
//
// Acquire (or TryAcquire) and Lock.Release take and free a lock by hand;
// Lock.Extend and Lock.KeepAlive renew it. Give every call a context with a
// deadline: Acquire waits for a busy key until ctx ends, and gives up on its
// own only when so many nodes fail that no quorum can be asked
// (ErrUnavailable, after DefaultUnavailableTimeout). Client.Inspect and
// Lock.TTL look at a key without taking it.
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
// own holder out for the TTL. A Lock of an owner (WithOwner) writes the
// owner's token, a tilde and an id of its own before the dot: the acquire
// scripts let any Lock of the owner take the key over, and every other
// script touches only the Lock's own values, so a superseded Lock of the
// owner never deletes or extends its successor's key. An attempt that takes
// over another Lock's value keeps that value and its deadline behind its
// own, and keeps at least its expiry; the attempt's rollback puts that value
// back with its own expiry, so a takeover that fails leaves a still-valid
// Lock of the owner where it was, and no longer. A Release of the replaced
// Lock meanwhile takes it out, so nothing puts a released Lock back; once the
// attempt's Lock holds, what it replaced is dropped.
//
// A write whose reply never came may still be in the network: a client with
// ContextTimeoutEnabled closes its connection at the deadline, but bytes it
// already wrote can reach the node later, after the delete that was meant
// to remove them. So a delete that finds the key absent on a node where one
// of the Lock's writes got no reply leaves a tombstone there: a value that
// every script reads as an absent key, except that the acquire scripts and
// the restore of an Extend refuse a write of that Lock up to the generation
// it names. Each later delete of the Lock raises it to the Lock's latest
// write, and never shortens it. A tombstone lives the lock's TTL, at most
// two seconds: a write delayed longer than that after the delete still
// lands, and then keeps the key for at most its TTL. docs/late-writes.md
// has the details, and what each script does with what it finds.
//
// Release and Extend run holder-checked scripts on every node and need a
// quorum of confirmations. Extend only refreshes nodes that still hold our
// value; it puts the key back on a node that lost it only after a quorum
// confirmed in the same Extend, and never once Release has started. A failed
// Extend can only move Until earlier. A node's reply counts toward a quorum
// only once its server is identified by its run_id: two nodes that are one
// server (two addresses, two clients of one cluster or Sentinel master)
// never vote twice, even when the server was down at first contact, and
// once both are identified every operation fails with an error matching
// ErrInvalidArgument. The first operation waits for the identification of
// every node, up to its per-node deadline (Warm does it ahead); a node not
// identified by then does not vote until a later operation's background
// identification succeeded, at most every 100ms.
//
// Each node must honour deadlines. go-redis ignores a context's deadline on
// socket reads unless the client sets ContextTimeoutEnabled; this package
// does not rely on it: the waiting side keeps its own deadline, and a call
// given up on keeps its connection until go-redis's ReadTimeout ends it.
// With a single node given as a *redis.Client without ContextTimeoutEnabled,
// the caller makes the call itself on a clone of the client
// (redis.Client.WithTimeout, sharing its connection pool) with
// ContextTimeoutEnabled set, so that the call ends at the node deadline
// without a hand-off to another goroutine; hooks added to the client after
// its first use are not applied to those calls.
//
// # Lease
//
// Lock.KeepAlive renews a lock in the background and returns a context that
// ends when the lock is released (cause ErrReleased), the Client closed
// (ErrClosed), or the lock can no longer be proven held (a cause matching
// ErrLockLost, saying why); Client.Do wraps acquire, keep-alive and release
// around a function. Each renewal is an Extend with the lock's TTL, every
// third of the TTL by default (WithRenewInterval), whose deadline is the
// validity the lock has left, so a stalled renewal cannot hold the lock past
// Until. A failed renewal is tried again after a short backoff while
// validity is left. The lock counts as lost as soon as enough nodes refused
// a renewal that no quorum can confirm it again (our value is gone from
// them), or when no renewal has reached a quorum and Until draws near: a
// timer set to Until, less a margin for its own latency (a twentieth of the
// TTL, 1 to 50 ms) and moved by every successful renewal, ends the context
// before Until whatever the nodes and the network do. Between renewals a kept lock
// costs one timer and no goroutine; the renewal runs on the timer's
// goroutine, at most 64 at once per Client (the others wait their turn),
// and renewals are spread by a random tenth of the interval. Release ends
// renewal for good before it sends its deletes.
//
// What KeepAlive cannot promise: the context ending is a signal, not a
// barrier. The margin covers the usual latency of a timer; a process starved
// of CPU for longer sees the context end after Until. A process that is
// paused (a GC pause, SIGSTOP, swapping) does not run to see it, and can
// touch the resource after Until as it could without KeepAlive; fencing
// (below) is what covers that. When the caller's context
// ends, renewal stops and the lock stays held until its TTL runs out, unless
// it is released.
//
// # Restart guard
//
// WithRestartGuard(d) enforces the spec's delayed restart from the clients:
// a node that lost its data (FLUSHALL, a restart without persistence,
// eviction of its boot marker, a failover to a replica that lacks the
// marker) or restarted (its run_id changed) does not count toward an
// acquire's quorum for d, with d at least the longest TTL in use. The
// guarded acquire script checks the node's boot marker atomically with the
// acquire, on the node's own clock, so every client agrees on when the node
// is back. The cost is availability: such a node, and every node the guard
// has never seen (after deployment), votes only d after the first guarded
// acquire that reached it; with a majority inside its guard, acquires fail
// with ErrNotAcquired and the nodes' NodeError says ErrRestartGuard.
//
// # Owners and reentrancy
//
// WithOwner(id) derives the token from a request id instead of crypto/rand:
// a retry of the same request, from any process, takes the lock over at once
// instead of waiting out its own TTL, and within one Client a second Acquire
// of the owner returns the same Lock with one more hold (released on the
// nodes by the last Release), once an extension proved it still held. The
// same owner is the same holder for taking the lock, not for releasing it:
// each Lock deletes and extends only what it wrote, so a Lock superseded by
// a newer Lock of the owner is no longer held (its Extend fails, its
// KeepAlive reports the loss) and its Release leaves the newer Lock's key
// alone. Go has no goroutine identity: the id is the caller's to keep
// unique per request. Do not use a fixed id for unrelated work, and
// do not hand one Lock's holds to goroutines that could run their critical
// sections at once: reentrancy lets them all in.
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
//     or stays down for at least the longest TTL in use, or the clients use
//     WithRestartGuard (below); a node that restarts empty at once lets a
//     second client reach a quorum while the first still holds the lock;
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
// number that strictly increases across successive holders of a key. Each
// fence is above the per-key counters and the clocks that the acquiring
// quorum read, and is committed to a quorum's counters before it is handed
// out. The counters carry the order while they survive; a node that lost its
// counter (FLUSHALL, a restart without persistence, eviction, a failover)
// still contributes its clock, which is past every earlier fence unless the
// nodes' clocks disagree or step back by more than the time between the two
// holders. Send the fence with every write and have the storage refuse one
// lower than the highest it has seen (an equal one is the same holder's next
// write). Use fencing whenever a late write would corrupt data (payments,
// ledgers, files); plain locks suffice when overlap only costs duplicated
// work. Fencing costs a second round trip per acquisition, and one counter
// key per lock key that expires a horizon (WithFenceHorizon, 7 days by
// default) after the key's last use; see docs/fencing.md for the scheme, its
// argument, and the failures it does and does not survive.
//
// # Waiting
//
// Acquire waits to be woken rather than polling. The Acquire calls of one
// Client for one key queue in FIFO order, and only the first contends on the
// nodes. It subscribes to the key's release channel on every node after its
// first refusal (one pub/sub connection per node per Client), tries again at
// once, and then again when a quorum of nodes announced a release, when a
// Lock of the same Client released the key, or when the holder's remaining
// TTL, capped by the RetryStrategy's wait, has passed. Pub/sub is only a
// hint: without it (an ACL that refuses it) waiting is polling bounded by
// the holder's TTL. Fairness holds within a Client; across processes, every
// holder still acquires on the nodes and nothing orders them.
//
// When the next waiter is an Acquire of the same Client and no other client
// waits for the key, Release hands the key over in its own round: each node
// replaces the leaving holder's value with the waiter's in one script, and
// the waiter holds the lock only with a quorum of them and validity left,
// computed from the start of that round, as for its own attempt. While
// another client's waiter waits for the key, a Client hands over at most 3
// times in a row; then its Release deletes and announces the key, and its
// own waiter contends on the same footing as the other processes' waiters.
// That bounds what a streak can cost another process, and buys the
// throughput that a contest of several processes' waiters per handoff
// (with split votes) would lose.
//
// A lock is only as live as a quorum of its nodes: with a majority down, every Acquire fails
// with ErrNotAcquired within its deadlines.
package redlock
