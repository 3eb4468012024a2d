package containertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/redlock-go/redlock/internal/nodetest"
)

// baseArgs are the redis-server flags every node gets; [StartCluster] says
// why.
var baseArgs = []string{
	"--protected-mode", "no",
	"--save", "",
	"--appendonly", "no",
	"--enable-debug-command", "yes",
}

// redisPort is the port redis-server listens on inside each container.
var redisPort = network.MustParsePort("6379/tcp")

// Option changes how [StartCluster] and [StartReplicated] start nodes.
type Option func(*config)

type config struct {
	args         []string
	startTimeout time.Duration
	image        string
}

// prepare is the common start of [StartCluster] and [StartReplicated]: it
// skips or fails tb without Docker, applies opts and makes sure the image is
// there.
func prepare(tb testing.TB, opts []Option) config {
	tb.Helper()
	Require(tb)
	c := config{startTimeout: 60 * time.Second}
	for _, opt := range opts {
		opt(&c)
	}
	c.image = image(tb)
	return c
}

// WithArgs appends redis-server flags to the ones every node gets (see
// [StartCluster]), for scenarios that need another setting (say
// "--maxmemory", "1mb"). A flag given twice takes its last value.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithStartTimeout bounds how long starting the nodes may take (image build
// excluded), and how long [Node.Restart] and [Node.Reconnect] wait for PING.
// The default, 60 s, leaves room for a slow, loaded CI machine.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

// StartCluster starts n independent Redis masters, in parallel, and returns
// them once each answers PING. They are removed when the test ends. It skips
// or fails the test as [Require] does when Docker is unavailable, and fails
// it if any node does not start.
//
// Every node runs redis-server with --protected-mode no (traffic arrives
// over a Docker bridge, not loopback), --save "" and --appendonly no (a
// killed node comes back empty) and --enable-debug-command yes (DEBUG SLEEP
// stalls a node from inside; it cannot be enabled at run time).
func StartCluster(tb testing.TB, n int, opts ...Option) []*Node {
	tb.Helper()
	cfg := prepare(tb, opts)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.startTimeout)
	defer cancel()
	specs := make([]nodeSpec, n)
	for i := range specs {
		specs[i] = nodeSpec{name: fmt.Sprintf("node-%d", i), args: cfg.args}
	}
	return startNodes(ctx, tb, cfg, specs)
}

// StartReplicated starts a master and a replica of it (--replicaof) in a
// Docker network of their own, and returns them once the replica's link to
// the master is up. Both are reachable from the test process at their own
// Addr. Replication is asynchronous, as in production: a write acknowledged
// by the master may not have reached the replica yet when the master dies
// and the replica is promoted ([Node.Promote]).
//
// The replica's command line carries "--replicaof master 6379", as a replica
// configured by file would: started again after [Node.Kill] it follows the
// master again, even if it had been promoted. The master comes back from a
// kill as an empty master. Their network aliases are "master" and "replica"
// ([Node.Alias]); [Node.Disconnect] cuts replication as well.
func StartReplicated(tb testing.TB, opts ...Option) (master, replica *Node) {
	tb.Helper()
	cfg := prepare(tb, opts)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.startTimeout)
	defer cancel()
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(map[string]string{Label: "true"}))
	if err != nil {
		tb.Fatalf("containertest: create network: %v", err)
	}
	tb.Cleanup(func() { // registered first, so it runs after the containers are gone
		ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
		defer cancel()
		if err := nw.Remove(ctx); err != nil && !cerrdefs.IsNotFound(err) {
			tb.Errorf("containertest: remove network %s: %v", nw.Name, err)
		}
	})

	// A master streams its snapshot to replicas without touching disk, but by
	// default first waits 5 s for more replicas to join the same transfer.
	args := append([]string{"--repl-diskless-sync-delay", "0"}, cfg.args...)
	replicaArgs := append(append([]string{}, args...), "--replicaof", "master", "6379")
	nodes := startNodes(ctx, tb, cfg, []nodeSpec{
		{name: "master", args: args, network: nw, alias: "master"},
		{name: "replica", args: replicaArgs, network: nw, alias: "replica"},
	})
	master, replica = nodes[0], nodes[1]
	if err := replica.kickReplication(ctx, master); err != nil {
		tb.Fatal(err)
	}
	if err := replica.WaitReplicaSynced(ctx); err != nil {
		tb.Fatal(err)
	}
	return master, replica
}

// image returns [Image] or fails the test. Building the image is not
// counted against the start timeout; it has its own, generous bound.
func image(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, err := Image(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return img
}

// nodeSpec describes one container to start.
type nodeSpec struct {
	name    string
	args    []string
	network *testcontainers.DockerNetwork // nil: the default bridge
	alias   string
}

// startNodes starts the specs in parallel and registers their removal, also
// in parallel, with tb, then fails the test if any did not start. Removal is
// registered after all starts returned, so that a failed start cannot leave
// a container behind.
func startNodes(ctx context.Context, tb testing.TB, cfg config, specs []nodeSpec) []*Node {
	tb.Helper()
	nodes := make([]*Node, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { nodes[i], errs[i] = startNode(ctx, tb, cfg, spec) })
	}
	wg.Wait()
	tb.Cleanup(func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n != nil {
				wg.Go(func() { n.remove(tb) })
			}
		}
		wg.Wait()
	})
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	return nodes
}

// startNode creates and starts one container with its port 6379 bound to a
// fixed free port of 127.0.0.1, and waits until it answers PING. A port
// taken by someone else between choosing and binding it is retried with
// another. On error, the returned node, if not nil, must still be removed.
func startNode(ctx context.Context, tb testing.TB, cfg config, spec nodeSpec) (*Node, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		port, err := reservePort()
		if err != nil {
			return nil, fmt.Errorf("containertest: %s: %w", spec.name, err)
		}
		opts := []testcontainers.ContainerCustomizer{
			testcontainers.WithLogger(tclog.TestLogger(tb)),
			testcontainers.WithCmd(append(append([]string{}, baseArgs...), spec.args...)...),
			testcontainers.WithExposedPorts(redisPort.String()),
			testcontainers.WithLabels(map[string]string{Label: "true", Label + ".test": tb.Name()}),
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
				hc.PortBindings = network.PortMap{redisPort: {{
					HostIP:   netip.AddrFrom4([4]byte{127, 0, 0, 1}),
					HostPort: strconv.Itoa(port),
				}}}
			}),
		}
		if spec.network != nil {
			opts = append(opts, tcnetwork.WithNetwork([]string{spec.alias}, spec.network))
		}
		ctr, err := testcontainers.Run(ctx, cfg.image, opts...)
		if err != nil {
			if ctr != nil {
				(&Node{ctr: ctr, name: spec.name}).remove(tb)
			}
			if isPortConflict(err) && attempt < attempts {
				continue
			}
			return nil, fmt.Errorf("containertest: start %s: %w", spec.name, err)
		}
		n := &Node{
			tb:           tb,
			ctr:          ctr,
			name:         spec.name,
			addr:         net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			alias:        spec.alias,
			startTimeout: cfg.startTimeout,
		}
		if err := nodetest.WaitReady(ctx, n.addr, nil); err != nil {
			return n, n.wrap("start", err)
		}
		return n, nil
	}
}

// remove deletes the node's container, thawing it first: the engine may
// refuse to stop a frozen container, and SIGKILL is not delivered to it.
// Its data is disposable, so there is no grace period.
func (n *Node) remove(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	if st, err := n.ctr.State(ctx); err == nil && st.Paused {
		_ = n.Resume()
	}
	if err := n.ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil && !cerrdefs.IsNotFound(err) {
		tb.Errorf("containertest: remove %s: %v", n.name, err)
	}
}

// isPortConflict reports whether err says the chosen host port was taken.
func isPortConflict(err error) bool {
	s := err.Error()
	return strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use")
}

var (
	portMu   sync.Mutex
	reserved = make(map[int]bool) // ports handed out by this process
)

// reservePort returns a port of 127.0.0.1 that is free now and was not handed
// out before by this process. It picks below the kernel's ephemeral range
// when it can: outgoing connections take their local port from that range,
// and one of them could otherwise take a node's port while the node is down,
// so that the node could not start again at the same address.
func reservePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	lo, hi := portRange()
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if reserved[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		reserved[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in [%d, %d) of 127.0.0.1", lo, hi)
}

// portRange returns the half-open range to pick node ports from: outside the
// ephemeral range in /proc/sys/net/ipv4/ip_local_port_range (default 32768
// to 60999 on Linux), or a fixed range if that cannot be read.
func portRange() (lo, hi int) {
	elo, ehi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if a, err1 := strconv.Atoi(f[0]); err1 == nil {
				if b, err2 := strconv.Atoi(f[1]); err2 == nil {
					elo, ehi = a, b
				}
			}
		}
	}
	switch {
	case elo-10000 >= 1000:
		return 10000, elo
	case 65535-ehi >= 1000:
		return ehi + 1, 65536
	default:
		return 20000, 30000 // no gap: accept the small risk
	}
}
