package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The examples run against real local servers, started on first use and
// stopped by TestMain.
var examples struct {
	once    sync.Once
	servers []*redistest.Server
	err     error
}

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
	// One client per independent Redis master.
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
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
		fmt.Println("busy:", err)
		return
	}
	defer lock.Release(ctx)

	// Work only while time.Now() is before lock.Until().
	fmt.Println("locked", lock.Key(), "on a quorum of", locks.Quorum())
	// Output: locked orders:42 on a quorum of 2
}

func ExampleClient_TryAcquire() {
	locks, done := exampleClient()
	defer done()
	ctx := context.Background()

	first, _ := locks.TryAcquire(ctx, "report:daily", time.Minute)
	_, err := locks.TryAcquire(ctx, "report:daily", time.Minute)
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired))
	fmt.Println(first.Release(ctx))
	// Output:
	// true
	// <nil>
}

func ExampleLock_Extend() {
	locks, done := exampleClient()
	defer done()
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

// ledgerStore is storage that refuses writes from a holder older than the
// newest it has seen: the check that makes a paused, expired holder harmless.
// In a real store the comparison and the write are one atomic step (a
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
	locks, done := exampleClient(redlock.WithFencing())
	defer done()
	ctx := context.Background()
	store := &ledgerStore{}

	// A takes the lock, then stalls (a GC pause) past its validity.
	a, _ := locks.Acquire(ctx, "ledger:7", 100*time.Millisecond)
	time.Sleep(150 * time.Millisecond)

	// B takes over and writes.
	b, _ := locks.Acquire(ctx, "ledger:7", 10*time.Second)
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

// exampleClient is the setup of Example, for the other examples.
func exampleClient(opts ...redlock.Option) (*redlock.Client, func()) {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: addr}))
	}
	locks, err := redlock.New(nodes, opts...)
	if err != nil {
		panic(err)
	}
	return locks, func() {
		_ = locks.Close(context.Background())
		for _, n := range nodes {
			_ = n.Close()
		}
	}
}
