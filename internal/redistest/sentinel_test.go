package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSentinelFailoverClient(t *testing.T) {
	start := time.Now()
	s := StartSentinel(t, WithMasterName("locks"))
	t.Logf("sentinel ready in %v", time.Since(start))
	if s.MasterName() != "locks" {
		t.Fatalf("MasterName() = %q, want locks", s.MasterName())
	}
	if s.Replica() != nil {
		t.Fatal("Replica() without WithReplica is not nil")
	}
	if len(s.SentinelAddrs()) != 1 || s.SentinelAddrs()[0] != s.SentinelServer().Addr() {
		t.Fatalf("SentinelAddrs() = %v, want [%s]", s.SentinelAddrs(), s.SentinelServer().Addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	var fc redis.UniversalClient = s.FailoverClient(func(o *redis.FailoverOptions) { o.MaxRetries = -1 })
	if err := fc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	if got, err := fc.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET through the failover client = %q, %v", got, err)
	}
	direct := newClient(t, s.MasterAddr())
	if got, err := direct.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET on the master = %q, %v", got, err)
	}
}

func TestSentinelWithReplica(t *testing.T) {
	start := time.Now()
	s := StartSentinel(t, WithReplica())
	t.Logf("sentinel with replica ready in %v", time.Since(start))
	if s.MasterName() != DefaultMasterName || s.Replica() == nil {
		t.Fatalf("MasterName() = %q, Replica() = %v", s.MasterName(), s.Replica())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()

	fc := s.FailoverClient()
	if err := fc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	replica := newClient(t, s.Replica().Addr())
	err := waitUntil(ctx, func() error { return replica.Get(ctx, "k").Err() })
	if err != nil {
		t.Fatalf("GET on the replica: %v", err)
	}
	ro := s.FailoverClient(func(o *redis.FailoverOptions) { o.ReplicaOnly = true })
	if got, err := ro.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET through a replica-only failover client = %q, %v", got, err)
	}

	// The master dies: the sentinel promotes the replica on its own, and
	// the failover client follows.
	if err := s.Master().Kill(); err != nil {
		t.Fatalf("Kill master: %v", err)
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs()[0]})
	defer sc.Close()
	err = waitUntil(ctx, func() error {
		addr, err := sc.GetMasterAddrByName(ctx, s.MasterName()).Result()
		if err != nil {
			return err
		}
		if got := strings.Join(addr, ":"); got != s.Replica().Addr() {
			return fmt.Errorf("master is %s", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("no failover to the replica %s: %v", s.Replica().Addr(), err)
	}
	if err := fc.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client after the failover: %v", err)
	}
	if got, err := replica.Get(ctx, "k").Result(); err != nil || got != "after" {
		t.Fatalf("GET on the promoted replica = %q, %v", got, err)
	}
}
