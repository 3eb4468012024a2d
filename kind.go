package redlock

import (
	"strconv"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// A kind is a primitive: what the Lock's ops are made of for a Lock of it.
// A Lock's kind is chosen once, when it is made (newLock, acquireKeys), and
// the code that sends its ops calls through it without asking which it is.
// The kinds: exclusiveKind (one key, here), sharedKind (shared.go),
// permitKind (permits.go) and allKind (several keys, multikey.go).
type kind interface {
	// address sets o's keys: the Lock's key, or its keys, and with
	// counters their fencing counters after them.
	address(l *Lock, o *engine.Op, counters bool)
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
	// gone for tombMs: a copy of any of them may still land
	// (docs/late-writes.md).
	deleteOp(l *Lock, v script.Value, upTo, gone uint64, tombMs int64) engine.Op
}

// exclusiveKind is a Lock of one key held by one holder, with or without
// fencing and an owner.
type exclusiveKind struct{}

func (exclusiveKind) address(l *Lock, o *engine.Op, counters bool) {
	o.Keys[0] = l.key
	o.NKeys = 1
	if counters {
		o.Keys[1], o.NKeys = l.fenceKey, 2
	}
}

func (k exclusiveKind) acquireOp(l *Lock, v script.Value, ttlMs, horizonMs any) engine.Op {
	op := engine.Op{Script: acquireScript, Read: script.ReadAcquire, Args: script.WriteArgs(v, ttlMs, true), NArgs: 4}
	if horizonMs != nil {
		op.Script, op.Read = acquireFencedScript, script.ReadAcquireFenced
		op.Args[op.NArgs] = horizonMs
		op.NArgs++
	}
	k.address(l, &op, horizonMs != nil)
	return op
}

func (k exclusiveKind) extendOp(l *Lock, v script.Value, ttlMs any, fence uint64, horizonMs any) engine.Op {
	op := engine.Op{Script: extendScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
	k.address(l, &op, horizonMs != nil)
	if horizonMs != nil {
		op.Args[op.NArgs], op.Args[op.NArgs+1] = strconv.FormatUint(fence, 10), horizonMs
		op.NArgs += 2
	}
	return op
}

func (k exclusiveKind) restoreOp(l *Lock, v script.Value, ttlMs any) engine.Op {
	op := engine.Op{Script: restoreScript, Read: script.ReadRestore, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
	k.address(l, &op, false)
	return op
}

func (k exclusiveKind) deleteOp(l *Lock, v script.Value, upTo, gone uint64, tombMs int64) engine.Op {
	op := engine.Op{Script: releaseScript, Read: script.ReadDelete, Args: [engine.MaxArgs]any{v.Prefix, upTo, gone, tombMs}, NArgs: 4}
	k.address(l, &op, false)
	return op
}
