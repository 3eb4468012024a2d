package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of every Redis Cluster.
const clusterSlots = 16384

// clusterReadyTimeout bounds how long StartCluster waits for every node to
// report a healthy cluster. A fresh master keeps its cluster state "fail" for
// about 2 s after it started (CLUSTER_WRITABLE_DELAY in redis), so a start
// normally takes a little over that.
const clusterReadyTimeout = 20 * time.Second

// Cluster is a Redis Cluster of masters without replicas, one redis-server
// process per master, on loopback ports. Its nodes are ordinary Servers, so
// a test can Pause, Kill or Restart one; note that a restarted node comes back
// empty but keeps its cluster identity and slots (nodes.conf lives in the
// node's directory), and that the cluster refuses commands once a master has
// been unreachable for cluster-node-timeout (redis default: 15 s; change it
// with WithArgs("--cluster-node-timeout", ...)).
type Cluster struct {
	t        testing.TB
	servers  []*Server
	busPorts []int // each server's cluster bus port
}

// StartCluster starts a Redis Cluster of the given number of masters (at
// least 1) and returns once every node reports cluster_state:ok, knows every
// node, and sees all 16384 slots assigned. Slots are split into contiguous,
// nearly equal ranges in node order. opts apply to every node. The cluster
// is wired with CLUSTER ADDSLOTSRANGE and CLUSTER MEET, so only the
// redis-server binary is needed. Every node is closed when the test ends.
func StartCluster(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: StartCluster needs at least 1 master, got %d", masters)
	}
	c := &Cluster{t: t}
	for range masters {
		s, busPort, err := startClusterNode(opts)
		if err != nil {
			t.Fatalf("redistest: starting a cluster node: %v", err)
		}
		closeAtCleanup(t, []*Server{s})
		c.servers = append(c.servers, s)
		c.busPorts = append(c.busPorts, busPort)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := c.form(ctx); err != nil {
		t.Fatalf("redistest: forming a cluster of %d masters: %v", masters, err)
	}
	return c
}

// startClusterNode starts one cluster-enabled server. The cluster bus listens
// on its own free port: the default, port+10000, does not exist for the
// upper part of the ephemeral range. That port is probed like the client
// port, so a start that fails to bind is retried with a fresh one.
func startClusterNode(opts []Option) (*Server, int, error) {
	var lastErr error
	for range startAttempts {
		busPort, err := freePort()
		if err != nil {
			return nil, 0, err
		}
		// The caller's options come first so that ours win.
		nodeOpts := append(opts[:len(opts):len(opts)], WithArgs(
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(busPort),
		))
		servers, err := Start(1, nodeOpts...)
		if err == nil {
			return servers[0], busPort, nil
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	return nil, 0, lastErr
}

// formingNodeTimeout is the cluster-node-timeout while the cluster forms.
// A node learns another's slots only from that node's own heartbeats, which
// it otherwise receives at a random one peer per second or after half the
// node timeout (7.5 s by default): with 5 masters the cluster took up to
// 10 s to agree. A short timeout makes every node ping every peer each
// 100 ms cron tick and shortens redis's rejoin delay to its 500 ms minimum.
const formingNodeTimeout = "500"

// form assigns the slots, introduces the nodes to each other and waits until
// every node sees a healthy cluster. Distinct config epochs, set before the
// nodes meet, spare redis its epoch-collision round (redis-cli does the same).
// The node timeout is short while the cluster forms and set back afterwards.
func (c *Cluster) form(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.servers))
	for i, s := range c.servers {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		defer clients[i].Close()
	}
	n := len(c.servers)
	nodeTimeouts := make([]string, n)
	for i, cl := range clients {
		v, err := cl.ConfigGet(ctx, "cluster-node-timeout").Result()
		if err != nil {
			return fmt.Errorf("%s: CONFIG GET cluster-node-timeout: %w", c.servers[i].Addr(), err)
		}
		nodeTimeouts[i] = v["cluster-node-timeout"]
		if err := cl.ConfigSet(ctx, "cluster-node-timeout", formingNodeTimeout).Err(); err != nil {
			return fmt.Errorf("%s: CONFIG SET cluster-node-timeout: %w", c.servers[i].Addr(), err)
		}
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", c.servers[i].Addr(), err)
		}
		first, last := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE %d %d: %w", c.servers[i].Addr(), first, last, err)
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			s := c.servers[j]
			if err := clients[i].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, c.busPorts[j]).Err(); err != nil {
				return fmt.Errorf("%s: CLUSTER MEET %s: %w", c.servers[i].Addr(), s.Addr(), err)
			}
		}
	}
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(clusterSlots),
		"cluster_known_nodes":    strconv.Itoa(n),
		"cluster_size":           strconv.Itoa(n),
	}
	for i, cl := range clients {
		err := waitUntil(ctx, func() error {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			return infoHas(info, want)
		})
		if err != nil {
			return fmt.Errorf("%s never saw a healthy cluster: %w", c.servers[i].Addr(), err)
		}
	}
	for i, cl := range clients {
		if err := cl.ConfigSet(ctx, "cluster-node-timeout", nodeTimeouts[i]).Err(); err != nil {
			return fmt.Errorf("%s: CONFIG SET cluster-node-timeout: %w", c.servers[i].Addr(), err)
		}
	}
	return nil
}

// Addrs returns the nodes' addresses ("127.0.0.1:PORT"), in slot order: node
// i serves the i-th range of slots.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.servers))
	for i, s := range c.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Servers returns the nodes, in the order of Addrs, for fault injection.
func (c *Cluster) Servers() []*Server { return c.servers }

// Client returns a new cluster client seeded with every node's address.
// Each opt may change the options before the client is made. The client is
// closed when the test ends; closing it earlier is fine.
func (c *Cluster) Client(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, opt := range opts {
		opt(o)
	}
	cl := redis.NewClusterClient(o)
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// infoHas checks an INFO-style reply ("field:value" lines) for every wanted
// field and value.
func infoHas(info string, want map[string]string) error {
	got := make(map[string]string)
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("%s is %q, want %q", k, got[k], v)
		}
	}
	return nil
}

// waitUntil calls check until it returns nil or ctx ends, and then returns
// check's last error.
func waitUntil(ctx context.Context, check func() error) error {
	const interval = 20 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
