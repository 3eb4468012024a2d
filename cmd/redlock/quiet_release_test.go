package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRunVerboseNodeWithoutKey: --verbose says a key is left to expire
// only on nodes that may hold the lock's value: not on a node that never
// took it, where another holder has the key (TestRunShutdownWithNodeDown
// shows a down node reported).
func TestRunVerboseNodeWithoutKey(t *testing.T) {
	servers, nodes := startServers(t, 3)
	const key = "taken-on-0"
	rc := redis.NewClient(&redis.Options{Addr: servers[0].Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Set(context.Background(), key, "another holder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r := redlockRun(t, "run", "--nodes", nodes, "--key", key, "--wait", "10s", "--verbose", "--", "true")
	wantExit(t, r, 0)
	if !strings.Contains(r.stderr, "released") {
		t.Fatalf("no release:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "left to expire") {
		t.Errorf("--verbose reports a node that never took the key:\n%s", r.stderr)
	}
}
