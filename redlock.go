package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/waiting"
)

// Client takes locks on a fixed set of independent Redis masters. It is safe
// for concurrent use. It does not own the Redis clients given to New: closing
// them stays the caller's job, after Close.
type Client struct {
	cfg    config
	nodes  *engine.Set
	owners owners                    // locks held under WithOwner, for reentrancy
	waits  waiting.Queues[handOffer] // calls waiting for busy keys (internal/waiting; the handover: handover.go)
	obs    observer

	renewals engine.Bounded[*lease] // KeepAlive's renewals (lease.go)

	// downSince is when this Client's attempts began to fail in a row
	// with ErrUnavailable (Unix nanoseconds), 0 while they do not: shared
	// by every Acquire, so that those queued behind one that gave up do
	// not each wait the bound again.
	downSince atomic.Int64

	// cluster is set when a node is a Redis Cluster client: a Lock of
	// several keys then needs them in one hash slot.
	cluster bool
}

// New returns a Client over nodes, one go-redis client per independent master
// (a *redis.Client, a Sentinel failover client, or a *redis.ClusterClient
// standing for one cluster); a lock needs len(nodes)/2+1 of them, and 3 or 5
// make the most of each. New sends nothing. It fails with ErrInvalidArgument
// when nodes is empty, holds a nil client or the same one twice, or an option
// is invalid; two nodes found later to be one server, or a node found to
// be a replica (ErrReplica), fail every operation (docs/operations.md).
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
	c := &Client{cfg: cfg, obs: newObserver(cfg.hooks, cfg.logger)}
	for i, n := range nodes {
		if _, ok := n.(*redis.ClusterClient); ok {
			if cfg.restartGuard > 0 {
				return nil, invalid("WithRestartGuard: node %d is a Redis Cluster client, which the guard does not support", i)
			}
			c.cluster = true
		}
	}
	c.renewals = engine.Bounded[*lease]{Max: maxConcurrentRenewals, Run: (*lease).renew}
	ec := engine.Config{Scripts: allScripts, Sources: sources, KeyLife: c.cfg.keyLife, Timing: engineTiming}
	ec.Timing.ClockDrift = c.cfg.driftFactor
	if c.obs.on {
		ec.Observer = nodeObserver{&c.obs}
	}
	set, err := engine.NewSet(nodes, ec)
	if err != nil {
		return nil, err
	}
	c.nodes = set
	c.waits.Init(set, c.cfg.cleanupTimeout)
	return c, nil
}

// Quorum is the number of nodes that must agree for a lock to be held.
func (c *Client) Quorum() int { return c.nodes.Quorum }

// Warm connects to every node, loads the scripts and identifies the servers,
// so that the first lock operation pays no dial or handshake inside its
// per-node deadline (call it at start-up with TLS). It identifies every node
// that answers even when others do not, and returns each node it could not
// reach by ctx's end as a *NodeError: operations then count that node once
// it answers, without waiting for it. A node that refuses its client's
// credentials is a *NodeError matching ErrAuth. Two nodes that are one
// server, or a node that is a replica (ErrReplica), make it fail with
// ErrInvalidArgument (docs/operations.md).
func (c *Client) Warm(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if err := c.nodes.Life.BeginCall(); err != nil {
		return err
	}
	defer c.nodes.Life.EndCall()
	return c.nodes.Warm(ctx, func(i int, addr string, err error) error {
		return &NodeError{Node: i, Addr: addr, Err: err}
	})
}

// Close makes later calls fail with ErrClosed, ends every KeepAlive context
// (cause ErrClosed), waits for the calls in progress (a Do until its lock
// is released) while ctx allows, and then for the background work (the
// deletes of rollbacks and releases) at most the cleanup timeout
// (WithCleanupTimeout, 1 s by default). It gives up the deletes that nodes
// have not confirmed by then, which leaves their keys there to expire with
// their TTL: the CleanupAbandoned hook is told of each, and the error
// matches ErrCleanupAbandoned, with a *NodeError per node. When ctx ends
// first, the error matches ctx.Err(). Close takes no Lock from its holder:
// Release it, or it expires with its TTL (docs/lease.md).
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	life := &c.nodes.Life
	closeLeases(life.Shut())
	select {
	case <-life.CallsDone():
	case <-ctx.Done():
		return c.giveUp(ctx.Err())
	}
	c.nodes.Hurry()
	bound := time.NewTimer(c.cfg.cleanupTimeout)
	defer bound.Stop()
	select {
	case <-life.Idle():
		return nil
	case <-bound.C:
		return c.giveUp(nil)
	case <-ctx.Done():
		return c.giveUp(ctx.Err())
	}
}

// giveUp stops the background deletes Close no longer waits for, tells
// the hooks of those not confirmed, and returns Close's error: cause (ctx's
// error, or nil), with the deletes given up.
func (c *Client) giveUp(cause error) error {
	left := c.nodes.Life.GiveUp()
	if len(left) == 0 {
		return cause
	}
	e := &abandonedError{deletes: len(left), cause: cause}
	for _, a := range left {
		addr, silence := c.nodes.Addr(a.Node), c.nodes.Silence(a.Node)
		c.obs.cleanupAbandoned(a.Ctx, a.Key, a.Node, addr, a.Tries, silence)
		if n := len(e.nodes); n == 0 || e.nodes[n-1].Node != a.Node { // left is in node order
			e.nodes = append(e.nodes, &NodeError{Node: a.Node, Addr: addr, Err: silence})
		}
	}
	return e
}

// Lock is a held lock: a handle with its own state, safe for concurrent use.
type Lock struct {
	client *Client
	key    string
	kind   kind   // what its ops are made of (kind.go), chosen when it is made
	owner  string // the WithOwner id, if any
	shared bool   // the key is held shared (Shared)
	// permits is n for a permit (Permits(n)), 0 otherwise; permitArg is n
	// boxed, slot the slot the permit holds and slotArg the same boxed,
	// and pref the slot the next attempt prefers (-1: the lowest free).
	permits   int
	permitArg any
	slot      int
	slotArg   any
	pref      int
	vals      script.Prefixes // the token and the prefixes of the values the Lock writes
	fenceKey  string          // the fence counter's key, with WithFencing
	// late is the Lock's refusals key (script.RefusalsKey): its deletes
	// leave there what refuses a copy of its writes that lands after them.
	late string
	// keys, for a Lock of several keys (AcquireAll), are its keys, distinct
	// and sorted (key is the first), and keysAndCounters the same followed
	// by their fencing counters; both nil for a Lock of one key.
	keys, keysAndCounters []string
	seq                   *engine.Lanes
	// roomArg is how long a shared Lock's acquire enters it in the key's
	// waiting room when refused, in milliseconds, boxed: set for an
	// Acquire, which waits; nil (0) for a TryAcquire.
	roomArg any
	// extending admits one Extend at a time, so that Until always belongs
	// to the latest extension that reached the nodes.
	extending chan struct{}

	mu        sync.Mutex    // lock order: after lease.mu and owners.mu, before Lanes.mu (docs/internals.md)
	holds     int           // Acquires of this Lock (reentered by its owner) not yet released
	gen       uint64        // the generation of the latest value written
	longest   time.Duration // the longest TTL of the values written
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
	rel         releaseRound  // the first Release's round (release.go)

	lease *lease // KeepAlive's renewal (lease.go), made by its first call
}

// anyValue stands for every value of the lock, for a delete of any of its
// generations: only its prefix is read.
func (l *Lock) anyValue() script.Value { return l.vals.Any() }

// nextValue returns the value of the lock's next write, for ttl.
func (l *Lock) nextValue(ttl time.Duration) script.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.longest = max(l.longest, ttl)
	return l.vals.At(l.gen)
}

// Key returns the locked key, or "" for a nil Lock. For a Lock of several
// keys (AcquireAll) it is the first of Keys, in sorted order.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns this holder's token, or "" for a nil Lock: 130 random bits (26
// base32 characters from crypto/rand) unique to the Acquire call, or with
// WithOwner an "o" and 125 bits of a hash of the owner's id. The nodes store
// it, and WithMetadata's text encoded, before a generation (docs/algorithm.md).
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.vals.Token
}

// Metadata returns what WithMetadata stored with this Lock, "" if nothing
// or for a nil Lock.
func (l *Lock) Metadata() string {
	if l == nil {
		return ""
	}
	return l.vals.Metadata()
}

// Fence returns the fencing token issued with the lock, or 0 without
// WithFencing (or for a nil Lock). Pass it with every write the lock guards,
// and have the storage refuse a fence lower than the highest it has seen (an
// equal one is the same holder's next write). Fences fit a signed 64-bit
// column and increase across holders within the limits of docs/fencing.md.
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

// keep returns l, which Acquire got after err, unless Close began
// meanwhile: then l is released again (given back, for an owner's Lock
// re-entered) and the Acquire fails with ErrClosed, as later calls do.
func (c *Client) keep(l *Lock, err error) (*Lock, error) {
	if err != nil || !c.nodes.Life.IsClosed() {
		return l, err
	}
	closed := fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), ErrClosed)
	return nil, errors.Join(closed, l.Release(context.Background()))
}
