package redlock

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/waiting"
)

// A Lock of several keys (docs/multikey.md) is one Lock: one token, one
// generation per write, one validity. On each node one script writes every
// key or none (scripts/take_all.lua), so a node votes for all of them or
// refuses; two holders of one key would each need a quorum of nodes, and two
// quorums share a node, whose script admitted only one of them.

// AcquireAll takes keys together, all or none, for ttl, as Acquire takes one
// key: while the Lock holds them no other Lock holds any of them. Keys are
// de-duplicated and sorted, so no two calls deadlock. Release, Extend,
// KeepAlive and Fence cover every key (docs/multikey.md). Bad input is
// ErrInvalidArgument before anything is sent: no keys, more than MaxKeys,
// WithOwner, or keys in several hash slots on a Redis Cluster node (give
// them a common {hash tag}). A waiter is woken when any of its keys is
// released.
func (c *Client) AcquireAll(ctx context.Context, keys []string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return c.acquireAll(ctx, "acquire-all", keys, ttl, opts, true)
}

// TryAcquireAll is AcquireAll with one attempt, as TryAcquire.
func (c *Client) TryAcquireAll(ctx context.Context, keys []string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return c.acquireAll(ctx, "try-acquire-all", keys, ttl, opts, false)
}

// DoAll is Do over keys taken together by AcquireAll.
func (c *Client) DoAll(ctx context.Context, keys []string, ttl time.Duration, fn func(ctx context.Context, l *Lock) error, opts ...AcquireOption) error {
	if fn == nil {
		return invalid("do on %d keys: nil function", len(keys))
	}
	return c.do(ctx, fn, func() (*Lock, error) { return c.AcquireAll(ctx, keys, ttl, opts...) })
}

// Keys returns the Lock's distinct keys, sorted; a Lock of one key returns
// its key alone, and a nil Lock nil.
func (l *Lock) Keys() []string {
	switch {
	case l == nil:
		return nil
	case l.keys != nil:
		return slices.Clone(l.keys)
	}
	return []string{l.key}
}

// acquireAll is AcquireAll (retry) or TryAcquireAll, told to the hooks and
// the log as op.
func (c *Client) acquireAll(ctx context.Context, op string, keys []string, ttl time.Duration, opts []AcquireOption, retry bool) (*Lock, error) {
	keys, err := c.checkKeys(keys, opts)
	if err != nil {
		return nil, err
	}
	if len(keys) == 1 {
		return c.observedAcquire(ctx, op, keys[0], ttl, opts, retry)
	}
	start := time.Now()
	l, err := c.acquireKeys(ctx, keys, ttl, opts, retry)
	if c.obs.on {
		c.obs.done(ctx, op, keys[0], start, err)
	}
	return l, err
}

// checkKeys returns keys distinct and sorted, or why they cannot be one
// Lock's.
func (c *Client) checkKeys(keys []string, opts []AcquireOption) ([]string, error) {
	if len(keys) == 0 {
		return nil, invalid("no keys")
	}
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) > MaxKeys {
		return nil, invalid("%d distinct keys, more than MaxKeys (%d)", len(keys), MaxKeys)
	}
	if len(keys) == 1 {
		return keys, nil
	}
	for _, k := range keys {
		switch {
		case k == "":
			return nil, invalid("empty key")
		case reservedKey(k) != "":
			return nil, invalid("key %q is reserved: %s", showKey(k), reservedKey(k))
		}
	}
	if ac, err := acquireOptions(opts); err == nil && ac.ownerSet {
		return nil, invalid("WithOwner with %d keys: an owner's Lock has one key", len(keys))
	} else if err == nil && ac.shared {
		return nil, invalid("Shared with %d keys: a shared Lock has one key", len(keys))
	} else if err == nil && ac.permitsSet {
		return nil, invalid("Permits with %d keys: a permit has one key", len(keys))
	}
	if c.cluster {
		slot := script.Slot(keys[0])
		for _, k := range keys[1:] {
			if script.Slot(k) != slot {
				return nil, invalid("keys %q and %q are in different Redis Cluster hash slots: give them a common {hash tag}",
					showKey(keys[0]), showKey(k))
			}
		}
	}
	return keys, nil
}

// acquireKeys takes keys, two or more, distinct and sorted.
func (c *Client) acquireKeys(ctx context.Context, keys []string, ttl time.Duration, opts []AcquireOption, retry bool) (*Lock, error) {
	l, ttl, err := c.prepare(ctx, keys[0], ttl, opts)
	if err != nil {
		return nil, err
	}
	defer c.nodes.Life.EndCall()
	l.keys, l.kind = keys, allKind{}
	if c.cfg.fencing {
		l.keysAndCounters = make([]string, 0, 2*len(keys))
		l.keysAndCounters = append(l.keysAndCounters, keys...)
		for _, k := range keys {
			l.keysAndCounters = append(l.keysAndCounters, script.CounterKey(k))
		}
	}
	return c.keep(c.acquireWatching(ctx, l, ttl, keys, retry))
}

// acquireWatching acquires l, whose keys are keys, on the nodes: with one
// attempt, or (retry) attempting until one succeeds, watching the keys'
// releases in between. Unlike Acquire's queue it never hands over: a Lock
// of several keys, or a shared one, is never handed a key.
func (c *Client) acquireWatching(ctx context.Context, l *Lock, ttl time.Duration, keys []string, retry bool) (*Lock, error) {
	ttlArg := ttl.Milliseconds()
	var what string // announced in the keys' waiting rooms once refused
	if retry {
		what = l.kind.waitAs(c, l, ttl)
	}
	var wt *waiting.Watcher
	var an *waiting.Announcer
	defer func() {
		an.Stop()
		if wt != nil {
			c.waits.Unwatch(wt)
		}
	}()
	for failed := 1; ; failed++ {
		if wt != nil {
			c.waits.Forget(wt)
		}
		err := c.attempt(ctx, l, ttl, ttlArg, failed)
		if err == nil {
			return l, nil
		}
		if !retry {
			return nil, err
		}
		wait, stop := c.backoff(ctx, err, failed)
		if stop != nil {
			return nil, stop
		}
		if an == nil && what != "" {
			an = c.announce(ctx, l, what, ttl)
		}
		if l.kind.entitledBy(err) {
			an.Entitle(waitsEntitled)
		}
		var werr error
		if wt == nil {
			// Watch every key, then attempt again at once: a release
			// that came before the subscriptions took effect is not
			// missed.
			var ready []<-chan struct{}
			wt, ready = c.waits.Watch(keys)
			werr = c.waitAll(ctx, ready, c.nodeTimeout(ttl))
		} else {
			timer := time.NewTimer(untilHolderExpires(err, wait))
			werr = c.waitFor(ctx, wt.Wake, timer.C)
			timer.Stop()
		}
		if werr != nil {
			return nil, withCause(err, werr)
		}
	}
}

// waitAll waits until every channel of chs is closed, or for d, and
// reports ctx's error or ErrClosed when either comes first.
func (c *Client) waitAll(ctx context.Context, chs []<-chan struct{}, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for _, ch := range chs {
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-c.nodes.Life.Closing:
			return ErrClosed
		}
	}
	return nil
}

// allKind is a Lock of several keys (AcquireAll): its keys, and with
// fencing their counters after them, in one op per node, all or none.
type allKind struct{ exclusiveKind }

func (allKind) many(l *Lock, counters bool) []string {
	if counters {
		return l.keysAndCounters
	}
	return l.keys
}

func (k allKind) acquireOp(l *Lock, v script.Value, ttlMs, horizonMs any) engine.Op {
	op := engine.Op{Script: acquireAllScript, Read: script.ReadAcquire, Args: script.WriteArgs(v, ttlMs, true), NArgs: 5}
	op.Args[4] = len(l.keys)
	if horizonMs != nil {
		op.Script, op.Read = acquireAllFencedScript, script.ReadAcquireFenced
		op.Args[5], op.NArgs = horizonMs, 6
	}
	address(l, &op, horizonMs != nil)
	return op
}

func (k allKind) extendOp(l *Lock, v script.Value, ttlMs any, fence uint64, horizonMs any) engine.Op {
	op := engine.Op{Script: extendAllScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 5}
	op.Args[4] = len(l.keys)
	if horizonMs != nil {
		op.Args[5], op.Args[6], op.NArgs = strconv.FormatUint(fence, 10), horizonMs, 7
	}
	address(l, &op, horizonMs != nil)
	return op
}

func (k allKind) deleteOp(l *Lock, v script.Value, upTo, gone uint64) engine.Op {
	op := k.exclusiveKind.deleteOp(l, v, upTo, gone)
	op.Script = releaseAllScript
	return op
}

func (allKind) handsOver() bool                             { return false }
func (allKind) waitAs(*Client, *Lock, time.Duration) string { return waitsAll }

func (allKind) released(c *Client, l *Lock) {
	for _, k := range l.keys {
		c.waits.Released(k)
	}
}
