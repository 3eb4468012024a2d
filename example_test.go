package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The examples run against three real local servers, started on first use
// and stopped by TestMain. Everything else an example needs is written out
// in it, as a user would copy it.
var examples struct {
	once    sync.Once
	servers []*redistest.Server
	err     error
}

// exampleAddrs returns the addresses of the example servers, starting them
// on first use.
func exampleAddrs() []string {
	examples.once.Do(func() { examples.servers, examples.err = redistest.Start(3) })
	if examples.err != nil {
		panic(examples.err)
	}
	addrs := make([]string, len(examples.servers))
	for i, s := range examples.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

func stopExampleServers() {
	for _, s := range examples.servers {
		_ = s.Close()
	}
}

func Example() {
	// One client per independent Redis master, with context deadlines
	// bounding socket reads.
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() { // "10.0.0.1:6379", ...
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := locks.Acquire(ctx, "orders:42", 10*time.Second)
	if err != nil {
		fmt.Println("not locked:", err) // busy until ctx ended, or a bad argument
		return
	}
	defer lock.Release(ctx)

	// Work only while time.Now() is before lock.Until().
	fmt.Println("locked", lock.Key(), "on a quorum of", locks.Quorum())
	// Output: locked orders:42 on a quorum of 2
}

func ExampleClient_TryAcquire() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	first, err := locks.TryAcquire(ctx, "report:daily", time.Minute)
	if err != nil {
		panic(err)
	}
	_, err = locks.TryAcquire(ctx, "report:daily", time.Minute)
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired))
	fmt.Println(first.Release(ctx))
	// Output:
	// true
	// <nil>
}

func ExampleLock_Extend() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "job:reindex", 2*time.Second)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)
	before := lock.Until()
	// Long work: push the expiry back before Until passes.
	if err := lock.Extend(ctx, 30*time.Second); err != nil {
		fmt.Println("lost the lock; stop before", before)
		return
	}
	fmt.Println("extended by more than 25s:", lock.Until().Sub(before) > 25*time.Second)
	// Output: extended by more than 25s: true
}

func ExampleClient_AcquireAll() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	// A transfer needs both accounts: the keys are taken together or not
	// at all, in whatever order they are named.
	transfer, err := locks.AcquireAll(ctx, []string{"account:bob", "account:alice"}, time.Minute)
	if err != nil {
		panic(err)
	}
	fmt.Println(transfer.Keys())

	// Meanwhile neither account can be locked alone, nor in another set.
	_, err = locks.TryAcquire(ctx, "account:alice", time.Minute)
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired))
	_, err = locks.TryAcquireAll(ctx, []string{"account:bob", "account:carol"}, time.Minute)
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired))
	fmt.Println(transfer.Release(ctx))
	// Output:
	// [account:alice account:bob]
	// true
	// true
	// <nil>
}

func ExampleShared() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	// Two readers of the report at once.
	r1, err := locks.Acquire(ctx, "report:2026", time.Minute, redlock.Shared())
	if err != nil {
		panic(err)
	}
	r2, err := locks.Acquire(ctx, "report:2026", time.Minute, redlock.Shared())
	if err != nil {
		panic(err)
	}
	st, _ := locks.Inspect(ctx, "report:2026")
	fmt.Println(r1.Shared(), st.Shared)

	// A writer waits for both; once it waits, new readers wait behind it.
	written := make(chan error)
	go func() {
		written <- locks.Do(ctx, "report:2026", time.Minute, func(ctx context.Context, l *redlock.Lock) error {
			fmt.Println("writing, shared:", l.Shared())
			return nil
		})
	}()
	time.Sleep(100 * time.Millisecond)
	fmt.Println("readers done")
	if err := errors.Join(r1.Release(ctx), r2.Release(ctx)); err != nil {
		panic(err)
	}
	fmt.Println(<-written)
	// Output:
	// true 2
	// readers done
	// writing, shared: false
	// <nil>
}

func ExamplePermits() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	// At most 2 GPU jobs at once, across every process.
	var jobs []*redlock.Lock
	for range 2 {
		job, err := locks.TryAcquire(ctx, "gpu", time.Minute, redlock.Permits(2))
		if err != nil {
			panic(err)
		}
		slot, _ := job.Permit()
		fmt.Println("job in slot", slot)
		jobs = append(jobs, job)
	}
	_, err = locks.TryAcquire(ctx, "gpu", time.Minute, redlock.Permits(2))
	fmt.Println("a third:", errors.Is(err, redlock.ErrNotAcquired))
	_, err = locks.TryAcquire(ctx, "gpu", time.Minute, redlock.Permits(3))
	fmt.Println("another count:", errors.Is(err, redlock.ErrInvalidArgument))

	// A Release lets a waiting Acquire in.
	if err := jobs[0].Release(ctx); err != nil {
		panic(err)
	}
	third, err := locks.Acquire(ctx, "gpu", time.Minute, redlock.Permits(2))
	if err != nil {
		panic(err)
	}
	slot, _ := third.Permit()
	fmt.Println("the third in slot", slot)
	fmt.Println(errors.Join(third.Release(ctx), jobs[1].Release(ctx)))
	// Output:
	// job in slot 0
	// job in slot 1
	// a third: true
	// another count: true
	// the third in slot 0
	// <nil>
}

func ExampleClient_Do() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes, redlock.WithFencing())
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()
	store := &ledgerStore{} // refuses a fence lower than the highest it has seen

	// The work takes longer than the TTL: Do renews the lock meanwhile, and
	// releases it when the work returns. The write carries the fence, so a
	// holder that stalled past its lock cannot overwrite a newer one.
	err = locks.Do(ctx, "orders:submit", 200*time.Millisecond, func(ctx context.Context, lock *redlock.Lock) error {
		select {
		case <-time.After(500 * time.Millisecond): // the work
		case <-ctx.Done(): // the lock is lost: stop
			return context.Cause(ctx)
		}
		return store.write(lock.Fence(), "order 42 submitted")
	})
	fmt.Println(err, errors.Is(err, redlock.ErrLockLost))
	fmt.Println(store.value, "with fence", store.highest > 0)
	// Output:
	// <nil> false
	// order 42 submitted with fence true
}

func ExampleLock_KeepAlive() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "job:sync", time.Second)
	if err != nil {
		panic(err)
	}
	work := lock.KeepAlive(ctx) // work under this context: it ends when the lock does
	_ = lock.Release(ctx)
	<-work.Done()
	fmt.Println(context.Cause(work))
	// Output: redlock: lock released
}

func ExampleClient_Inspect() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "inventory:9", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)

	// Look without taking: who holds the key on each node, for how long.
	st, err := locks.Inspect(ctx, "inventory:9")
	if err != nil {
		panic(err)
	}
	fmt.Println("held by a quorum:", st.Held)
	ours := 0
	for i, n := range st.Nodes {
		switch {
		case n.Err != nil:
			fmt.Printf("node %d: %v\n", i, n.Err)
		case n.Held && strings.HasPrefix(lock.Token(), n.Holder) && n.TTL > 20*time.Second:
			ours++
		}
	}
	// Acquire returned at a quorum: the last node's write may land just after.
	fmt.Println("ours on a quorum, with more than 20s left:", ours >= locks.Quorum())
	// Output:
	// held by a quorum: true
	// ours on a quorum, with more than 20s left: true
}

func ExampleLock_TTL() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "inventory:10", 30*time.Second)
	if err != nil {
		panic(err)
	}
	left, err := lock.TTL(ctx) // what a quorum of nodes still holds
	fmt.Println(left > 20*time.Second, err)
	_ = lock.Release(ctx)
	_, err = lock.TTL(ctx)
	fmt.Println(errors.Is(err, redlock.ErrNotHeld))
	// Output:
	// true <nil>
	// true
}

// ledgerStore is storage that refuses writes from a holder older than the
// newest it has seen: the check that makes a paused, expired holder harmless.
// It accepts a fence equal to the highest, the holder's own next write. In a
// real store the comparison and the write are one atomic step (a
// conditional UPDATE, a compare-and-set).
type ledgerStore struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

var errStaleWrite = errors.New("stale fence")

func (s *ledgerStore) write(fence uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.highest {
		return errStaleWrite
	}
	s.highest, s.value = fence, value
	return nil
}

func ExampleLock_Fence() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes, redlock.WithFencing())
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()
	store := &ledgerStore{}

	// A takes the lock, then stalls (a GC pause) past its validity.
	a, err := locks.Acquire(ctx, "ledger:7", 100*time.Millisecond)
	if err != nil {
		panic(err)
	}
	time.Sleep(150 * time.Millisecond)

	// B takes over and writes.
	b, err := locks.Acquire(ctx, "ledger:7", 10*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("B:", store.write(b.Fence(), "from B"))

	// A wakes up and writes with its old fence: refused.
	fmt.Println("A:", store.write(a.Fence(), "from A"))
	fmt.Println("value:", store.value)
	_ = b.Release(ctx)
	// Output:
	// B: <nil>
	// A: stale fence
	// value: from B
}

func ExampleClient_Election() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	election, err := locks.Election("scheduler:leader", 10*time.Second)
	if err != nil {
		panic(err)
	}

	// Run campaigns, leads while it can, and campaigns again when the
	// leadership is lost, until ctx ends; here the work is done at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = election.Run(ctx, "host-a", func(ctx context.Context, leader *redlock.Leadership) error {
		// Anyone can see who leads, and with which term.
		seen, err := election.Leader(ctx)
		if err != nil {
			return err
		}
		fmt.Println("leader:", seen.Value, "same term:", seen.Term == leader.Term())
		return nil // done: Run resigns and returns
	})
	fmt.Println("run:", err)
	_, err = election.Leader(ctx)
	fmt.Println("after:", errors.Is(err, redlock.ErrNoLeader))
	// Output:
	// leader: host-a same term: true
	// run: <nil>
	// after: true
}
