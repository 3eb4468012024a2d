package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// The pipelined floor answers every fan-out, sends every PING once, and
// batches: with many goroutines fanning out at once, each node gets fewer
// pipelines than PINGs.
func TestPipeFloor(t *testing.T) {
	servers := redistest.StartT(t, 3)
	var clients []*redis.Client
	var addrs []string
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
		addrs = append(addrs, s.Addr())
	}
	l, err := openPipeFloor(clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := l.(*pipeFloor)
	stats := newNodeStats(t.Context(), addrs)
	defer stats.close()
	before := stats.snapshot(t.Context())

	const goroutines, each = 32, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for range goroutines {
		wg.Go(func() {
			for range each {
				if err := f.fanOut(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("fan-out: %v", err)
	}
	// The PINGs beyond each fan-out's quorum finish in the background.
	deadline := time.Now().Add(5 * time.Second)
	for _, n := range f.nodes {
		for {
			n.mu.Lock()
			done := !n.sending
			n.mu.Unlock()
			if done || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	d := stats.since(t.Context(), before)
	if d == nil {
		t.Fatal("no INFO from the nodes")
	}
	if want := int64(goroutines * each * len(clients)); d.calls["ping"] != want {
		t.Errorf("the nodes got %d PINGs, want %d", d.calls["ping"], want)
	}
	for i, n := range f.nodes {
		n.mu.Lock()
		rounds := n.rounds
		n.mu.Unlock()
		if rounds == 0 || rounds >= goroutines*each {
			t.Errorf("node %d: %d pipelines for %d PINGs, want fewer pipelines than PINGs", i, rounds, goroutines*each)
		}
		t.Logf("node %d: %d pipelines for %d PINGs", i, rounds, goroutines*each)
	}
}

// With no node answering, a fan-out reports no quorum instead of hanging.
func TestPipeFloorNoQuorum(t *testing.T) {
	servers := redistest.StartT(t, 1)
	var clients []*redis.Client
	for _, addr := range []string{servers[0].Addr(), "127.0.0.1:1", "127.0.0.1:2"} {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	l, _ := openPipeFloor(clients, nil)
	if _, err := l.lock(context.Background(), "k"); err == nil {
		t.Fatal("a fan-out with one node of three answering found a quorum")
	}
}

// The local mutex holds one holder at a time, over the same contention loop
// as the libraries.
func TestMutexCeiling(t *testing.T) {
	l, _ := openMutex(nil, nil)
	e := &entrant{c: contender{name: nameMutex}, l: l, s: &sample{lib: nameMutex}}
	sc := &scenario{name: "test", kind: contention, goroutines: 8, hold: 50 * time.Microsecond}
	e.contention(t.Context(), config{sliceTime: 100 * time.Millisecond}, sc, 0)
	if e.s.ops == 0 || e.s.overlaps != 0 || e.s.failures != 0 {
		t.Fatalf("acquisitions %d, overlaps %d, failures %d", e.s.ops, e.s.overlaps, e.s.failures)
	}
	c, _ := cycle(e.s)
	if c < sc.hold {
		t.Errorf("cycle %v shorter than the hold %v", c, sc.hold)
	}
	t.Logf("%d acquisitions, cycle %v", e.s.ops, c)
}

// The batched scripts' ceiling is a lock: every goroutine takes and
// releases keys of its own, a held key is refused to another lock, every
// call reaches every node once, and calls are batched: fewer pipelines
// than calls.
func TestBatchedScripts(t *testing.T) {
	servers := redistest.StartT(t, 3)
	var clients []*redis.Client
	var addrs []string
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
		addrs = append(addrs, s.Addr())
	}
	l, err := openBatchedScripts(clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := l.(*batchedScripts)
	ctx := t.Context()
	h, err := b.lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.lock(ctx, "held"); err == nil {
		t.Fatal("a second lock took a held key")
	}
	if err := b.unlock(ctx, h); err != nil {
		t.Fatal(err)
	}
	stats := newNodeStats(ctx, addrs)
	defer stats.close()
	before := stats.snapshot(ctx)
	const goroutines, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				h, err := b.lock(ctx, "k"+string(rune('A'+g)))
				if err == nil {
					err = b.unlock(ctx, h)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("lock or unlock: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, n := range b.nodes {
		for {
			n.mu.Lock()
			done := !n.sending
			n.mu.Unlock()
			if done || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	d := stats.since(ctx, before)
	if d == nil {
		t.Fatal("no INFO from the nodes")
	}
	if want := int64(2 * goroutines * each * len(clients)); d.calls["evalsha"] != want {
		t.Errorf("the nodes ran %d scripts, want %d", d.calls["evalsha"], want)
	}
	for i, n := range b.nodes {
		n.mu.Lock()
		rounds := n.rounds
		n.mu.Unlock()
		if rounds == 0 || rounds >= 2*goroutines*each {
			t.Errorf("node %d: %d pipelines for %d calls, want fewer pipelines than calls", i, rounds, 2*goroutines*each)
		}
	}
}
