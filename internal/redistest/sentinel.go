package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelReadyTimeout bounds how long StartSentinel waits for the replica
// to sync and for the sentinel to see the master (and replica).
const sentinelReadyTimeout = 15 * time.Second

// DefaultMasterName is the name the sentinel monitors the master under
// unless WithMasterName says otherwise.
const DefaultMasterName = "mymaster"

// SentinelOption changes what StartSentinel starts.
type SentinelOption func(*sentinelConfig)

type sentinelConfig struct {
	masterName string
	replica    bool
}

// WithMasterName sets the name the sentinel monitors the master under.
func WithMasterName(name string) SentinelOption {
	return func(c *sentinelConfig) { c.masterName = name }
}

// WithReplica adds one replica of the master, which the sentinel knows
// about before StartSentinel returns.
func WithReplica() SentinelOption {
	return func(c *sentinelConfig) { c.replica = true }
}

// withConfigFile makes the server read path as its config file.
func withConfigFile(path string) Option {
	return func(c *config) { c.conf = path }
}

// Sentinel is a master redis-server, optionally one replica, and one Redis
// Sentinel process monitoring the master, all on loopback ports. Its
// processes are ordinary Servers, so a test can Pause, Kill or Restart them.
//
// The sentinel runs as "redis-server <config> --sentinel" from the same
// binary as every other server, so nothing beyond redis-server is needed.
// It considers the master down after 1 s without an answer (redis default:
// 30 s) and, with a replica, then fails over to it; with quorum 1 the lone
// sentinel may authorize that on its own.
type Sentinel struct {
	t        testing.TB
	name     string
	master   *Server
	replica  *Server // nil without WithReplica
	sentinel *Server
}

// StartSentinel starts the master, the replica if asked for, and the
// sentinel, and returns once the replica (if any) is in sync and the
// sentinel is connected to the master, resolves the master name to it, and
// lists the replica. Every process is closed when the test ends.
func StartSentinel(t testing.TB, opts ...SentinelOption) *Sentinel {
	t.Helper()
	cfg := sentinelConfig{masterName: DefaultMasterName}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Sentinel{t: t, name: cfg.masterName}
	// Without a delay the master starts the replica's initial sync at once,
	// not after the 5 s redis waits by default for more replicas to join.
	s.master = StartT(t, 1, WithArgs("--repl-diskless-sync-delay", "0"))[0]
	if cfg.replica {
		s.replica = StartT(t, 1, WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(s.master.port)))[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelReadyTimeout)
	defer cancel()
	if s.replica != nil {
		if err := waitReplicaSynced(ctx, s.replica); err != nil {
			t.Fatalf("redistest: replica %s of %s: %v", s.replica.Addr(), s.master.Addr(), err)
		}
	}

	// The sentinel rewrites its config file (its id, the replicas it found),
	// so it gets a writable one of its own, kept across Restart as a real
	// sentinel's would be.
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 10000\n", s.name, s.master.port)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatalf("redistest: writing the sentinel config: %v", err)
	}
	s.sentinel = StartT(t, 1, withConfigFile(conf), WithArgs("--sentinel"))[0]
	if err := s.waitMonitoring(ctx); err != nil {
		t.Fatalf("redistest: sentinel %s monitoring %s at %s: %v", s.sentinel.Addr(), s.name, s.master.Addr(), err)
	}
	return s
}

// waitReplicaSynced waits until the replica reports its link to the master
// up, that is, the initial sync is done.
func waitReplicaSynced(ctx context.Context, replica *Server) error {
	c := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
	defer c.Close()
	return waitUntil(ctx, func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		return infoHas(info, map[string]string{"role": "slave", "master_link_status": "up"})
	})
}

// waitMonitoring waits until the sentinel resolves the master name to the
// master, holds a working link to it, and lists the replica if there is one.
func (s *Sentinel) waitMonitoring(ctx context.Context) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel.Addr(), MaxRetries: -1})
	defer c.Close()
	return waitUntil(ctx, func() error {
		addr, err := c.GetMasterAddrByName(ctx, s.name).Result()
		if err != nil {
			return err
		}
		if got := strings.Join(addr, ":"); got != s.master.Addr() {
			return fmt.Errorf("master resolves to %s", got)
		}
		master, err := c.Master(ctx, s.name).Result()
		if err != nil {
			return err
		}
		if master["flags"] != "master" || master["link-pending-commands"] != "0" {
			return fmt.Errorf("master flags %q, %s pending commands", master["flags"], master["link-pending-commands"])
		}
		if s.replica == nil {
			return nil
		}
		replicas, err := c.Replicas(ctx, s.name).Result()
		if err != nil {
			return err
		}
		for _, r := range replicas {
			if r["name"] == s.replica.Addr() && r["flags"] == "slave" {
				return nil
			}
		}
		return fmt.Errorf("replica %s not listed in %v", s.replica.Addr(), replicas)
	})
}

// MasterName returns the name the sentinel monitors the master under.
func (s *Sentinel) MasterName() string { return s.name }

// MasterAddr returns the address of the server started as the master. After
// a failover the sentinel names another one; ask it with
// SENTINEL GET-MASTER-ADDR-BY-NAME.
func (s *Sentinel) MasterAddr() string { return s.master.Addr() }

// SentinelAddrs returns the sentinels' addresses (there is one).
func (s *Sentinel) SentinelAddrs() []string { return []string{s.sentinel.Addr()} }

// Master returns the server started as the master.
func (s *Sentinel) Master() *Server { return s.master }

// Replica returns the replica, or nil without WithReplica.
func (s *Sentinel) Replica() *Server { return s.replica }

// SentinelServer returns the sentinel process.
func (s *Sentinel) SentinelServer() *Server { return s.sentinel }

// FailoverClient returns a new client that finds the master through the
// sentinel (redis.NewFailoverClient). Each opt may change the options before
// the client is made. The client is closed when the test ends; closing it
// earlier is fine.
func (s *Sentinel) FailoverClient(opts ...func(*redis.FailoverOptions)) *redis.Client {
	o := &redis.FailoverOptions{MasterName: s.name, SentinelAddrs: s.SentinelAddrs()}
	for _, opt := range opts {
		opt(o)
	}
	c := redis.NewFailoverClient(o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}
