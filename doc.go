// Package redlock implements Redlock: a lock on a key held on a quorum
// (N/2+1) of N independent Redis masters, so that the crash, stall or
// restart of a minority of them neither loses the lock nor hands it to a
// second holder.
//
// One go-redis client per master. Do takes the lock, renews it while the
// work runs and releases it; the fence orders the writes of successive
// holders:
//
//	locks, err := redlock.New([]redis.UniversalClient{rdb1, rdb2, rdb3}, redlock.WithFencing())
//	if err != nil {
//		return err
//	}
//	defer locks.Close(shutdownCtx) // with a deadline: it waits for the calls in progress
//	err = locks.Do(ctx, "orders:42", 10*time.Second, func(ctx context.Context, lock *redlock.Lock) error {
//		return store.Write(ctx, order, lock.Fence()) // stop when ctx ends: the lock is lost
//	})
//
// Acquire, TryAcquire and Lock.Release take and free a lock by hand;
// Lock.Extend and Lock.KeepAlive renew it. Give every call a context with a
// deadline.
//
// # The guarantee
//
// While a Lock is valid (before Lock.Until) no other client holds the same
// key through this package, under conditions on the nodes (independent
// masters that neither evict nor lose keys, clocks within the drift
// allowance) and on the holder (it stops at Until), which [algorithm] states
// and explains, with what it does not guarantee: a holder paused past Until
// can still write, and only fencing (WithFencing, Lock.Fence) lets the
// storage refuse that write. nodecheck.Run checks what of the nodes' side a
// client can see. A lock is only as live as a
// quorum: with a majority of nodes down, Acquire fails.
//
// # Documentation
//
// Each topic is explained once, in the repository's docs directory:
// [algorithm] (the algorithm, the guarantee's reasons, the restart guard),
// [waiting] (a busy key, handover), [lease] (KeepAlive, Do, Close),
// [fencing], [election] (leaders and their terms), [owners] (WithOwner,
// reentrancy), [multikey] (AcquireAll, several keys), [shared] (Shared,
// readers and writers), [permits] (Permits, a semaphore), [late-writes]
// (rollbacks, each write's deadline, refusals),
// [operations] (clients, ACL, dead nodes, errors), [observability] and
// [internals] (glossary, files, lock order).
//
// [algorithm]: https://github.com/redlock-go/redlock/blob/main/docs/algorithm.md
// [waiting]: https://github.com/redlock-go/redlock/blob/main/docs/waiting.md
// [lease]: https://github.com/redlock-go/redlock/blob/main/docs/lease.md
// [fencing]: https://github.com/redlock-go/redlock/blob/main/docs/fencing.md
// [election]: https://github.com/redlock-go/redlock/blob/main/docs/election.md
// [owners]: https://github.com/redlock-go/redlock/blob/main/docs/owners.md
// [multikey]: https://github.com/redlock-go/redlock/blob/main/docs/multikey.md
// [shared]: https://github.com/redlock-go/redlock/blob/main/docs/shared.md
// [permits]: https://github.com/redlock-go/redlock/blob/main/docs/permits.md
// [late-writes]: https://github.com/redlock-go/redlock/blob/main/docs/late-writes.md
// [operations]: https://github.com/redlock-go/redlock/blob/main/docs/operations.md
// [observability]: https://github.com/redlock-go/redlock/blob/main/docs/observability.md
// [internals]: https://github.com/redlock-go/redlock/blob/main/docs/internals.md
package redlock

// Version is this release of the package, as CHANGELOG.md names it.
const Version = "v0.10.0"
