package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestMinDeadline: the minimal deadline lock has the property it stands
// for, or its rate would price less than the property. A late copy of a
// released lock's acquire is refused while its deadline runs, also after
// twenty other locks took the key and released it (a refusal a lock, no
// cap); past its deadline the copy is refused by the node's clock, and
// the refusal it no longer needs is gone; a release past the deadline
// leaves nothing.
func TestMinDeadline(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	lk, err := openMinimal(deadlines)([]*redis.Client{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := lk.(*minimalLocker)
	const key = "mindeadline"
	late := func(l *minimalLock) int {
		t.Helper()
		n, err := minDeadlineAcquireScript.Run(ctx, c, []string{key, refusalKey(key, l.token)}, l.token, ttl.Milliseconds(), l.deadline[0]).Int()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	take := func() *minimalLock {
		t.Helper()
		h, err := m.lock(ctx, key)
		if err != nil {
			t.Fatalf("lock: %v (value %q)", err, c.Get(ctx, key).Val())
		}
		return h.(*minimalLock)
	}
	var released []*minimalLock
	for range 21 {
		l := take()
		if err := m.unlock(ctx, l); err != nil {
			t.Fatal(err)
		}
		released = append(released, l)
	}
	for i, l := range released {
		if time.Now().UnixMilli() >= l.deadline[0] {
			break // the machine was slow: the clock check below covers it
		}
		if late(l) != 0 {
			t.Fatalf("a late copy of the acquire of holder %d of 21 landed within its deadline: %q", i+1, c.Get(ctx, key).Val())
		}
	}
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("the key is held after every lock released it")
	}
	time.Sleep(minDeadlineWindow + 20*time.Millisecond)
	// KEYS, not DBSIZE: DBSIZE counts keys expired but not yet collected.
	if left := c.Keys(ctx, "*").Val(); len(left) != 0 {
		t.Errorf("%d keys left after every deadline passed: %v", len(left), left)
	}
	for i, l := range released {
		if late(l) != 0 {
			t.Fatalf("a late copy of the acquire of holder %d landed past its deadline", i+1)
		}
	}
	// A lock released past its deadline leaves no refusal.
	l := take()
	time.Sleep(minDeadlineWindow + 20*time.Millisecond)
	if err := m.unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	if left := c.Keys(ctx, "*").Val(); len(left) != 0 {
		t.Errorf("a release past the deadline left %v", left)
	}
}
