package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterSpreadsKeys writes through a cluster client until every master
// owns one of the keys, and reads each key back both through the cluster
// and from the owning node directly.
func TestClusterSpreadsKeys(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 3)
	t.Logf("3-master cluster ready in %v", time.Since(start))

	addrs := c.Addrs()
	if len(addrs) != 3 || len(c.Servers()) != 3 {
		t.Fatalf("Addrs() = %v, %d servers; want 3 of each", addrs, len(c.Servers()))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cl := c.Client(func(o *redis.ClusterOptions) { o.MaxRedirects = 0 })

	keyOn := map[string]string{} // node address -> a key it owns
	for i := 0; len(keyOn) < len(addrs); i++ {
		if i == 1000 {
			t.Fatalf("1000 keys landed on only %v", keyOn)
		}
		key := fmt.Sprintf("k%d", i)
		node, err := cl.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("MasterForKey(%s): %v", key, err)
		}
		if _, seen := keyOn[node.Options().Addr]; !seen {
			keyOn[node.Options().Addr] = key
		}
	}
	for addr, key := range keyOn {
		if err := cl.Set(ctx, key, "v-"+key, 0).Err(); err != nil {
			t.Fatalf("SET %s (owned by %s): %v", key, addr, err)
		}
		if got, err := cl.Get(ctx, key).Result(); err != nil || got != "v-"+key {
			t.Fatalf("GET %s through the cluster = %q, %v", key, got, err)
		}
		direct := newClient(t, addr)
		if got, err := direct.Get(ctx, key).Result(); err != nil || got != "v-"+key {
			t.Fatalf("GET %s on its owner %s = %q, %v", key, addr, got, err)
		}
	}
}

// TestClusterNodeIdentity checks what a library keying nodes on their
// cluster identity relies on: each node has its own id, every node lists all
// of them, and a node restarted (empty) keeps its id and rejoins.
func TestClusterNodeIdentity(t *testing.T) {
	c := StartCluster(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	myID := func(addr string) string {
		t.Helper()
		id, err := newClient(t, addr).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", addr, err)
		}
		return id
	}
	ids := map[string]bool{}
	for _, addr := range c.Addrs() {
		ids[myID(addr)] = true
	}
	if len(ids) != 2 {
		t.Fatalf("node ids %v, want 2 distinct", ids)
	}
	nodes, err := newClient(t, c.Addrs()[1]).ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER NODES: %v", err)
	}
	for id := range ids {
		if !strings.Contains(nodes, id) {
			t.Fatalf("CLUSTER NODES lacks %s:\n%s", id, nodes)
		}
	}

	restarted := c.Servers()[1]
	if err := restarted.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if id := myID(restarted.Addr()); !ids[id] {
		t.Fatalf("restarted node has id %s, want one of %v", id, ids)
	}
	rc := newClient(t, restarted.Addr())
	err = waitUntil(ctx, func() error {
		info, err := rc.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		return infoHas(info, map[string]string{"cluster_state": "ok", "cluster_known_nodes": "2"})
	})
	if err != nil {
		t.Fatalf("restarted node did not rejoin: %v", err)
	}
}

func TestClusterSingleMaster(t *testing.T) {
	c := StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cl := c.Client()
	if err := cl.Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := cl.Set(ctx, "b", "2", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
}
