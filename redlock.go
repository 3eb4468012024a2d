package redlock

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client takes locks on a fixed set of independent Redis masters. It is safe
// for concurrent use. It does not own the Redis clients given to New: closing
// them stays the caller's job, after Close.
type Client struct {
	cfg    config
	nodes  *nodeSet
	owners owners  // locks held under WithOwner, for reentrancy
	waits  waiters // Acquire calls waiting for busy keys
	obs    observer

	renewals renewalQueue // KeepAlive's renewals (lease.go)

	// downSince is when this Client's attempts began to fail in a row
	// with ErrUnavailable (Unix nanoseconds), 0 while they do not: shared
	// by every Acquire, so that those queued behind one that gave up do
	// not each wait the bound again.
	downSince atomic.Int64
}

// New returns a Client over nodes, one go-redis client per independent
// master (a *redis.Client, a Sentinel failover client, or a *redis.ClusterClient
// standing for one cluster). A lock needs len(nodes)/2+1 of them. An odd
// number, 3 or 5, makes the most of each node.
//
// New sends nothing. It fails with an error matching ErrInvalidArgument when
// nodes is empty, holds a nil client, holds the same client (or two clients
// of the same address and database) twice, or an option is invalid. Two
// nodes that turn out to be one server under two addresses (or two clients
// of one cluster, or of one Sentinel master) are found once both answered:
// from then on every operation fails with an error matching
// ErrInvalidArgument that names both nodes. Until a node's server is known
// its replies do not count toward a quorum, so such nodes never vote twice;
// the first operation waits up to its per-node deadline for the servers to
// be identified (Warm does it ahead of time).
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, invalid("nil option")
		}
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	set, err := newNodeSet(nodes)
	if err != nil {
		return nil, err
	}
	if cfg.restartGuard > 0 {
		for i, n := range nodes {
			if _, ok := n.(*redis.ClusterClient); ok {
				return nil, invalid("WithRestartGuard: node %d is a Redis Cluster client, which the guard does not support", i)
			}
		}
	}
	c := &Client{cfg: cfg, nodes: set, obs: newObserver(cfg.hooks, cfg.logger)}
	c.waits.c = c
	set.obs = &c.obs
	return c, nil
}

// Quorum is the number of nodes that must agree for a lock to be held.
func (c *Client) Quorum() int { return c.nodes.quorum }

// Nodes reports each node's health as this Client has seen it.
func (c *Client) Nodes() []NodeStatus { return c.nodes.status() }

// Warm opens a connection to every node, loads the scripts there and
// identifies the servers behind the nodes, so that the first lock operation
// pays no dial or handshake inside its per-node deadline. Call it once at
// start-up when the nodes use TLS, or when the first TryAcquire must not
// fail on a cold connection; without it the first operation identifies the
// servers itself, waiting at most its per-node deadline. It returns the nodes it
// could not reach (as *NodeError), or an error matching ErrInvalidArgument
// when two nodes are one server.
func (c *Client) Warm(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if err := c.nodes.life.begin(); err != nil {
		return err
	}
	defer c.nodes.life.end()
	return c.nodes.warm(ctx)
}

// Close makes later calls fail with ErrClosed, ends every KeepAlive context
// (cause ErrClosed, a Do's included), and waits for the calls in progress —
// a Do until its function has returned and its lock is released — and for
// the background work; when ctx ends first it returns ctx.Err(). It does not
// take a Lock from its holder: Release it, during Close or after, or it
// expires with its TTL (docs/lease.md).
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	closeLeases(c.nodes.life.shut())
	select {
	case <-c.nodes.life.idleChan():
		return nil
	case <-ctx.Done():
		c.nodes.life.giveUp()
		return ctx.Err()
	}
}

// Lock is a held lock: a handle with its own state, safe for concurrent use.
type Lock struct {
	client    *Client
	key       string
	token     string
	owner     string // the WithOwner id, if any
	prefix    string // the values we write are prefix + generation (scripts.go)
	prefixArg any    // prefix, boxed once for every script call
	holderArg any    // the holder's prefix, boxed: an owner's part of prefix
	fenceKey  string // the fence counter's key, with WithFencing
	seq       *sequencer
	// extending admits one Extend at a time, so that Until always belongs
	// to the latest extension that reached the nodes.
	extending chan struct{}

	mu        sync.Mutex // lock order: after lease.mu and owners.mu, before sequencer.mu (docs/internals.md)
	holds     int        // Acquires of this Lock (reentered by its owner) not yet released
	gen       uint64     // the generation of the latest value written
	ttl       time.Duration
	until     time.Time
	fence     uint64
	releasing bool // Release has started: nothing is written any more
	// lost is set once the lock is known not to be held any more (KeepAlive
	// reported it lost, an Extend was refused or came too late): its owner
	// does not re-enter it.
	lost        bool
	releaseDone chan struct{} // closed when the first Release has its outcome
	releaseErr  error
	deleted     []bool        // nodes that confirmed our key's deletion, after Release
	deletedSig  chan struct{} // signalled when deleted changes, once Release waits for it

	lease *lease // KeepAlive's renewal (lease.go), made by its first call
}

// anyValue stands for every value of the lock, for a delete of any of its
// generations: only its prefix is read.
func (l *Lock) anyValue() value { return value{prefixArg: l.prefixArg, holderArg: l.holderArg} }

// nextValue returns the value of the lock's next write.
func (l *Lock) nextValue() value {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	return value{prefixArg: l.prefixArg, holderArg: l.holderArg, gen: l.gen, s: l.prefix + strconv.FormatUint(l.gen, 10)}
}

// Key returns the locked key, or "" for a nil Lock.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns this holder's token, 130 bits from crypto/rand, unique to
// the Acquire call and stable for the lock's life (with WithOwner, 130 bits
// of a hash of the owner's id instead, the same for every Acquire of that
// id). The nodes store it under the key, followed by a dot and a generation
// that grows with each attempt and extension; a Lock of an owner puts a
// tilde and an id of the Lock's own between the token and the dot. It
// returns "" for a nil Lock.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns the fencing token issued with the lock, or 0 without
// WithFencing (or for a nil Lock). Pass it to the storage the lock protects
// and have the storage reject a write whose fence is lower than the highest
// it has seen (an equal one is the same holder's next write).
//
// A fence is above both the fencing counters and the clocks (in
// microseconds since the Unix epoch) that the acquiring quorum read: about
// 1.8e15 today, growing by about 3.2e13 a year, so it fits a signed 64-bit
// column. Fences strictly increase across successive holders of a key while
// the counters of the previous holder's quorum survive, and also when a
// minority of nodes lost them, or all nodes after the fence horizon, as long
// as the nodes' clocks do not step back by more than the time since.
// docs/fencing.md states the argument and its limits.
func (l *Lock) Fence() uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fence
}

// Until returns the end of the validity window: the lock is held until then,
// provided the nodes' clocks drift no more than allowed. It is computed at
// acquire and at each successful Extend as start + ttl - drift, with start
// taken before the first command was sent; a failed Extend can only move it
// earlier. It returns the zero time for a nil Lock.
func (l *Lock) Until() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}
