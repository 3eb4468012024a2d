package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// WithOwner makes the lock belong to the request id rather than to the call:
// an Acquire of key with the same id in another Client or process takes the
// key over at once instead of waiting for it, and one in the same Client
// re-enters the id's Lock (one more hold, freed by as many Releases). Each
// Lock still deletes and extends only the values it wrote. Use one id per
// request that may retry, never one shared by unrelated work (docs/owners.md).
// An empty id, or one longer than MaxOwnerLen, fails with ErrInvalidArgument.
func WithOwner(id string) AcquireOption {
	return acquireOptionFunc(func(c *acquireConfig) { c.owner, c.ownerSet = id, true })
}

type ownerKey struct{ key, owner string }

// owners are, per key and owner, the Lock an owner holds through one
// Client, for reentrancy, or the Acquire of the owner that is under way:
// the owner's other Acquires of the key wait for its outcome, so that they
// end as one Lock with several holds, never as two Locks.
type owners struct {
	mu    sync.Mutex // lock order: before Lock.mu (docs/internals.md)
	slots map[ownerKey]*ownerSlot
}

// ownerSlot is an owner's place on a key in one Client.
type ownerSlot struct {
	l       *Lock         // the owner's Lock; nil while the Acquire runs
	running chan struct{} // closed once that Acquire has its outcome
}

// asOwner acquires l on the nodes (acquireOnNodes), unless l's owner holds
// l's key through this Client already: then it returns that Lock with one
// more hold, once an extension proved it still held. Concurrent calls for
// one owner and key go to the nodes one at a time. retry is Acquire's: it
// waits and attempts again, where TryAcquire makes one attempt.
func (c *Client) asOwner(ctx context.Context, l *Lock, ttl time.Duration, retry bool) (got *Lock, err error) {
	held, slot, err := c.enterOwner(ctx, l, ttl, retry)
	if held != nil || err != nil {
		return held, err
	}
	defer func() { c.owners.settle(ownerKey{l.key, l.owner}, slot, got) }()
	return c.acquireOnNodes(ctx, l, ttl, retry)
}

// enterOwner returns the Lock that l's owner holds on l's key, with one
// more hold; or the slot in which the caller acquires l on the nodes, which
// it must settle. While the owner's Lock is valid and not known to be lost,
// l never goes to the nodes: a takeover that failed would delete the values
// it took over, from under a Lock that still holds the key. When the Lock
// cannot be proven held for a passing reason (nodes that do not answer),
// enterOwner tries again as Acquire does (retry), or fails.
func (c *Client) enterOwner(ctx context.Context, l *Lock, ttl time.Duration, retry bool) (*Lock, *ownerSlot, error) {
	o := &c.owners
	k := ownerKey{l.key, l.owner}
	for failed := 1; ; failed++ {
		o.mu.Lock()
		s := o.slots[k]
		if s == nil || s.l != nil && !s.l.usable() {
			// Nothing to re-enter: a Lock released, lost, or past its
			// validity is never handed out again. It deletes and extends
			// only its own values, so l may take the key over from it.
			s = &ownerSlot{running: make(chan struct{})}
			if o.slots == nil {
				o.slots = make(map[ownerKey]*ownerSlot)
			}
			o.slots[k] = s
			o.mu.Unlock()
			return nil, s, nil
		}
		held := s.l
		o.mu.Unlock()
		if held == nil {
			if err := c.waitFor(ctx, s.running, nil); err != nil {
				return nil, nil, fmt.Errorf("%w: %q: waiting for another Acquire of the owner: %w", ErrNotAcquired, showKey(l.key), err)
			}
			continue
		}
		ok, err := held.reenter(ctx, ttl)
		switch {
		case ok:
			return held, nil, nil
		case err == nil: // released or lost meanwhile: l may take over
			continue
		case ctx.Err() != nil:
			return nil, nil, fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), err)
		}
		wait, again := c.cfg.retry.Backoff(failed)
		if !retry || !again {
			return nil, nil, fmt.Errorf("%w: %q: the owner's Lock on the key could not be proven held: %w", ErrNotAcquired, showKey(l.key), err)
		}
		timer := time.NewTimer(wait)
		werr := c.waitFor(ctx, nil, timer.C)
		timer.Stop()
		if werr != nil {
			return nil, nil, fmt.Errorf("%w: %q: the owner's Lock on the key could not be proven held: %w", ErrNotAcquired, showKey(l.key), errors.Join(err, werr))
		}
	}
}

// settle records the outcome of the Acquire that holds slot s: the owner's
// Lock l, or nil when it failed.
func (o *owners) settle(k ownerKey, s *ownerSlot, l *Lock) {
	o.mu.Lock()
	if o.slots[k] == s {
		if l != nil {
			s.l = l
		} else {
			delete(o.slots, k)
		}
	}
	o.mu.Unlock()
	close(s.running)
}

// forget removes l once its release has started.
func (o *owners) forget(l *Lock) {
	if l.owner == "" {
		return
	}
	k := ownerKey{l.key, l.owner}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.slots[k]; s != nil && s.l == l {
		delete(o.slots, k)
	}
}

// usable reports whether l may be re-entered: not released, not known to
// be lost, and within its validity.
func (l *Lock) usable() bool {
	now := l.client.cfg.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.releasing && !l.lost && now.Before(l.until)
}

// reenter adds a hold to l for an Acquire of ttl by its owner, once an
// extension (to ttl or l's own TTL, whichever is longer) proved l still
// held on a quorum: a Lock that another Client of the owner took over, or
// that was lost unnoticed, is not handed out. It reports false with no
// error when l is released, or lost (the nodes refused the extension, or
// its validity ended): the owner's next Lock may take over. A failed
// extension that proves nothing (nodes that did not answer) is the error.
func (l *Lock) reenter(ctx context.Context, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	ttl = max(ttl, l.ttl)
	l.mu.Unlock()
	if err := l.extend(ctx, ttl); err != nil {
		if !l.usable() {
			return false, nil
		}
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.releasing || l.lost {
		return false, nil
	}
	l.holds++
	return true, nil
}
