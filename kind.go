package redlock

import (
	"strconv"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// A kind is a primitive: what the Lock's ops are made of for a Lock of it.
// A Lock's kind is chosen once, when it is made (newLock, acquireKeys), and
// the code that sends its ops calls through it without asking which it is.
// The kinds: exclusiveKind (one key, here), sharedKind (shared.go),
// permitKind (permits.go) and allKind (several keys, multikey.go).
type kind interface {
	// many returns the keys of a Lock of several keys, with counters
	// their fencing counters after them; nil for a Lock of one key
	// (address).
	many(l *Lock, counters bool) []string
	// acquireOp writes v for ttlMs on l's keys; with fencing (horizonMs
	// not nil) it also reads the node's fencing counters and clock, and
	// keeps the counters for horizonMs once idle.
	acquireOp(l *Lock, v script.Value, ttlMs, horizonMs any) engine.Op
	// extendOp refreshes l's keys with v for ttlMs; with fencing
	// (horizonMs not nil) it also raises the nodes' fencing counters to
	// the lock's fence and keeps them for horizonMs more.
	extendOp(l *Lock, v script.Value, ttlMs any, fence uint64, horizonMs any) engine.Op
	// restoreOp writes v for ttlMs again where an extension missed it.
	restoreOp(l *Lock, v script.Value, ttlMs any) engine.Op
	// deleteOp deletes l's keys up to generation upTo (0: any of ours),
	// and leaves on every node what refuses l's writes up to generation
	// gone until the latest of their deadlines there: a copy of any of
	// them may still land (docs/late-writes.md).
	deleteOp(l *Lock, v script.Value, upTo, gone uint64) engine.Op

	// byVal tells whether an acquire round counts the nodes that answered
	// the same value (a permit holds one slot on a quorum).
	byVal() bool
	// held keeps what the round t that made l hold tells it (a permit's
	// slot); called with l.mu held.
	held(l *Lock, t *engine.Tally)
	// missed keeps what the failed attempt's round t tells the next one
	// (the slot a permit prefers).
	missed(l *Lock, t *engine.Tally)
	// handsOver tells whether a Release of l may hand its key to a
	// waiter of its Client (handover.go).
	handsOver() bool
	// released tells c's waiters that l's keys were released.
	released(c *Client, l *Lock)
	// waitAs readies l, which Acquire retries, to wait for its keys, and
	// returns what it announces in their waiting rooms once refused
	// (announce.go), "" for nothing.
	waitAs(c *Client, l *Lock, ttl time.Duration) string
	// entitledBy tells whether a refusal with err entitles l's
	// announcement (waiting.Announcer.Entitle).
	entitledBy(err error) bool
	// holding is l's remaining TTL on a node that holds its key, as r
	// read it, or why the node does not hold it for l (Inspect).
	holding(l *Lock, r *keyRead) (time.Duration, error)
	// fences tells whether the Lock's acquire reads the fencing counters,
	// and a commit round follows it (WithFencing).
	fences() bool
}

// address sets o's keys: the Lock's key, or its keys as its kind gives
// them (many), and with counters their fencing counters after them. Not a
// method of the kind: o passed through an interface would escape, and cost
// each op an allocation.
func address(l *Lock, o *engine.Op, counters bool) {
	o.Refusals = l.late
	o.Keys[0] = l.key
	o.NKeys = 1
	if many := l.kind.many(l, counters); many != nil {
		o.Many = many
	} else if counters {
		o.Keys[1], o.NKeys = l.fenceKey, 2
	}
}

// exclusiveKind is a Lock of one key held by one holder, with or without
// fencing and an owner. Its ops take their keys from address, which asks
// the Lock's own kind, so that the kinds that embed it keep its builders.
type exclusiveKind struct{}

func (exclusiveKind) many(*Lock, bool) []string { return nil }

func (exclusiveKind) acquireOp(l *Lock, v script.Value, ttlMs, horizonMs any) engine.Op {
	op := engine.Op{Script: acquireScript, Read: script.ReadAcquire, Args: script.WriteArgs(v, ttlMs, true), NArgs: 4}
	if horizonMs != nil {
		op.Script, op.Read = acquireFencedScript, script.ReadAcquireFenced
		op.Args[op.NArgs] = horizonMs
		op.NArgs++
	}
	address(l, &op, horizonMs != nil)
	return op
}

func (exclusiveKind) extendOp(l *Lock, v script.Value, ttlMs any, fence uint64, horizonMs any) engine.Op {
	op := engine.Op{Script: extendScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
	address(l, &op, horizonMs != nil)
	if horizonMs != nil {
		op.Args[op.NArgs], op.Args[op.NArgs+1] = strconv.FormatUint(fence, 10), horizonMs
		op.NArgs += 2
	}
	return op
}

func (exclusiveKind) restoreOp(l *Lock, v script.Value, ttlMs any) engine.Op {
	op := engine.Op{Script: restoreScript, Read: script.ReadRestore, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
	address(l, &op, false)
	return op
}

func (exclusiveKind) byVal() bool                                 { return false }
func (exclusiveKind) held(*Lock, *engine.Tally)                   {}
func (exclusiveKind) missed(*Lock, *engine.Tally)                 {}
func (exclusiveKind) handsOver() bool                             { return true }
func (exclusiveKind) waitAs(*Client, *Lock, time.Duration) string { return waitsExclusive }
func (exclusiveKind) entitledBy(error) bool                       { return false }
func (exclusiveKind) released(c *Client, l *Lock)                 { c.waits.Released(l.key) }

func (exclusiveKind) fences() bool { return true }

func (exclusiveKind) holding(l *Lock, r *keyRead) (time.Duration, error) {
	if r.in.Shares != nil || !l.vals.Mine(r.in.Token) {
		return 0, ErrHeldByOther
	}
	return r.state.TTL, nil
}

func (exclusiveKind) deleteOp(l *Lock, v script.Value, upTo, gone uint64) engine.Op {
	op := engine.Op{Script: releaseScript, Read: script.ReadDelete, Args: [engine.MaxArgs]any{v.Prefix, upTo, gone}, NArgs: 3}
	address(l, &op, false)
	return op
}
