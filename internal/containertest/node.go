package containertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/redlock-go/redlock/internal/nodetest"
)

// Node is one redis-server running in its own container, with handles to
// break it in the ways a chaos test needs. Its fault verbs are those of
// [nodetest.Faults], which a redis-server process (redistest.Server) has
// too, plus Disconnect and Reconnect; like a process's, they take no context
// and are bounded by the node's own timeouts (a Docker call by 30 s, waiting
// for PING by the start timeout). Its methods are safe for concurrent use,
// but faults on one node are meant to be applied one at a time (for example
// Kill and Disconnect racing each other on the same node give whatever order
// the engine picks).
type Node struct {
	tb           testing.TB
	ctr          *testcontainers.DockerContainer
	name         string
	addr         string
	alias        string // DNS name in the node's shared network, "" if none
	startTimeout time.Duration

	mu       sync.Mutex
	paused   bool
	detached []detachedEndpoint // networks left by Disconnect
}

// detachedEndpoint remembers a network a node was disconnected from and its
// aliases there, so that Reconnect can restore what other containers resolve.
type detachedEndpoint struct {
	network string
	aliases []string
}

// Name returns a short label for the node ("node-0", "master", "replica"),
// for test logs.
func (n *Node) Name() string { return n.name }

// Addr returns the host:port at which the test process reaches the node. It
// does not change when the node is killed and started again or disconnected
// and reconnected, so clients can be kept across faults, as a lock client
// would be in production.
func (n *Node) Addr() string { return n.addr }

// Alias returns the node's DNS name inside the Docker network it shares with
// other nodes (as made by [StartReplicated]), or "" when it has none. Other
// containers, not the test process, use it; see [Node.ReplicaOf].
func (n *Node) Alias() string { return n.alias }

// Container returns the underlying testcontainers container, for anything
// this package does not wrap (logs, inspection).
func (n *Node) Container() *testcontainers.DockerContainer { return n.ctr }

// String returns the node's name and address, for test logs.
func (n *Node) String() string { return n.name + "@" + n.addr }

// Client returns a new go-redis client for the node, closed when the test
// ends (so create it while the test runs). Apart from Addr it has go-redis's
// default options, as users' clients do (ContextTimeoutEnabled is false by
// default, so context deadlines do not bound socket reads); opts may change
// them.
func (n *Node) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: n.addr}
	for _, opt := range opts {
		opt(o)
	}
	c := redis.NewClient(o)
	n.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL to redis-server and returns once the container has
// stopped: an abrupt crash. Persistence is off, so every key is lost;
// [Node.Restart] brings the node back empty at the same address. Killing a
// node that is not running does nothing.
func (n *Node) Kill() error {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	return n.wrap("kill", withDocker(ctx, func(cli *client.Client) error { return n.kill(ctx, cli) }))
}

// kill kills the container unless it is already stopped, and waits until
// the engine says it has.
func (n *Node) kill(ctx context.Context, cli *client.Client) error {
	running, err := n.thaw(ctx, cli)
	if err != nil || !running {
		return err
	}
	if _, err := cli.ContainerKill(ctx, n.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return err
	}
	return n.waitState(ctx, cli, func(s *container.State) bool { return !s.Running })
}

// thaw unpauses the container if it is paused, since the engine signals no
// frozen container, and reports whether it runs.
func (n *Node) thaw(ctx context.Context, cli *client.Client) (running bool, err error) {
	res, err := cli.ContainerInspect(ctx, n.ctr.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		return false, err
	}
	st := res.Container.State
	if st == nil || !st.Running {
		return false, nil
	}
	if st.Paused {
		if _, err := cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
			return true, err
		}
		n.setPaused(false)
	}
	return true, nil
}

// stopGrace is how long Stop lets redis-server shut down after SIGTERM.
const stopGrace = 5 * time.Second

// Stop stops the node gracefully (SIGTERM, then SIGKILL after 5 s): a clean
// shutdown, as opposed to [Node.Kill]. Keys are lost either way. Stopping a
// node that is not running does nothing.
func (n *Node) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace+dockerTimeout)
	defer cancel()
	var running bool
	err := withDocker(ctx, func(cli *client.Client) (err error) {
		running, err = n.thaw(ctx, cli)
		return err
	})
	if err != nil || !running {
		return n.wrap("stop", err)
	}
	grace := stopGrace
	return n.wrap("stop", n.ctr.Stop(ctx, &grace))
}

// Restart starts the container again, empty, on the same host port, killing
// it first if it still runs, and waits until redis-server answers PING
// (unless the node is disconnected, when there is nothing to wait for).
func (n *Node) Restart() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.startTimeout)
	defer cancel()
	if err := withDocker(ctx, func(cli *client.Client) error { return n.kill(ctx, cli) }); err != nil {
		return n.wrap("restart", err)
	}
	if err := n.ctr.Start(ctx); err != nil {
		return n.wrap("restart", err)
	}
	n.mu.Lock()
	reachable := n.detached == nil
	n.mu.Unlock()
	if !reachable {
		return nil
	}
	return n.wrap("restart", nodetest.WaitReady(ctx, n.addr, nil))
}

// Pause freezes every process of the container (docker pause, the cgroup
// freezer). The kernel still accepts connections and buffers commands, but
// nothing answers: a stalled node, like one in a long GC pause or swapping.
// Clients hang until their own deadline.
func (n *Node) Pause() error {
	return n.freeze("pause", true, func(ctx context.Context, cli *client.Client, id string) error {
		_, err := cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
		return err
	})
}

// Resume thaws a paused node. Redis then answers the commands that queued
// up meanwhile, in order; clients that gave up will not read those answers.
func (n *Node) Resume() error {
	return n.freeze("resume", false, func(ctx context.Context, cli *client.Client, id string) error {
		_, err := cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		return err
	})
}

// freeze runs the engine call of Pause or Resume and records the outcome.
func (n *Node) freeze(op string, paused bool, call func(context.Context, *client.Client, string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	err := withDocker(ctx, func(cli *client.Client) error { return call(ctx, cli, n.ctr.GetContainerID()) })
	if err == nil {
		n.setPaused(paused)
	}
	return n.wrap(op, err)
}

func (n *Node) setPaused(paused bool) {
	n.mu.Lock()
	n.paused = paused
	n.mu.Unlock()
}

// Disconnect cuts the node off every Docker network it is attached to (with
// Force), so that the host port stops being published: new connections are
// refused and open ones are closed. It also cuts replication to or from
// other containers. redis-server keeps running with its data, so this is a
// partition, not a crash.
func (n *Node) Disconnect() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.detached != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	var detached []detachedEndpoint
	err := withDocker(ctx, func(cli *client.Client) error {
		res, err := cli.ContainerInspect(ctx, n.ctr.GetContainerID(), client.ContainerInspectOptions{})
		if err != nil {
			return err
		}
		if res.Container.NetworkSettings == nil || len(res.Container.NetworkSettings.Networks) == 0 {
			return errors.New("container is attached to no network")
		}
		for name, ep := range res.Container.NetworkSettings.Networks {
			var aliases []string
			if ep != nil && name != "bridge" { // the default bridge has no aliases
				aliases = ep.Aliases
			}
			_, err := cli.NetworkDisconnect(ctx, name, client.NetworkDisconnectOptions{
				Container: n.ctr.GetContainerID(),
				Force:     true,
			})
			if err != nil {
				return fmt.Errorf("network %s: %w", name, err)
			}
			detached = append(detached, detachedEndpoint{network: name, aliases: aliases})
		}
		return nil
	})
	if len(detached) > 0 {
		n.detached = detached // even on error, so Reconnect undoes what was done
	}
	return n.wrap("disconnect", err)
}

// Reconnect attaches the node again to the networks [Node.Disconnect] took
// it off, with the same aliases, so that the engine publishes the same host
// port again, and waits until PING answers (unless the node is paused or
// stopped).
func (n *Node) Reconnect() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.detached == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.startTimeout)
	defer cancel()
	running := false
	err := withDocker(ctx, func(cli *client.Client) error {
		for len(n.detached) > 0 {
			ep := n.detached[0]
			_, err := cli.NetworkConnect(ctx, ep.network, client.NetworkConnectOptions{
				Container:      n.ctr.GetContainerID(),
				EndpointConfig: &network.EndpointSettings{Aliases: ep.aliases},
			})
			if err != nil {
				return fmt.Errorf("network %s: %w", ep.network, err)
			}
			n.detached = n.detached[1:]
		}
		res, err := cli.ContainerInspect(ctx, n.ctr.GetContainerID(), client.ContainerInspectOptions{})
		if err != nil {
			return err
		}
		running = res.Container.State != nil && res.Container.State.Running
		return nil
	})
	if err != nil {
		return n.wrap("reconnect", err)
	}
	n.detached = nil
	if !running || n.paused {
		return nil
	}
	return n.wrap("reconnect", nodetest.WaitReady(ctx, n.addr, nil))
}

// Exec runs cmd inside the container and returns its combined output, or an
// error that includes the output if it exits non-zero. The local image holds
// only redis-server and redis-cli (no shell); official images have more.
func (n *Node) Exec(ctx context.Context, cmd ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, dockerTimeout)
	defer cancel()
	code, r, err := n.ctr.Exec(ctx, cmd, tcexec.Multiplexed())
	if err != nil {
		return "", n.wrap("exec", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return "", n.wrap("exec", err)
	}
	if code != 0 {
		return string(out), n.wrap("exec", fmt.Errorf("%q exited with %d: %s", cmd, code, out))
	}
	return string(out), nil
}

// Promote turns a replica into a master (REPLICAOF NO ONE), as a failover
// does. Writes acknowledged by the old master but not yet replicated are not
// on it: that is the point of the async-replication scenario.
func (n *Node) Promote(ctx context.Context) error {
	return n.wrap("promote", n.command(ctx, "REPLICAOF", "NO", "ONE"))
}

// ReplicaOf makes the node a replica of master (REPLICAOF), for example to
// bring a failed master back as a replica of the promoted one. Both must
// share a Docker network (see [Node.Alias]). It does not wait for the
// initial sync; see [Node.WaitReplicaSynced].
func (n *Node) ReplicaOf(ctx context.Context, master *Node) error {
	if master.alias == "" {
		return n.wrap("replicaof", fmt.Errorf("%s has no network alias; start both with StartReplicated", master.name))
	}
	return n.wrap("replicaof", n.command(ctx, "REPLICAOF", master.alias, "6379"))
}

// WaitReplicaSynced waits until the node is a replica whose link to its
// master is up (INFO replication reports master_link_status:up), so that
// writes made on the master from then on are streamed to it.
func (n *Node) WaitReplicaSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.startTimeout)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
	defer func() { _ = c.Close() }()
	var last error
	for {
		info, err := c.Info(ctx, "replication").Result()
		switch {
		case err != nil:
			last = err
		case strings.Contains(info, "master_link_status:up"):
			return nil
		default:
			last = errors.New("master_link_status is not up")
		}
		select {
		case <-ctx.Done():
			return n.wrap("wait for replication", fmt.Errorf("%w (last: %v)", ctx.Err(), last))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kickReplication makes a replica that has not reached its master yet try
// again now. Redis retries its master link once a second, and a replica
// started together with its master usually made its first try before the
// master answered; repointing it connects at once and saves one to two
// seconds per pair. A replica already syncing is left alone: interrupting a
// transfer would make the master finish it before starting another.
func (n *Node) kickReplication(ctx context.Context, master *Node) error {
	info, err := n.info(ctx, "replication")
	if err != nil {
		return n.wrap("replication info", err)
	}
	if !strings.Contains(info, "master_link_status:down") || !strings.Contains(info, "master_sync_in_progress:0") {
		return nil
	}
	if err := n.command(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		return n.wrap("replicaof", err)
	}
	return n.ReplicaOf(ctx, master)
}

// info returns one section of INFO, read on a short-lived connection.
func (n *Node) info(ctx context.Context, section string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
	defer func() { _ = c.Close() }()
	return c.Info(ctx, section).Result()
}

// command sends one command on a short-lived connection and checks that it
// succeeded.
func (n *Node) command(ctx context.Context, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
	defer func() { _ = c.Close() }()
	return c.Do(ctx, args...).Err()
}

// waitState polls the container until ok accepts its state. Kill returns
// when the signal is sent; the engine marks the container stopped (and
// releases its port) a moment later.
func (n *Node) waitState(ctx context.Context, cli *client.Client, ok func(*container.State) bool) error {
	for {
		res, err := cli.ContainerInspect(ctx, n.ctr.GetContainerID(), client.ContainerInspectOptions{})
		if err != nil {
			return err
		}
		if res.Container.State != nil && ok(res.Container.State) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wrap prefixes err with the operation and node, or returns nil.
func (n *Node) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("containertest: %s %s: %w", op, n, err)
}
