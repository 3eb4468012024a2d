package redlock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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

// Close makes later calls fail with ErrClosed, stops Acquire calls that are
// waiting to retry, and waits until the work already started has ended:
// calls in progress, rollbacks of failed acquires, the nodes a release did
// not wait for, deletes waiting to be tried again, calls whose replies were
// late. Release held locks first: a Release after Close fails and the lock
// stays until its TTL. go-redis may hold a call given up on until its
// ReadTimeout. When ctx ends first, Close returns ctx.Err() and the deletes
// still waiting to be tried again give up at their next try (their keys
// expire with their TTL).
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	select {
	case <-c.nodes.life.close():
		return nil
	case <-ctx.Done():
		c.nodes.life.giveUp()
		return ctx.Err()
	}
}

// Acquire takes the lock on key for ttl, retrying until it succeeds, the
// Client's RetryStrategy gives up, or ctx ends. All attempts of one call
// share one token, so an attempt whose reply was lost but whose write landed
// does not lock out its own retry.
//
// While the key is busy, Acquire waits to be woken rather than polling: the
// Acquire calls of one Client for one key queue in FIFO order and only the
// first contends on the nodes; it attempts again when a quorum of nodes
// announced the key's release (pub/sub), when a Lock of this Client
// released it, or at the latest when the holder's remaining TTL or the
// RetryStrategy's wait has passed, whichever is first. Without pub/sub (an
// ACL that refuses it) that last rule alone applies.
//
// A failed Acquire returns an error matching ErrNotAcquired, and also
// ctx.Err() when ctx ended. When so many nodes fail (refuse connections, do
// not answer in time, answer with errors) that no quorum can be asked,
// Acquire gives up after the unavailability bound (WithUnavailableTimeout,
// DefaultUnavailableTimeout by default) even when ctx has no deadline, with
// an error that also matches ErrUnavailable and names each node's cause; a
// busy key never ends the wait that way. Whatever was written by a failed
// attempt is deleted again on every node, in the background, even after ctx
// ended.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	if !c.obs.on {
		return c.acquire(ctx, key, ttl, opts)
	}
	start := time.Now()
	l, err := c.acquire(ctx, key, ttl, opts)
	c.obs.done("acquire", key, start, err)
	return l, err
}

func (c *Client) acquire(ctx context.Context, key string, ttl time.Duration, opts []AcquireOption) (*Lock, error) {
	l, ttl, err := c.prepare(ctx, key, ttl, opts)
	if err != nil {
		return nil, err
	}
	defer c.nodes.life.end()
	if l.owner != "" {
		return c.asOwner(ctx, l, ttl, true, c.contend)
	}
	return c.contend(ctx, l, ttl)
}

// contend acquires l on the nodes for Acquire: at once, or in its turn
// among this Client's Acquire calls that wait for the key.
func (c *Client) contend(ctx context.Context, l *Lock, ttl time.Duration) (*Lock, error) {
	key := l.key
	// The first attempt goes straight to the nodes unless others of this
	// Client already wait for the key: an uncontended Acquire costs the
	// queue nothing.
	var wt *waiter
	acquired := false
	defer func() {
		if wt != nil {
			c.waits.leave(key, wt, acquired)
		}
	}()
	ttlArg := any(ttl.Milliseconds()) // boxed once for every attempt
	if c.waits.waiting(key) {
		wt = c.waits.join(key)
		got, err := c.awaitTurn(ctx, wt, l, ttl, ttlArg)
		if err != nil {
			return nil, err
		}
		if got {
			acquired = true
			return l, nil
		}
	}
	watching := false
	for failed := 1; ; failed++ {
		if wt != nil {
			c.waits.beforeAttempt(key)
		}
		err := c.attempt(ctx, l, ttl, ttlArg, failed)
		if err == nil {
			acquired = true
			return l, nil
		}
		if errors.Is(err, ErrInvalidArgument) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, withCause(err, ctx.Err())
		}
		if c.unavailableTooLong(err) {
			return nil, err
		}
		wait, ok := c.cfg.retry.Backoff(failed)
		if !ok {
			return nil, err
		}
		if wt == nil {
			wt = c.waits.join(key)
			select {
			case <-wt.turn: // at the head at once: wait below
			default:
				got, err := c.awaitTurn(ctx, wt, l, ttl, ttlArg)
				if err != nil {
					return nil, err
				}
				if got {
					acquired = true
					return l, nil
				}
				continue // our turn
			}
		}
		if !watching {
			// Subscribe, then attempt again at once: a release that came
			// before the subscription took effect is not missed.
			watching = true
			if ready := c.waits.watch(key); ready != nil {
				timer := time.NewTimer(c.cfg.nodeTimeout(ttl))
				werr := c.await(ctx, ready, timer.C)
				timer.Stop()
				if werr != nil {
					return nil, withCause(err, werr)
				}
				continue
			}
		}
		var qe *QuorumError
		if errors.As(err, &qe) && qe.holderTTL >= 0 {
			wait = min(wait, qe.holderTTL+time.Millisecond)
		}
		timer := time.NewTimer(wait)
		got, werr := c.awaitHandover(ctx, wt, c.offer(l, ttl, ttlArg), wt.wake, timer.C)
		timer.Stop()
		if got {
			acquired = true
			return l, nil
		}
		if werr != nil {
			return nil, withCause(err, werr)
		}
	}
}

// unavailableTooLong notes whether a failed attempt's err matches
// ErrUnavailable, and reports whether the Client's attempts have failed
// that way, in a row, for the unavailability bound.
func (c *Client) unavailableTooLong(err error) bool {
	now := time.Now().UnixNano()
	if !errors.Is(err, ErrUnavailable) {
		c.downSince.Store(0)
		return false
	}
	if c.downSince.CompareAndSwap(0, now) {
		return false
	}
	return time.Duration(now-c.downSince.Load()) >= c.cfg.unavailable
}

// awaitTurn waits until wt is at the head of key's queue. When the head
// before it left holding the lock, it then waits for that lock's release
// (the Client's own Release wakes it, or a quorum of release hints) or the
// first backoff, rather than attempt at once and be refused; that lock's
// Release may hand it over meanwhile (got).
func (c *Client) awaitTurn(ctx context.Context, wt *waiter, l *Lock, ttl time.Duration, ttlArg any) (got bool, err error) {
	key := l.key
	if err := c.await(ctx, wt.turn, nil); err != nil {
		return false, fmt.Errorf("%w: %q: waiting behind an earlier Acquire of this Client: %w", ErrNotAcquired, showKey(key), err)
	}
	if !wt.afterHolder {
		return false, nil
	}
	wait, _ := c.cfg.retry.Backoff(1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	got, err = c.awaitHandover(ctx, wt, c.offer(l, ttl, ttlArg), wt.wake, timer.C)
	if err != nil {
		return false, fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(key), err)
	}
	return got, nil
}

// await waits for ch or timeUp, and reports ctx's error or ErrClosed when
// either comes first.
func (c *Client) await(ctx context.Context, ch <-chan struct{}, timeUp <-chan time.Time) error {
	select {
	case <-ch:
		return nil
	case <-timeUp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.nodes.life.closing:
		return ErrClosed
	}
}

// TryAcquire makes one attempt to take the lock on key for ttl. It fails with
// an error matching ErrNotAcquired when the lock is held elsewhere or too few
// nodes answered in time (and ErrUnavailable when so many failed that no
// quorum could be asked); then it rolls back as Acquire does.
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	if !c.obs.on {
		return c.tryAcquire(ctx, key, ttl, opts)
	}
	start := time.Now()
	l, err := c.tryAcquire(ctx, key, ttl, opts)
	c.obs.done("try-acquire", key, start, err)
	return l, err
}

func (c *Client) tryAcquire(ctx context.Context, key string, ttl time.Duration, opts []AcquireOption) (*Lock, error) {
	l, ttl, err := c.prepare(ctx, key, ttl, opts)
	if err != nil {
		return nil, err
	}
	defer c.nodes.life.end()
	if l.owner != "" {
		return c.asOwner(ctx, l, ttl, false, c.tryOnce)
	}
	return c.tryOnce(ctx, l, ttl)
}

// tryOnce makes TryAcquire's one attempt.
func (c *Client) tryOnce(ctx context.Context, l *Lock, ttl time.Duration) (*Lock, error) {
	if err := c.attempt(ctx, l, ttl, ttl.Milliseconds(), 1); err != nil {
		return nil, err
	}
	return l, nil
}

// prepare validates a lock request before anything is sent and makes the
// handle that carries the token across attempts. On success the caller must
// call c.nodes.life.end when done.
func (c *Client) prepare(ctx context.Context, key string, ttl time.Duration, opts []AcquireOption) (*Lock, time.Duration, error) {
	if ctx == nil {
		return nil, 0, invalid("nil context")
	}
	var ac acquireConfig
	if len(opts) > 0 {
		p := new(acquireConfig) // applyAcquire's receiver escapes: only with options
		for _, o := range opts {
			if o == nil {
				return nil, 0, invalid("nil acquire option")
			}
			o.applyAcquire(p)
		}
		ac = *p
	}
	if err := ac.validate(); err != nil {
		return nil, 0, err
	}
	if key == "" {
		return nil, 0, invalid("empty key")
	}
	ttl, err := c.cfg.checkTTL(ttl)
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(key), err)
	}
	if err := c.nodes.life.begin(); err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(key), err)
	}
	token := rand.Text()
	prefix, holder := token+".", any(nil)
	if ac.ownerSet {
		// Any Lock of the owner takes the key over (the holder's prefix);
		// each deletes and extends only its own values (the Lock's).
		token = ownerToken(ac.owner)
		holder = token + "~"
		prefix = token + "~" + rand.Text()[:10] + "."
	}
	var prefixArg any = prefix
	if holder == nil {
		holder = prefixArg
	}
	l := &Lock{
		client:    c,
		key:       key,
		token:     token,
		owner:     ac.owner,
		prefix:    prefix,
		prefixArg: prefixArg,
		holderArg: holder,
		seq:       newSequencer(len(c.nodes.nodes)),
		extending: make(chan struct{}, 1),
		holds:     1,
	}
	if c.cfg.fencing {
		l.fenceKey = fenceKeyFor(key)
	}
	return l, ttl, nil
}

// attempt is one round of the Redlock algorithm: write the key on every node
// in parallel, count the confirmations, and keep the lock only with a quorum
// and validity left. Otherwise delete what we may have written, everywhere.
// Each attempt writes its own generation, so the rollback of a failed attempt
// can never delete what a later attempt wrote.
func (c *Client) attempt(ctx context.Context, l *Lock, ttl time.Duration, ttlArg any, n int) (err error) {
	if c.obs.on {
		start := time.Now()
		defer func() { c.obs.attempt(l.key, n, start, err) }()
	}
	timeout := c.cfg.nodeTimeout(ttl)
	if err := c.nodes.checkServers(timeout); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), err)
	}
	start := c.cfg.clock.Now()
	until := c.cfg.validUntil(start, ttl)
	v := l.nextValue()

	op := acquireOp(l.key, v, ttlArg)
	if c.cfg.fencing {
		op = acquireFencedOp(l.key, l.fenceKey, v, ttlArg, c.cfg.horizonArg)
	}
	if c.cfg.restartGuard > 0 {
		op = op.guarded(c.cfg.guardArg)
	}
	t, err := c.nodes.run(ctx, l.seq, writeRound(op, timeout, ttl))
	var fence uint64
	if err == nil && t.reached() && c.cfg.fencing {
		fence, t, err = c.commitFence(ctx, l, v, t, timeout, ttl)
	}
	quorum := err == nil && t.reached()
	now := c.cfg.clock.Now()
	if quorum && now.Before(until) {
		l.mu.Lock()
		l.until, l.ttl, l.fence = until, ttl, fence
		l.mu.Unlock()
		return nil
	}
	c.rollback(l, v, ttl, t)
	qe := newQuorumError("acquire", l.key, ErrNotAcquired, err, t, c.nodes)
	if quorum {
		qe.Elapsed = now.Sub(start)
	}
	return qe
}

// rollback deletes, in the background, what l's failed write of v for ttl
// may have left: on every node that did not refuse it, only v's generation
// or an earlier one.
func (c *Client) rollback(l *Lock, v value, ttl time.Duration, t *tally) {
	only := t.unrefused()
	c.nodes.launch(context.Background(), l.seq, roundSpec{kind: opDelete, op: deleteOp(l.key, v, v.gen),
		wait: c.cfg.cleanupTimeout, callTimeout: c.cfg.cleanupTimeout, only: only,
		tomb: v.gen, tombMs: tombMs(ttl)})
	if c.obs.on {
		c.obs.rollback(l.key, count(only))
	}
}

// deleteOn deletes l's key, any generation of it, in the background on the
// nodes in only, with a Release's retries and bookkeeping.
func (c *Client) deleteOn(l *Lock, only []bool) {
	spec := l.deleteAll(c.cfg.cleanupTimeout, c.cfg.cleanupTimeout)
	spec.only, spec.note = only, l.noteDeleted
	c.nodes.launch(context.Background(), l.seq, spec)
}

// deleteAll is a round that deletes l's key, any generation of it, and
// keeps every write l has sent from landing after it (roundSpec.tomb). l
// writes nothing more: its release has started.
func (l *Lock) deleteAll(wait, callTimeout time.Duration) roundSpec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return roundSpec{kind: opDelete, op: deleteOp(l.key, l.anyValue(), 0), wait: wait, callTimeout: callTimeout,
		tomb: l.gen, tombMs: tombMs(l.ttl)}
}

// tombMs is how long a tombstone left against writes of ttl lives, in
// milliseconds: a write that lands later still leaves the key for at most
// its ttl, so a longer tombstone would serve nothing.
func tombMs(ttl time.Duration) int64 {
	return max(min(ttl, tombstoneTTL).Milliseconds(), 1)
}

// writeRound is a round of writes that set the key for ttl: the caller waits
// up to timeout, and no write is sent after it.
func writeRound(op nodeOp, timeout, ttl time.Duration) roundSpec {
	return roundSpec{kind: opWrite, op: op, wait: timeout, ttl: ttl, cancellable: true}
}

// commitFence is the second round of a fenced acquire. The fence is above
// every reading (counter or clock) of the nodes that confirmed the acquire,
// and it is recorded on a quorum of nodes that still hold our key before
// anyone may use it; docs/fencing.md argues why that makes fences strictly
// increase across holders. The nodes whose commit was not confirmed in time
// (and whose acquire was not refused: our key may be there) get it again in
// the background, so that lagging counters catch up.
func (c *Client) commitFence(ctx context.Context, l *Lock, v value, acq *tally, timeout, ttl time.Duration) (uint64, *tally, error) {
	var highest int64
	for _, r := range acq.replies {
		if r.status == statusOK {
			highest = max(highest, r.val)
		}
	}
	fence := fenceAbove(highest)
	op := fenceCommitOp(l.key, l.fenceKey, v, fence, c.cfg.horizonArg)
	t, err := c.nodes.run(ctx, l.seq, writeRound(op, timeout, ttl))
	if err == nil && t.reached() && t.ok < len(t.replies) {
		late := t.where(func(r reply) bool {
			return r.status == statusUnknown && acq.replies[r.node].status != statusRefused
		})
		c.nodes.launch(context.Background(), l.seq, roundSpec{kind: opWrite, op: op,
			wait: c.cfg.cleanupTimeout, ttl: ttl, only: late})
	}
	return fence, t, err
}

// withCause adds a context's error to a failed attempt's error, unless the
// attempt already carries one.
func withCause(err, cause error) error {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	if qe.cause != nil {
		return err
	}
	cp := *qe
	cp.cause = cause
	return &cp
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

	mu        sync.Mutex
	holds     int    // Acquires of this Lock (reentered by its owner) not yet released
	gen       uint64 // the generation of the latest value written
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

// prologue is the common start of Extend and Release: the lock and the
// context must be usable.
func (l *Lock) prologue(op string, ctx context.Context) (*Client, error) {
	if l == nil || l.client == nil {
		return nil, invalid("%s of a nil lock", op)
	}
	if ctx == nil {
		return l.client, invalid("%s of %q: nil context", op, showKey(l.key))
	}
	return l.client, nil
}

// Extend resets the lock's expiry to ttl from now on every node that still
// holds our value. It never creates the key where it is absent, unless a
// quorum of other nodes confirmed our value in the same Extend (then it puts
// the key back on the nodes that lost it, never taking it from another
// holder), and never once Release has started. It succeeds only with a
// quorum and validity left, and then moves Until to start + ttl - drift.
// Extensions of one Lock run one at a time.
//
// A failed Extend may still have reached some nodes with the new TTL: it
// moves Until to the earlier of its old value and what the new TTL allows,
// so Until is never later than any expiry our calls may have set. It fails
// with an error matching ErrNotHeld when the lock was released, has expired,
// or a quorum did not confirm our value; that error also matches ctx.Err()
// when ctx ended first.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil || l.client == nil || !l.client.obs.on {
		return l.extend(ctx, ttl)
	}
	start := time.Now()
	err := l.extend(ctx, ttl)
	l.client.obs.done("extend", l.key, start, err)
	return err
}

func (l *Lock) extend(ctx context.Context, ttl time.Duration) error {
	c, err := l.prologue("extend", ctx)
	if err != nil {
		return err
	}
	ttl, err = c.cfg.checkTTL(ttl)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	select {
	case l.extending <- struct{}{}:
		defer func() { <-l.extending }()
	case <-ctx.Done():
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), ctx.Err())
	}
	defer l.untilMoved() // lease.go: KeepAlive's loss timer follows Until
	if err := c.nodes.life.begin(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	defer c.nodes.life.end()

	start := c.cfg.clock.Now()
	l.mu.Lock()
	releasing, until := l.releasing, l.until
	l.mu.Unlock()
	if releasing {
		return fmt.Errorf("%w: %q: released", ErrNotHeld, showKey(l.key))
	}
	if !start.Before(until) {
		l.mu.Lock()
		l.lost = true
		l.mu.Unlock()
		return fmt.Errorf("%w: %q: expired at %s", ErrNotHeld, showKey(l.key), until.Format(time.StampMicro))
	}
	v := l.nextValue()
	newUntil := c.cfg.validUntil(start, ttl)
	timeout := c.cfg.nodeTimeout(ttl)
	op := extendOp(l.key, v, ttl.Milliseconds())
	if c.cfg.fencing {
		op = extendFencedOp(l.key, l.fenceKey, v, ttl.Milliseconds(), l.Fence(), c.cfg.horizonArg)
	}
	t, err := c.nodes.run(ctx, l.seq, writeRound(op, timeout, ttl))
	ok := err == nil && t.reached() && c.cfg.clock.Now().Before(newUntil)

	l.mu.Lock()
	defer l.mu.Unlock()
	if ok && !l.releasing {
		l.until, l.ttl = newUntil, ttl
		// The launch happens under l.mu, before any Release can queue its
		// deletes: on each node the restore runs first and is deleted.
		// Only nodes that said the key is absent: a node not waited for is
		// restored by a later Extend that reads its answer.
		absent := t.where(func(r reply) bool { return errors.Is(r.err, ErrKeyAbsent) })
		c.nodes.launch(ctx, l.seq, roundSpec{kind: opWrite, op: restoreOp(l.key, v, ttl.Milliseconds()),
			wait: timeout, ttl: ttl, only: absent})
		return nil
	}
	if newUntil.Before(l.until) {
		l.until = newUntil
	}
	if l.releasing {
		return fmt.Errorf("%w: %q: released during the extension", ErrNotHeld, showKey(l.key))
	}
	qe := newQuorumError("extend", l.key, ErrNotHeld, err, t, c.nodes)
	if qe.refusedQuorum(len(c.nodes.nodes)) {
		l.lost = true
	}
	return qe
}

// Release deletes the key on every node where it still holds a value this
// Lock wrote, and never where another holder's value is (nor another Lock's
// of the same owner). It returns once a quorum has confirmed; the other
// nodes are cleaned up in the background, and a node that gives no definite
// answer is asked again, with backoff, until it does or the key would have
// expired. Release ignores the cancellation of ctx (a deferred Release after
// a timeout must still free the lock): it waits for the nodes that did not
// answer within the per-node deadline, as they are asked again, until a
// quorum confirmed, or at most the cleanup timeout (WithCleanupTimeout,
// DefaultCleanupTimeout) from its start, or until ctx's deadline if ctx
// is still live and its deadline is earlier.
//
// Release returns nil when a quorum confirmed the delete. Otherwise the error
// matches ErrNotHeld, and its *NodeError entries tell per node whether the
// key had expired (ErrKeyAbsent), belonged to another holder
// (ErrHeldByOther), or did not answer (ErrNoReply). Release stops the lock
// for good: no Extend succeeds after it, and only the first call sends;
// later (and concurrent) calls wait for it and return nil once a quorum has
// confirmed the delete, by then or in the background since, and the first
// call's error otherwise. With a nil ctx the lock is released all the same
// and the error matches ErrInvalidArgument. A Lock its owner acquired more
// than once through this Client (WithOwner) is released on the nodes by the
// last of its Releases; the earlier ones send nothing and return nil. The
// Release that sends ends the lock's KeepAlive contexts (cause ErrReleased)
// before it sends anything.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil || l.client == nil || !l.client.obs.on {
		return l.releaseCall(ctx)
	}
	start := time.Now()
	err := l.releaseCall(ctx)
	l.client.obs.done("release", l.key, start, err)
	return err
}

func (l *Lock) releaseCall(ctx context.Context) error {
	c, err := l.prologue("release", ctx)
	if c == nil {
		return err
	}
	if err != nil {
		ctx = context.Background()
	}
	l.mu.Lock()
	if l.releaseDone == nil && l.holds > 1 {
		l.holds-- // the owner still holds it through another Acquire
		l.mu.Unlock()
		return err
	}
	if done := l.releaseDone; done != nil {
		l.mu.Unlock()
		<-done
		return errors.Join(err, l.releaseOutcome())
	}
	l.releaseDone = make(chan struct{})
	l.releasing = true
	l.deleted = make([]bool, len(c.nodes.nodes))
	ttl := l.ttl
	l.mu.Unlock()
	l.stopLease(ErrReleased) // lease.go: no renewal is scheduled from now on
	c.owners.forget(l)

	outcome := l.release(ctx, c, ttl)
	l.mu.Lock()
	l.releaseErr = outcome
	l.mu.Unlock()
	close(l.releaseDone)
	return errors.Join(err, outcome)
}

func (l *Lock) release(ctx context.Context, c *Client, ttl time.Duration) error {
	if err := c.nodes.life.begin(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	defer c.nodes.life.end()
	// The next waiter of this Client, if it offers, is handed the key in
	// the same round (handover.go).
	var gone []bool
	if c.handsOver() {
		if off, watched, streak := c.waits.claim(l.key); off != nil {
			if gone = c.handOver(ctx, l, off, watched, streak); count(gone) >= c.nodes.quorum {
				return nil
			}
		}
	}
	start := time.Now()
	spec := l.deleteAll(c.cfg.nodeTimeout(ttl), c.cfg.cleanupTimeout)
	spec.note = l.noteDeleted
	t, _ := c.nodes.run(ctx, l.seq, spec)
	if !l.confirmed(t, gone) {
		// The nodes that did not answer in time are asked again in the
		// background; their confirmations count until the bound.
		bound := start.Add(c.cfg.cleanupTimeout)
		if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && dl.Before(bound) {
			bound = dl
		}
		l.mu.Lock()
		sig := make(chan struct{}, 1)
		l.deletedSig = sig
		l.mu.Unlock()
		timer := time.NewTimer(time.Until(bound))
	wait:
		for !l.confirmed(t, gone) {
			select {
			case <-sig:
			case <-timer.C:
				l.confirmed(t, gone)
				break wait
			}
		}
		timer.Stop()
	}
	if t.reached() {
		c.waits.released(l.key)
		return nil
	}
	return newQuorumError("release", l.key, ErrNotHeld, nil, t, c.nodes)
}

// confirmed counts into t the nodes where l's value is gone, as the round's
// replies, the handover round (gone) and the confirmations of its deletes
// that came since tell, and reports whether they are a quorum.
func (l *Lock) confirmed(t *tally, gone []bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range t.replies {
		if t.replies[i].status != statusOK && (l.deleted[i] || i < len(gone) && gone[i]) {
			t.replies[i] = reply{node: i, status: statusOK}
			t.ok++
		}
	}
	return t.reached()
}

// noteDeleted records a node's confirmed delete, whenever it comes.
func (l *Lock) noteDeleted(r reply) {
	if l.client.nodes.vote(r).status != statusOK {
		return
	}
	l.mu.Lock()
	l.deleted[r.node] = true
	sig := l.deletedSig
	l.mu.Unlock()
	if sig != nil {
		select {
		case sig <- struct{}{}:
		default:
		}
	}
}

// releaseOutcome is what a later Release reports.
func (l *Lock) releaseOutcome() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.releaseErr == nil {
		return nil
	}
	if count(l.deleted) >= l.client.nodes.quorum {
		return nil
	}
	return l.releaseErr
}
