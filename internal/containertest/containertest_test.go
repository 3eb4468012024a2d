package containertest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/containertest"
	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Both kinds of test node answer to the same fault verbs.
var (
	_ nodetest.Faults = (*containertest.Node)(nil)
	_ nodetest.Faults = (*redistest.Server)(nil)
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestImageAndAvailable(t *testing.T) {
	containertest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	img, err := containertest.Image(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s ready in %v", img, time.Since(start).Round(time.Millisecond))
	if env := os.Getenv(containertest.ImageEnv); env == "" && img != containertest.LocalImage {
		t.Fatalf("Image() = %q, want %q", img, containertest.LocalImage)
	}
}

func TestClusterFaults(t *testing.T) {
	t.Parallel()
	start := time.Now()
	nodes := containertest.StartCluster(t, 3)
	t.Logf("3 nodes started in %v: %v", time.Since(start).Round(time.Millisecond), nodes)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.Addr()] {
			t.Fatalf("two nodes share %s", n.Addr())
		}
		seen[n.Addr()] = true
		if err := n.Client().Set(ctx, "k", n.Name(), 0).Err(); err != nil {
			t.Fatalf("SET on %v: %v", n, err)
		}
	}

	t.Run("kill and restart", func(t *testing.T) {
		n := nodes[0]
		addr := n.Addr()
		c := n.Client()
		begin := time.Now()
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill took %v", time.Since(begin).Round(time.Millisecond))
		if err := ping(ctx, noRetries(n), 2*time.Second); err == nil {
			t.Fatal("PING succeeded on a killed node")
		}
		begin = time.Now()
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart took %v", time.Since(begin).Round(time.Millisecond))
		if n.Addr() != addr {
			t.Fatalf("Addr changed from %s to %s", addr, n.Addr())
		}
		// The same client, as a lock client would keep, works again.
		if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET after restart: got %v, want redis.Nil (no persistence)", err)
		}
		if got := nodes[1].Client().Get(ctx, "k").Val(); got != nodes[1].Name() {
			t.Fatalf("other node lost its key: %q", got)
		}
	})

	t.Run("kill paused, stop, restart running", func(t *testing.T) {
		n := nodes[0]
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
		if err := n.Kill(); err != nil {
			t.Fatalf("Kill of a paused node: %v", err)
		}
		if err := n.Kill(); err != nil {
			t.Fatalf("Kill of a killed node: %v", err)
		}
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := ping(ctx, noRetries(n), 2*time.Second); err == nil {
			t.Fatal("PING succeeded on a stopped node")
		}
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := n.Restart(); err != nil {
			t.Fatalf("Restart of a running node: %v", err)
		}
		if err := ping(ctx, noRetries(n), 2*time.Second); err != nil {
			t.Fatalf("PING after restart: %v", err)
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		n := nodes[1]
		c := n.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		if err := ping(ctx, c, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		err := ping(ctx, c, 200*time.Millisecond)
		took := time.Since(begin)
		if err == nil {
			t.Fatal("PING succeeded on a paused node")
		}
		if !nodetest.IsTimeout(err) {
			t.Fatalf("PING on a paused node: %v, want a timeout", err)
		}
		if took > time.Second {
			t.Fatalf("PING with a 200ms deadline took %v", took)
		}
		t.Logf("PING on paused node: %v after %v", err, took.Round(time.Millisecond))
		if err := n.Resume(); err != nil {
			t.Fatal(err)
		}
		if err := ping(ctx, c, 2*time.Second); err != nil {
			t.Fatalf("PING after resume: %v", err)
		}
		if got := c.Get(ctx, "k").Val(); got != n.Name() {
			t.Fatalf("paused node lost its key: %q", got)
		}
	})

	t.Run("disconnect and reconnect", func(t *testing.T) {
		n := nodes[2]
		addr := n.Addr()
		c := n.Client()
		if err := ping(ctx, c, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := n.Disconnect(); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		err := ping(ctx, noRetries(n), 2*time.Second)
		if err == nil {
			t.Fatal("PING succeeded on a disconnected node")
		}
		t.Logf("PING on disconnected node: %v after %v", err, time.Since(begin).Round(time.Millisecond))
		begin = time.Now()
		if err := n.Reconnect(); err != nil {
			t.Fatal(err)
		}
		t.Logf("reconnect took %v", time.Since(begin).Round(time.Millisecond))
		if n.Addr() != addr {
			t.Fatalf("Addr changed from %s to %s", addr, n.Addr())
		}
		if err := ping(ctx, c, 2*time.Second); err != nil {
			t.Fatalf("PING after reconnect on %s: %v", addr, err)
		}
		if got := c.Get(ctx, "k").Val(); got != n.Name() {
			t.Fatalf("partitioned node lost its key: %q", got)
		}
	})

	t.Run("exec", func(t *testing.T) {
		out, err := nodes[0].Exec(ctx, "redis-cli", "PING")
		if err != nil {
			t.Fatal(err)
		}
		if out != "PONG\n" {
			t.Fatalf("redis-cli PING printed %q", out)
		}
	})
}

func TestReplicatedFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	master, replica := containertest.StartReplicated(t)
	t.Logf("master %v and replica %v started and linked in %v", master, replica, time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mc, rc := master.Client(), replica.Client()

	if err := mc.Set(ctx, "k", "from-master", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT blocks until one replica acknowledged the write, or 5 s passed.
	if n, err := mc.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}
	if got, err := rc.Get(ctx, "k").Result(); err != nil || got != "from-master" {
		t.Fatalf("GET on replica: %q, %v", got, err)
	}
	if err := rc.Set(ctx, "k", "x", 0).Err(); err == nil {
		t.Fatal("a replica accepted a write")
	}

	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, "k", "from-promoted", 0).Err(); err != nil {
		t.Fatalf("SET on the promoted replica: %v", err)
	}
	if got := rc.Get(ctx, "k").Val(); got != "from-promoted" {
		t.Fatalf("GET on the promoted replica: %q", got)
	}

	// The old master comes back empty and follows the new one.
	if err := master.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := master.ReplicaOf(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if err := master.WaitReplicaSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := mc.Get(ctx, "k").Result(); err != nil || got != "from-promoted" {
		t.Fatalf("GET on the demoted master: %q, %v", got, err)
	}
}

// noRetries returns a client that reports the first failure at once, where
// a default client would retry for a while.
func noRetries(n *containertest.Node) *redis.Client {
	return n.Client(func(o *redis.Options) { o.MaxRetries = -1 })
}

// ping sends PING with its own deadline.
func ping(ctx context.Context, c *redis.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.Ping(ctx).Err()
}
