package engine

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBounded: at most Max tasks run at once, and every task runs once.
func TestBounded(t *testing.T) {
	var running, most atomic.Int32
	var ran atomic.Int32
	release := make(chan struct{})
	q := &Bounded[int]{Max: 2, Run: func(x int) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if x < 2 {
			<-release // the first two hold their goroutines until the rest queued
		}
		ran.Add(1)
		running.Add(-1)
	}}
	var wg sync.WaitGroup
	for x := range 2 {
		wg.Go(func() { q.Do(x) })
	}
	waitUntil(t, "two tasks running", func() bool { return running.Load() == 2 })
	for x := 2; x < 6; x++ {
		q.Do(x) // queued: returns at once
	}
	close(release)
	wg.Wait()
	if most.Load() != 2 || ran.Load() != 6 {
		t.Fatalf("%d tasks ran at once (want 2), %d ran (want 6)", most.Load(), ran.Load())
	}
}

// TestBoundedOrder: the tasks that waited run in the order they came. One
// runner at a time, so that the order they ran in is the order they were
// taken in.
func TestBoundedOrder(t *testing.T) {
	var order []int // appended by one runner at a time
	release := make(chan struct{})
	started := make(chan struct{})
	q := &Bounded[int]{Max: 1, Run: func(x int) {
		if x == 0 {
			close(started)
			<-release
		}
		order = append(order, x)
	}}
	done := make(chan struct{})
	go func() { q.Do(0); close(done) }()
	<-started
	for x := 1; x < 5; x++ {
		q.Do(x) // queued: returns at once
	}
	close(release)
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("the queued tasks did not run")
	}
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(order, want) {
		t.Fatalf("ran in the order %v, want %v", order, want)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}
