package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// Permits (docs/permits.md): a key's n permits are n slots, each a lock of
// its own on every node (scripts/permits.lua). On each node one script
// gives a Lock the preferred slot if free, else the lowest free one; the
// round counts the confirmations by slot (engine.Spec.ByVal), and a permit
// holds when a quorum of nodes gave its Lock the same slot. Two holders of
// one slot would each need a quorum, and two quorums share a node, which
// gave the slot to one of them only: each slot has at most one holder, so
// the key has at most n. Counting holders on a majority instead is unsafe
// for n >= 2 (TestPermitsMajorityCountingControl).

// Permits takes one of the key's n permits (Acquire, TryAcquire, Do): at
// most n Locks taken with Permits(n) hold the key at once. Each permit is
// a Lock: Release, Extend, KeepAlive, Until and TTL touch it alone, and it
// expires by the nodes' clocks. While permits hold a key, an acquire of it
// with another n, or without Permits, fails at once with an error matching
// ErrInvalidArgument, as does Permits with n below 1 or above MaxPermits,
// with WithOwner or Shared, or with several keys. Fence of a permit is 0
// (docs/permits.md).
func Permits(n int) AcquireOption {
	return acquireOptionFunc(func(c *acquireConfig) { c.permits, c.permitsSet, c.kind = n, true, permitKind{} })
}

// Permit returns the slot (0 to n-1) of the key's permits the Lock holds,
// and false for a Lock not taken with Permits (or a nil Lock). Two Locks
// that hold the key at once hold different slots.
func (l *Lock) Permit() (slot int, ok bool) {
	if l == nil || l.permits == 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slot, true
}

// permitKind is a permit (Permits): one key, no fencing, its own scripts,
// with the number of permits, the slot it prefers and the slot it holds
// as arguments.
type permitKind struct{ exclusiveKind }

func (k permitKind) acquireOp(l *Lock, v script.Value, ttlMs, _ any) engine.Op {
	op := engine.Op{Script: acquirePermitScript, Read: script.ReadPermit, Args: script.WriteArgs(v, ttlMs, true), NArgs: 6}
	op.Args[4], op.Args[5] = l.permitArg, int64(l.pref)
	address(l, &op, false)
	return op
}

func (k permitKind) extendOp(l *Lock, v script.Value, ttlMs any, _ uint64, _ any) engine.Op {
	op := engine.Op{Script: extendPermitScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 5}
	op.Args[4] = l.slotArg
	address(l, &op, false)
	return op
}

func (k permitKind) restoreOp(l *Lock, v script.Value, ttlMs any) engine.Op {
	op := k.exclusiveKind.restoreOp(l, v, ttlMs)
	op.Script = restorePermitScript
	op.Args[4], op.Args[5], op.NArgs = l.slotArg, l.permitArg, 6
	return op
}

func (k permitKind) deleteOp(l *Lock, v script.Value, upTo, gone uint64) engine.Op {
	op := k.exclusiveKind.deleteOp(l, v, upTo, gone)
	op.Script = releasePermitScript
	return op
}

func (permitKind) byVal() bool     { return true }
func (permitKind) handsOver() bool { return false }

// waitAs: a permit announces nothing; it waits for a release of the key.
func (permitKind) waitAs(*Client, *Lock, time.Duration) string { return "" }

func (permitKind) held(l *Lock, t *engine.Tally) { l.slot, l.slotArg = int(t.Val), t.Val }

func (permitKind) missed(l *Lock, t *engine.Tally) { l.pref = nextSlot(t, l.pref) }

func (permitKind) fences() bool { return false }

// holding: a node holds a permit while the key is taken by permits of the
// same number, and the Lock's entry holds its slot.
func (permitKind) holding(l *Lock, r *keyRead) (time.Duration, error) {
	if r.in.Shares == nil || r.in.Count != l.permits {
		return 0, ErrHeldByOther
	}
	l.mu.Lock()
	slot := l.slot
	l.mu.Unlock()
	return r.ownShare(l, slot)
}

// dropStray takes out, in the background, the entries that l's held
// permit write of v left in another slot than the one a quorum gave it
// (t): such a node does not count for the Lock, and the slot is someone
// else's to take there. The entries a node wrote after the round stopped waiting
// expire with their TTL, never extended.
func (c *Client) dropStray(ctx context.Context, l *Lock, v script.Value, t *engine.Tally) {
	if !l.kind.byVal() || t.Confirmed == engine.Count(t.Where(func(r engine.Reply) bool { return r.Status == engine.OK })) {
		return
	}
	only := t.Where(func(r engine.Reply) bool { return r.Status == engine.OK && r.Val != t.Val })
	c.nodes.Launch(ctx, l.seq, engine.Spec{Effect: engine.Delete, Op: l.kind.deleteOp(l, v, v.Gen, v.Gen),
		Wait: c.cfg.cleanupTimeout, CallTimeout: c.cfg.cleanupTimeout, Only: only})
}

// nextSlot is the slot the next attempt of a permit prefers, after an
// attempt whose nodes gave the slots in t and which preferred pref: the
// lowest slot a node gave above pref, else the lowest a node gave, so that
// attempts go through the slots some node found free until a quorum finds
// one free; -1 (each node's lowest free slot) when no node gave one.
func nextSlot(t *engine.Tally, pref int) int {
	next, lowest := -1, -1
	for _, r := range t.Replies {
		if r.Status != engine.OK {
			continue
		}
		s := int(r.Val)
		if lowest < 0 || s < lowest {
			lowest = s
		}
		if s > pref && (next < 0 || s < next) {
			next = s
		}
	}
	if next < 0 {
		return lowest
	}
	return next
}
