package redlock

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"sync"
	"time"
)

// MaxOwnerLen is the longest owner id WithOwner accepts, in bytes.
const MaxOwnerLen = 512

// WithOwner makes the lock belong to the request id rather than to the call:
// its token is derived from id, so any Acquire with the same id and key,
// from this process or another, is the same holder. Such an Acquire re-enters
// a lock the id holds instead of waiting for it (a retried request does not
// lock itself out for the TTL), and a different id is refused as usual.
//
// Within one Client, acquiring a key the id already holds returns the same
// *Lock with its hold count raised, without a round trip; the key is released
// on the nodes only when Release has been called once per hold. Across
// Clients (and processes) there is no shared count: the same id is the same
// holder: the later Acquire takes the key over on the nodes (the earlier
// Lock's Extend then fails with ErrNotHeld), and a Release from any of them
// frees it for all.
//
// Go has no goroutine identity, so the id is the caller's responsibility:
// use one per request or job that may retry, never a constant shared by
// unrelated work (every holder of a shared id would run at once). An empty
// id, or one longer than MaxOwnerLen, fails with ErrInvalidArgument.
func WithOwner(id string) AcquireOption {
	return acquireOptionFunc(func(c *acquireConfig) { c.owner, c.ownerSet = id, true })
}

func (ac *acquireConfig) validate() error {
	if ac.ownerSet && (ac.owner == "" || len(ac.owner) > MaxOwnerLen) {
		return invalid("WithOwner: id must be 1 to %d bytes, got %d", MaxOwnerLen, len(ac.owner))
	}
	return nil
}

// ownerToken derives an owner's token: 130 bits of a hash of the id, in the
// same alphabet as random tokens but starting with a lower-case "o", which a
// random token never contains.
func ownerToken(id string) string {
	sum := sha256.Sum256([]byte("redlock owner\x00" + id))
	return "o" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:17])[:25]
}

// ownerGeneration is the first generation of an owner's Lock: the scripts
// let a holder's later generation replace an earlier one, and an owner's
// Lock in another process must be able to take over the key, so it starts
// from the clock rather than from 0.
func ownerGeneration() uint64 { return uint64(time.Now().UnixMicro()) }

type ownerKey struct{ key, owner string }

// owners are the locks held under WithOwner by one Client, for reentrancy.
type owners struct {
	mu   sync.Mutex
	held map[ownerKey]*Lock
}

// reenter returns the Lock that l's owner already holds on l's key, with one
// more hold, or nil when there is none that is still valid. A Lock of the
// owner whose release has started is waited for, so that a new acquisition
// does not race its deletes on the nodes.
func (o *owners) reenter(ctx context.Context, l *Lock, now time.Time) (*Lock, error) {
	k := ownerKey{l.key, l.owner}
	o.mu.Lock()
	held := o.held[k]
	o.mu.Unlock()
	if held == nil {
		return nil, nil
	}
	held.mu.Lock()
	if done := held.releaseDone; done != nil {
		held.mu.Unlock()
		select {
		case <-done:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer held.mu.Unlock()
	if !now.Before(held.until) {
		return nil, nil
	}
	held.holds++
	return held, nil
}

// register records l as its owner's Lock on its key.
func (o *owners) register(l *Lock) {
	if l.owner == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held == nil {
		o.held = make(map[ownerKey]*Lock)
	}
	o.held[ownerKey{l.key, l.owner}] = l
}

// forget removes l once its release has started.
func (o *owners) forget(l *Lock) {
	if l.owner == "" {
		return
	}
	k := ownerKey{l.key, l.owner}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held[k] == l {
		delete(o.held, k)
	}
}
