package redlock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client takes locks on a fixed set of independent Redis masters. It is safe
// for concurrent use. It does not own the Redis clients given to New: closing
// them stays the caller's job, after Close.
type Client struct {
	cfg  config
	pool *nodePool
}

// New returns a Client over nodes, one go-redis client per independent
// master (a *redis.Client, a Sentinel failover client, or a *redis.ClusterClient
// standing for one cluster). A lock needs len(nodes)/2+1 of them. An odd
// number, 3 or 5, makes the most of each node.
//
// New fails with an error matching ErrInvalidArgument when nodes is empty,
// holds a nil client, holds the same client (or two clients of the same
// server and database) twice, or an option is invalid.
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
	pool, err := newNodePool(nodes)
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, pool: pool}, nil
}

// Quorum is the number of nodes that must agree for a lock to be held.
func (c *Client) Quorum() int { return c.pool.quorum }

// Nodes reports each node's health as this Client has seen it.
func (c *Client) Nodes() []NodeStatus { return c.pool.status() }

// Close makes later calls fail with ErrClosed, stops Acquire calls that are
// waiting to retry, and waits until the work already started has ended:
// calls in progress, rollbacks of failed acquires, the nodes a release did
// not wait for, calls whose replies were late. Release held locks first: a
// Release after Close fails and the lock stays until its TTL. Each of those has
// its own deadline, but go-redis may hold a call given up on until its
// ReadTimeout. Close returns ctx.Err() if ctx ends first.
func (c *Client) Close(ctx context.Context) error {
	select {
	case <-c.pool.close():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Acquire takes the lock on key for ttl, retrying with the Client's
// RetryStrategy until it succeeds, the strategy gives up, or ctx ends. All
// attempts of one call share one token, so an attempt whose reply was lost
// but whose write landed does not lock out its own retry.
//
// A failed Acquire returns an error matching ErrNotAcquired, and also
// ctx.Err() when ctx ended. Whatever was written by a failed attempt is
// deleted again on every node, in the background, even after ctx ended.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	l, ttl, err := c.prepare(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	defer c.pool.end()
	ttlArg := any(ttl.Milliseconds())
	for failed := 1; ; failed++ {
		err := c.attempt(ctx, l, ttl, ttlArg)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, withCause(err, ctx.Err())
		}
		wait, ok := c.cfg.retry.Backoff(failed)
		if !ok {
			return nil, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, withCause(err, ctx.Err())
		case <-c.pool.closing:
			timer.Stop()
			return nil, withCause(err, ErrClosed)
		}
	}
}

// TryAcquire makes one attempt to take the lock on key for ttl. It fails with
// an error matching ErrNotAcquired when the lock is held elsewhere or too few
// nodes answered in time; then it rolls back as Acquire does.
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	l, ttl, err := c.prepare(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	defer c.pool.end()
	if err := c.attempt(ctx, l, ttl, ttl.Milliseconds()); err != nil {
		return nil, err
	}
	return l, nil
}

// prepare validates a lock request before anything is sent and makes the
// handle that carries the token across attempts. On success the caller must
// call c.pool.end when done.
func (c *Client) prepare(ctx context.Context, key string, ttl time.Duration) (*Lock, time.Duration, error) {
	if ctx == nil {
		return nil, 0, invalid("nil context")
	}
	if key == "" {
		return nil, 0, invalid("empty key")
	}
	ttl, err := c.cfg.checkTTL(ttl)
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %w", ErrNotAcquired, key, err)
	}
	if err := c.pool.begin(); err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %w", ErrNotAcquired, key, err)
	}
	token := rand.Text()
	return &Lock{
		c:        c,
		key:      key,
		token:    token,
		tokenArg: token,
		seq:      newSequencer(len(c.pool.nodes)),
	}, ttl, nil
}

// attempt is one round of the Redlock algorithm: write the key on every node
// in parallel, count the confirmations, and keep the lock only with a quorum
// and validity left. Otherwise delete what we may have written, everywhere.
func (c *Client) attempt(ctx context.Context, l *Lock, ttl time.Duration, ttlArg any) error {
	timeout := c.cfg.nodeTimeout(ttl)
	start := c.cfg.clock.Now()
	until := c.cfg.validUntil(start, ttl)

	var op nodeOp
	if c.cfg.fencing {
		op = acquireFencedOp(l.key, l.tokenArg, ttlArg)
	} else {
		op = acquireOp(l.key, l.tokenArg, ttlArg)
	}
	t, err := c.pool.fanOut(ctx, l.seq, opWrite, timeout, timeout, op, true)
	var fence uint64
	if err == nil && t.ok >= t.quorum && c.cfg.fencing {
		fence, t, err = c.commitFence(ctx, l, t, timeout)
	}
	quorum := err == nil && t.ok >= t.quorum
	now := c.cfg.clock.Now()
	if quorum && now.Before(until) {
		l.mu.Lock()
		l.until, l.ttl, l.fence = until, ttl, fence
		l.mu.Unlock()
		return nil
	}
	c.rollback(l, t)
	qe := &QuorumError{Op: "acquire", Key: l.key, sentinel: ErrNotAcquired, cause: err,
		OK: t.ok, Quorum: t.quorum, Nodes: t.nodeErrors(c.pool)}
	if quorum {
		qe.Elapsed = now.Sub(start)
	}
	return qe
}

// commitFence is the second round of a fenced acquire. The fence is one more
// than the highest counter the quorum reported, and it is recorded on a quorum
// of nodes that still hold our key before anyone may use it; docs/fencing.md
// argues why that makes fences strictly increase across holders.
func (c *Client) commitFence(ctx context.Context, l *Lock, t *tally, timeout time.Duration) (uint64, *tally, error) {
	var highest int64
	for _, r := range t.replies {
		if r.status == statusOK && r.val > highest {
			highest = r.val
		}
	}
	fence := uint64(highest) + 1
	t, err := c.pool.fanOut(ctx, l.seq, opWrite, timeout, timeout, fenceCommitOp(l.key, l.tokenArg, fence), true)
	return fence, t, err
}

// rollback deletes our key wherever it may be, without waiting: on every
// node but those that refused outright (their reply came from the last call
// of ours they ran, which found another token). The deletes are queued behind
// the attempt's own calls on each node, so a slow SET cannot land after its
// delete, and they run whatever happened to the caller's context.
func (c *Client) rollback(l *Lock, t *tally) {
	c.pool.launch(context.Background(), l.seq, opDelete, c.cfg.cleanupTimeout, c.cfg.cleanupTimeout, releaseOp(l.key, l.tokenArg), t.unrefused())
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
	c        *Client
	key      string
	token    string
	tokenArg any // token boxed once for every script call
	seq      *sequencer

	mu       sync.Mutex
	ttl      time.Duration
	until    time.Time
	fence    uint64
	released bool
}

// Key returns the locked key.
func (l *Lock) Key() string { return l.key }

// Token returns this holder's value stored under the key: 130 bits from
// crypto/rand, unique to this Acquire call.
func (l *Lock) Token() string { return l.token }

// Fence returns the fencing token issued with the lock, or 0 without
// WithFencing. Fences strictly increase across successive holders of a key.
// Pass it to the storage the lock protects and have the storage reject
// writes carrying a fence lower than one it has seen.
func (l *Lock) Fence() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fence
}

// Until returns the end of the validity window: the lock is held until then,
// provided the nodes' clocks drift no more than allowed. It is computed at
// acquire and at each Extend as start + ttl - drift, with start taken before
// the first command was sent.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Extend resets the lock's expiry to ttl from now on every node that still
// holds our token, and re-sets it on nodes that lost the key, never taking it
// from another holder. It succeeds only with a quorum and validity left, and
// then moves Until. On failure Until is unchanged: the lock is still held
// until then at most, and Extend may be tried again before that.
//
// Extend fails with an error matching ErrNotHeld when the lock was released,
// has expired, or a quorum did not confirm; that error also matches
// ctx.Err() when ctx ended first.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil || l.c == nil {
		return invalid("extend of a nil lock")
	}
	if ctx == nil {
		return invalid("nil context")
	}
	c := l.c
	ttl, err := c.cfg.checkTTL(ttl)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.key, err)
	}
	start := c.cfg.clock.Now()
	l.mu.Lock()
	released, until := l.released, l.until
	l.mu.Unlock()
	if released {
		return fmt.Errorf("%w: %q: already released", ErrNotHeld, l.key)
	}
	if !start.Before(until) {
		return fmt.Errorf("%w: %q: expired at %v", ErrNotHeld, l.key, until)
	}
	if err := c.pool.begin(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.key, err)
	}
	defer c.pool.end()
	newUntil := c.cfg.validUntil(start, ttl)
	timeout := c.cfg.nodeTimeout(ttl)
	t, err := c.pool.fanOut(ctx, l.seq, opWrite, timeout, timeout, extendOp(l.key, l.tokenArg, ttl.Milliseconds()), true)
	if err == nil && t.ok >= t.quorum && c.cfg.clock.Now().Before(newUntil) {
		l.mu.Lock()
		l.until, l.ttl = newUntil, ttl
		l.mu.Unlock()
		return nil
	}
	return &QuorumError{Op: "extend", Key: l.key, sentinel: ErrNotHeld, cause: err,
		OK: t.ok, Quorum: t.quorum, Nodes: t.nodeErrors(c.pool)}
}

// Release deletes the key on every node where it still holds our token, and
// never where another holder's token is. It returns once a quorum has
// answered; the other nodes are cleaned up in the background. It releases
// even when ctx is nil or already cancelled (a deferred Release after a
// timeout must still free the lock), and waits at most the per-node deadline.
//
// Release returns nil when a quorum confirmed the delete. Otherwise the error
// matches ErrNotHeld, and its *NodeError entries tell per node whether the
// key had expired (ErrKeyAbsent), belonged to another holder
// (ErrHeldByOther), or did not answer (ErrNoReply). Releasing again after a
// successful Release returns nil and sends nothing.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil || l.c == nil {
		return invalid("release of a nil lock")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l.mu.Lock()
	released, ttl := l.released, l.ttl
	l.mu.Unlock()
	if released {
		return nil
	}
	c := l.c
	if err := c.pool.begin(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.key, err)
	}
	defer c.pool.end()
	t, err := c.pool.fanOut(ctx, l.seq, opDelete, c.cfg.nodeTimeout(ttl), c.cfg.cleanupTimeout, releaseOp(l.key, l.tokenArg), false)
	if err == nil && t.ok >= t.quorum {
		l.mu.Lock()
		l.released = true
		l.mu.Unlock()
		return nil
	}
	return &QuorumError{Op: "release", Key: l.key, sentinel: ErrNotHeld, cause: err,
		OK: t.ok, Quorum: t.quorum, Nodes: t.nodeErrors(c.pool)}
}
