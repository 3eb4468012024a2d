package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestMinTombstone: the minimal tombstoned lock has the property it stands
// for, or its rate would price less than the property. A late copy of a
// released lock's acquire is refused, also after another lock took the key
// and released it (its tombstone carries the first one's entry), a hot key
// keeps the entries of its last eight holders, and a tombstone lives 2 s.
func TestMinTombstone(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	m := &minimalLocker{nodes: []*redis.Client{c}, release: tombstones}
	const key = "mintomb"
	late := func(token string) int {
		n, err := minTombAcquireScript.Run(ctx, c, []string{key}, token, ttl.Milliseconds()).Int()
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
	for range 9 {
		l := take()
		if err := m.unlock(ctx, l); err != nil {
			t.Fatal(err)
		}
		released = append(released, l)
	}
	v := c.Get(ctx, key).Val()
	if !strings.HasPrefix(v, "!") {
		t.Fatalf("no tombstone after a release: %q", v)
	}
	for i, l := range released[1:] {
		if late(l.token) != 0 {
			t.Fatalf("a late copy of the acquire of holder %d of the last eight landed: %q", i+2, c.Get(ctx, key).Val())
		}
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Errorf("the tombstone lives %v, want at most 2 s", ttl)
	}
	// The ninth holder back is no longer named: its late copy takes the key.
	if late(released[0].token) != 1 {
		t.Errorf("the tombstone keeps more than eight entries: %q", v)
	}
}
