package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/waiting"
)

// Acquire takes the lock on key for ttl, retrying until it succeeds, the
// Client's RetryStrategy gives up, or ctx ends; a busy key is waited for
// without polling (docs/waiting.md). A failed Acquire returns an error
// matching ErrNotAcquired, and ctx.Err() when ctx ended. When no quorum of
// nodes can be asked it gives up after WithUnavailableTimeout, even without a
// deadline, with ErrUnavailable. What a failed attempt wrote is deleted on
// every node in the background.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return c.observedAcquire(ctx, "acquire", key, ttl, opts, true)
}

// observedAcquire is Acquire (retry) or TryAcquire, told to the hooks and
// the log as op when they are on.
func (c *Client) observedAcquire(ctx context.Context, op, key string, ttl time.Duration, opts []AcquireOption, retry bool) (*Lock, error) {
	if !c.obs.on {
		return c.acquire(ctx, key, ttl, opts, retry)
	}
	start := time.Now()
	l, err := c.acquire(ctx, key, ttl, opts, retry)
	c.obs.done(ctx, op, key, start, err)
	return l, err
}

// acquire validates the request and takes the lock: for its owner
// (WithOwner), who may hold it already, or on the nodes.
func (c *Client) acquire(ctx context.Context, key string, ttl time.Duration, opts []AcquireOption, retry bool) (*Lock, error) {
	l, ttl, err := c.prepare(ctx, key, ttl, opts)
	if err != nil {
		return nil, err
	}
	defer c.nodes.Life.EndCall()
	if l.owner != "" {
		return c.keep(c.asOwner(ctx, l, ttl, retry))
	}
	if !l.kind.handsOver() {
		// A shared Lock or a permit: woken by the key's releases.
		return c.keep(c.acquireWatching(ctx, l, ttl, []string{l.key}, retry))
	}
	return c.keep(c.acquireOnNodes(ctx, l, ttl, retry))
}

// acquireOnNodes acquires l on the nodes: as Acquire does (retry), or with
// TryAcquire's one attempt.
func (c *Client) acquireOnNodes(ctx context.Context, l *Lock, ttl time.Duration, retry bool) (*Lock, error) {
	if retry {
		return c.contend(ctx, l, ttl)
	}
	if err := c.attempt(ctx, l, ttl, ttl.Milliseconds(), 1); err != nil {
		return nil, err
	}
	return l, nil
}

// contend acquires l on the nodes for Acquire: at once, or in its turn
// among this Client's Acquire calls that wait for the key. It attempts until
// an attempt succeeds or a Release hands the lock over (got), or it gives
// up (err).
func (c *Client) contend(ctx context.Context, l *Lock, ttl time.Duration) (*Lock, error) {
	cn := contender{c: c, l: l, ttl: ttl, ttlArg: ttl.Milliseconds()}
	defer cn.leave()
	// The first attempt goes straight to the nodes unless others of this
	// Client already wait for the key: an uncontended Acquire costs the
	// queue nothing.
	var got bool
	var err error
	if c.waits.Waiting(l.key) {
		cn.wt = c.waits.Join(l.key)
		got, err = c.waitTurn(ctx, cn.wt, l, ttl, cn.ttlArg)
	}
	for failed := 1; !got && err == nil; failed++ {
		got, err = cn.step(ctx, failed)
	}
	if err != nil {
		return nil, err
	}
	cn.acquired = true
	return l, nil
}

// contender is one Acquire's state while it contends for its key.
type contender struct {
	c        *Client
	l        *Lock
	ttl      time.Duration
	ttlArg   any                        // ttl in milliseconds, boxed once for every attempt
	wt       *waiting.Waiter[handOffer] // its place in the key's queue, once it joined
	acquired bool                       // it leaves the queue holding the lock
	// an keeps its entry in the key's waiting room while it waits at the
	// head of the queue, once refused: new shared Locks wait behind it.
	an *waiting.Announcer
	// subscribed: it has subscribed to the key's release channel, and
	// attempted again once the subscription took effect.
	subscribed bool
}

// leave takes the Acquire out of the key's queue, if it joined, and out
// of the key's waiting room, if it entered.
func (cn *contender) leave() {
	cn.an.Stop()
	if cn.wt != nil {
		cn.c.waits.Leave(cn.l.key, cn.wt, cn.acquired)
	}
}

// step makes step number failed (the count of those that failed
// before it, plus one) and, when it fails, waits for the next one. It
// reports whether the lock is held, by the step or handed over while it
// waited, or the error that ends the Acquire.
func (cn *contender) step(ctx context.Context, failed int) (got bool, err error) {
	c := cn.c
	if cn.wt != nil {
		c.waits.BeforeAttempt(cn.l.key)
	}
	err = c.attempt(ctx, cn.l, cn.ttl, cn.ttlArg, failed)
	if err == nil {
		return true, nil
	}
	wait, stop := c.backoff(ctx, err, failed)
	if stop != nil {
		return false, stop
	}
	return cn.waitNext(ctx, err, wait)
}

// backoff returns how long to wait after attempt number failed failed with
// err, or the error that ends the Acquire.
func (c *Client) backoff(ctx context.Context, err error, failed int) (time.Duration, error) {
	if errors.Is(err, ErrInvalidArgument) || c.misconfigured(err) {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, withCause(err, ctx.Err())
	}
	if c.unavailableTooLong(err) {
		return 0, err
	}
	wait, ok := c.cfg.retry.Backoff(failed)
	if !ok {
		return 0, err
	}
	return wait, nil
}

// misconfigured reports whether err, a failed attempt's, has so many
// nodes refusing our credentials or rights (ErrAuth, ErrNoPermission) that
// the others cannot make a quorum: no attempt can succeed until an
// operator mends them, so none is made. Fewer such nodes are shown in
// the error like nodes down, and the others may still grant the lock.
func (c *Client) misconfigured(err error) bool {
	var qe *QuorumError
	if err == nil || !errors.As(err, &qe) {
		return false
	}
	n := 0
	for _, ne := range qe.Nodes {
		if engine.IsMisconfig(ne.Err) {
			n++
		}
	}
	return n > c.nodes.Len()-c.nodes.Quorum
}

// waitNext waits, after an attempt failed with err, until the next attempt:
// for the Acquire's turn in the key's queue, which it joins now; for its
// subscription to the key's release channel to take effect; or for a
// release hint, the holder's remaining TTL or wait, whichever comes first.
// A Release of this Client may hand it the lock meanwhile (got).
func (cn *contender) waitNext(ctx context.Context, err error, wait time.Duration) (got bool, werr error) {
	c, key := cn.c, cn.l.key
	if cn.wt == nil {
		cn.wt = c.waits.Join(key)
		select {
		case <-cn.wt.Turn: // at the head at once: wait below
		default:
			return c.waitTurn(ctx, cn.wt, cn.l, cn.ttl, cn.ttlArg)
		}
	}
	if cn.an == nil {
		cn.an = c.announce(ctx, cn.l, waitsExclusive, cn.ttl)
	}
	if !cn.subscribed {
		// Subscribe, then attempt again at once: a release that came
		// before the subscription took effect is not missed.
		cn.subscribed = true
		if ready := c.waits.Subscribe(key); ready != nil {
			timer := time.NewTimer(c.nodeTimeout(cn.ttl))
			werr := c.waitFor(ctx, ready, timer.C)
			timer.Stop()
			if werr != nil {
				return false, withCause(err, werr)
			}
			return false, nil
		}
	}
	timer := time.NewTimer(untilHolderExpires(err, wait))
	got, werr = c.waitHandover(ctx, cn.wt, c.newOffer(cn.l, cn.ttl, cn.ttlArg), cn.wt.Wake, timer.C)
	timer.Stop()
	if got {
		return true, nil
	}
	if werr != nil {
		return false, withCause(err, werr)
	}
	return false, nil
}

// untilHolderExpires caps wait, after an attempt that failed with err, at
// the longest remaining TTL the refusing nodes reported for the holder's
// key: a waiter sleeps no longer than the key can live.
func untilHolderExpires(err error, wait time.Duration) time.Duration {
	var qe *QuorumError
	if errors.As(err, &qe) && qe.holderTTL >= 0 {
		wait = min(wait, qe.holderTTL+holderTTLSlack)
	}
	return wait
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

// waitTurn waits until wt is at the head of key's queue. When the head
// before it left holding the lock, it then waits for that lock's release
// (the Client's own Release wakes it, or a quorum of release hints) or the
// first backoff, rather than attempt at once and be refused; that lock's
// Release may hand it over meanwhile (got).
func (c *Client) waitTurn(ctx context.Context, wt *waiting.Waiter[handOffer], l *Lock, ttl time.Duration, ttlArg any) (got bool, err error) {
	key := l.key
	if err := c.waitFor(ctx, wt.Turn, nil); err != nil {
		return false, fmt.Errorf("%w: %q: waiting behind an earlier Acquire of this Client: %w", ErrNotAcquired, showKey(key), err)
	}
	if !wt.AfterHolder {
		return false, nil
	}
	wait, _ := c.cfg.retry.Backoff(1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	got, err = c.waitHandover(ctx, wt, c.newOffer(l, ttl, ttlArg), wt.Wake, timer.C)
	if err != nil {
		return false, fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(key), err)
	}
	return got, nil
}

// waitFor waits for ch or timeUp, and reports ctx's error or ErrClosed when
// either comes first.
func (c *Client) waitFor(ctx context.Context, ch <-chan struct{}, timeUp <-chan time.Time) error {
	select {
	case <-ch:
		return nil
	case <-timeUp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.nodes.Life.Closing:
		return ErrClosed
	}
}

// TryAcquire makes one attempt to take the lock on key for ttl. It fails with
// an error matching ErrNotAcquired when the lock is held elsewhere or too few
// nodes answered in time (and ErrUnavailable when so many failed that no
// quorum could be asked); then it rolls back as Acquire does.
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return c.observedAcquire(ctx, "try-acquire", key, ttl, opts, false)
}

// prepare validates a lock request before anything is sent and makes the
// handle that carries the token across attempts. On success the caller must
// call c.nodes.life.end when done.
func (c *Client) prepare(ctx context.Context, key string, ttl time.Duration, opts []AcquireOption) (*Lock, time.Duration, error) {
	if ctx == nil {
		return nil, 0, invalid("nil context")
	}
	ac, err := acquireOptions(opts)
	if err != nil {
		return nil, 0, err
	}
	if key == "" {
		return nil, 0, invalid("empty key")
	}
	if what := reservedKey(key); what != "" {
		return nil, 0, invalid("key %q is reserved: %s", showKey(key), what)
	}
	ttl, err = c.cfg.checkTTL(ttl)
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(key), err)
	}
	if err := c.nodes.Life.BeginCall(); err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(key), err)
	}
	return c.newLock(key, ac), ttl, nil
}

// acquireOptions applies and validates the options of one call.
func acquireOptions(opts []AcquireOption) (acquireConfig, error) {
	var ac acquireConfig
	if len(opts) > 0 {
		p := new(acquireConfig) // applyAcquire's receiver escapes: only with options
		for _, o := range opts {
			if o == nil {
				return ac, invalid("nil acquire option")
			}
			o.applyAcquire(p)
		}
		ac = *p
	}
	return ac, ac.validate()
}

// newLock makes the handle of an Acquire of key, with its token.
func (c *Client) newLock(key string, ac acquireConfig) *Lock {
	l := &Lock{
		client:    c,
		key:       key,
		kind:      ac.kind,
		owner:     ac.owner,
		shared:    ac.shared,
		permits:   ac.permits,
		permitArg: int64(ac.permits),
		pref:      -1,
		vals:      script.NewPrefixes(ac.owner, ac.ownerSet, ac.metadata),
		seq:       engine.NewLanes(c.nodes.Len()),
		extending: make(chan struct{}, 1),
		holds:     1,
	}
	l.late = script.RefusalsKey(key, &l.vals, c.cluster)
	if c.cfg.fencing || ac.fenced {
		l.fenceKey = script.CounterKey(key)
	}
	if l.kind == nil {
		l.kind = exclusiveKind{}
	}
	return l
}
