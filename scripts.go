package redlock

import (
	_ "embed"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// The scripts run atomically on each node. A round sends EVALSHA with a
// command line it builds once for all its nodes (Set.evalArgs), through
// the node client's Process (node.eval); only a node that does not know the
// script (NOSCRIPT, as after a restart) gets it through redis.Script.Run,
// which sends EVALSHA again and then EVAL with the source
// (Op.evalOrLoad). Warm loads every script ahead of time (SCRIPT LOAD).
// User input only ever travels as KEYS and ARGV.
//
// The value a lock writes under its key is its prefix and a generation: each
// acquire attempt and each extension of one Lock writes a higher one. The
// prefix is the token and a dot; a Lock of an owner (WithOwner) writes the
// owner's token, a tilde, an id of its own and a dot, so that any Lock of the
// owner may take the key over (the acquire scripts match the holder's
// prefix, up to the tilde) but each Lock extends, commits and deletes only
// its own values (the other scripts match the whole prefix). The generation
// orders a Lock's own calls, so a call that reaches a node late cannot undo
// a later one. After an owner's takeover the value goes on with a chain of
// what it replaced, for the attempt's rollback to put back (take.lua,
// lib.lua). docs/late-writes.md tables what each script does with a
// tombstone, a chain and the restart guard's marker.
var (
	//go:embed scripts/lib.lua
	libSrc string
	//go:embed scripts/take.lua
	takeSrc string
	//go:embed scripts/take_all.lua
	takeAllSrc string
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/acquire_fenced.lua
	acquireFencedSrc string
	//go:embed scripts/acquire_all.lua
	acquireAllSrc string
	//go:embed scripts/acquire_all_fenced.lua
	acquireAllFencedSrc string
	//go:embed scripts/counter.lua
	counterSrc string
	//go:embed scripts/fence_commit.lua
	fenceCommitSrc string
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/extend_one.lua
	extendOneSrc string
	//go:embed scripts/extend_all.lua
	extendAllSrc string
	//go:embed scripts/restore.lua
	restoreSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/release_one.lua
	releaseOneSrc string
	//go:embed scripts/acquire_fast.lua
	acquireFastSrc string
	//go:embed scripts/release_fast.lua
	releaseFastSrc string
	//go:embed scripts/release_all.lua
	releaseAllSrc string
	//go:embed scripts/restart_guard.lua
	restartGuardSrc string
	//go:embed scripts/handover.lua
	handoverSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string
	//go:embed scripts/shared.lua
	sharedSrc string
	//go:embed scripts/acquire_shared.lua
	acquireSharedSrc string
	//go:embed scripts/extend_shared.lua
	extendSharedSrc string
	//go:embed scripts/restore_shared.lua
	restoreSharedSrc string
	//go:embed scripts/release_shared.lua
	releaseSharedSrc string
	//go:embed scripts/permits.lua
	permitsSrc string
	//go:embed scripts/acquire_permit.lua
	acquirePermitSrc string
	//go:embed scripts/extend_permit.lua
	extendPermitSrc string
	//go:embed scripts/restore_permit.lua
	restorePermitSrc string
	//go:embed scripts/release_permit.lua
	releasePermitSrc string

	// The scripts that write a lock key share lib.lua, prepended; the
	// acquire scripts take.lua too, and those of several keys take_all.lua.
	// A plain acquire and a one-key release first try their fast path
	// (acquire_fast.lua, release_fast.lua), which returns before lib.lua's
	// functions are defined: their definition is most of what an
	// uncontended call costs the node.
	acquireScript          = redis.NewScript(acquireFastSrc + libSrc + takeSrc + acquireSrc)
	acquireFencedScript    = redis.NewScript(libSrc + takeSrc + acquireFencedSrc)
	acquireAllScript       = redis.NewScript(libSrc + takeSrc + takeAllSrc + acquireAllSrc)
	acquireAllFencedScript = redis.NewScript(libSrc + takeSrc + takeAllSrc + acquireAllFencedSrc)
	fenceCommitScript      = redis.NewScript(counterSrc + fenceCommitSrc)
	extendScript           = redis.NewScript(counterSrc + extendSrc + extendOneSrc)
	extendAllScript        = redis.NewScript(counterSrc + extendSrc + extendAllSrc)
	restoreScript          = redis.NewScript(libSrc + restoreSrc)
	releaseScript          = redis.NewScript(releaseFastSrc + libSrc + releaseSrc + releaseOneSrc)
	releaseAllScript       = redis.NewScript(libSrc + releaseSrc + releaseAllSrc)
	handoverScript         = redis.NewScript(libSrc + takeSrc + handoverSrc)
	inspectScript          = redis.NewScript(inspectSrc)

	// A shared Lock's scripts (shared.go) share shared.lua, after lib.lua.
	acquireSharedScript = redis.NewScript(libSrc + sharedSrc + acquireSharedSrc)
	extendSharedScript  = redis.NewScript(libSrc + sharedSrc + extendSharedSrc)
	restoreSharedScript = redis.NewScript(libSrc + sharedSrc + restoreSharedSrc)
	releaseSharedScript = redis.NewScript(libSrc + sharedSrc + releaseSharedSrc)

	// A permit's scripts (permits.go) share permits.lua, after shared.lua.
	acquirePermitScript = redis.NewScript(libSrc + sharedSrc + permitsSrc + acquirePermitSrc)
	extendPermitScript  = redis.NewScript(libSrc + sharedSrc + permitsSrc + extendPermitSrc)
	restorePermitScript = redis.NewScript(libSrc + sharedSrc + permitsSrc + restorePermitSrc)
	releasePermitScript = redis.NewScript(libSrc + sharedSrc + permitsSrc + releasePermitSrc)

	// The guarded acquires run the restart guard's prologue first, told
	// whether the acquire that follows is fenced (the shape of its reply).
	guardPlain  = "local guard_fenced = false\n" + restartGuardSrc
	guardFenced = "local guard_fenced = true\n" + restartGuardSrc

	acquireGuardedScript          = redis.NewScript(guardPlain + acquireFastSrc + libSrc + takeSrc + acquireSrc)
	acquireFencedGuardedScript    = redis.NewScript(guardFenced + libSrc + takeSrc + acquireFencedSrc)
	acquireAllGuardedScript       = redis.NewScript(guardPlain + libSrc + takeSrc + takeAllSrc + acquireAllSrc)
	acquireAllFencedGuardedScript = redis.NewScript(guardFenced + libSrc + takeSrc + takeAllSrc + acquireAllFencedSrc)
	acquireSharedGuardedScript    = redis.NewScript(guardPlain + libSrc + sharedSrc + acquireSharedSrc)
	acquirePermitGuardedScript    = redis.NewScript(guardPlain + libSrc + sharedSrc + permitsSrc + acquirePermitSrc)

	// guardedForm is each acquire script's restart-guarded form.
	guardedForm = map[*redis.Script]*redis.Script{
		acquireScript:          acquireGuardedScript,
		acquireFencedScript:    acquireFencedGuardedScript,
		acquireAllScript:       acquireAllGuardedScript,
		acquireAllFencedScript: acquireAllFencedGuardedScript,
		acquireSharedScript:    acquireSharedGuardedScript,
		acquirePermitScript:    acquirePermitGuardedScript,
	}

	allScripts = []*redis.Script{acquireScript, acquireFencedScript, acquireAllScript, acquireAllFencedScript,
		fenceCommitScript, extendScript, extendAllScript, restoreScript, releaseScript, releaseAllScript,
		handoverScript, acquireGuardedScript, acquireFencedGuardedScript, acquireAllGuardedScript,
		acquireAllFencedGuardedScript, inspectScript,
		acquireSharedScript, extendSharedScript, restoreSharedScript, releaseSharedScript, acquireSharedGuardedScript,
		acquirePermitScript, extendPermitScript, restorePermitScript, releasePermitScript, acquirePermitGuardedScript}
)

// name says what the op does, for the hooks and the log.
func opName(o *engine.Op) string {
	switch o.Script {
	case fenceCommitScript:
		return "commit"
	case extendScript, extendAllScript, extendSharedScript, extendPermitScript:
		return "extend"
	case restoreScript, restoreSharedScript, restorePermitScript:
		return "restore"
	case releaseScript, releaseAllScript, releaseSharedScript, releasePermitScript:
		return "delete"
	case handoverScript:
		return "handover"
	case inspectScript:
		return "inspect"
	}
	return "acquire"
}

// address sets the keys of o, an op of l: its key, and with counters its
// fencing counter (second); for a Lock of several keys, all of them and
// then, with counters, theirs.
func (l *Lock) address(o *engine.Op, counters bool) {
	o.Keys[0] = l.key
	o.NKeys = 1
	switch {
	case l.keys != nil && counters:
		o.Many = l.keysAndCounters
	case l.keys != nil:
		o.Many = l.keys
	case counters:
		o.Keys[1], o.NKeys = l.fenceKey, 2
	}
}

// acquireOp writes v for ttlMs on l's keys; with fencing (horizonMs not
// nil) it also reads the node's fencing counters and clock, and keeps the
// counters for horizonMs once idle.
func acquireOp(l *Lock, v script.Value, ttlMs, horizonMs any) engine.Op {
	switch {
	case l.shared:
		op := engine.Op{Script: acquireSharedScript, Read: script.ReadAcquire, Args: script.WriteArgs(v, ttlMs, true), NArgs: 5}
		op.Args[4] = maxSharedArg
		l.address(&op, false)
		return op
	case l.permits > 0:
		op := engine.Op{Script: acquirePermitScript, Read: script.ReadPermit, Args: script.WriteArgs(v, ttlMs, true), NArgs: 6}
		op.Args[4], op.Args[5] = l.permitArg, int64(l.pref)
		l.address(&op, false)
		return op
	}
	fenced := horizonMs != nil
	op := engine.Op{Script: acquireScript, Read: script.ReadAcquire, Args: script.WriteArgs(v, ttlMs, true), NArgs: 4}
	if fenced {
		op.Script, op.Read = acquireFencedScript, script.ReadAcquireFenced
	}
	l.address(&op, fenced)
	if l.keys != nil {
		op.Script = acquireAllScript
		if fenced {
			op.Script = acquireAllFencedScript
		}
		op.Args[op.NArgs] = len(l.keys)
		op.NArgs++
	}
	if fenced {
		op.Args[op.NArgs] = horizonMs
		op.NArgs++
	}
	return op
}

func fenceCommitOp(l *Lock, v script.Value, fence uint64, horizonMs any) engine.Op {
	op := engine.Op{Script: fenceCommitScript, Read: script.ReadFenceCommit,
		Args: [engine.MaxArgs]any{v.Prefix, strconv.FormatUint(fence, 10), horizonMs}, NArgs: 3}
	l.address(&op, true)
	return op
}

// extendOp refreshes l's keys with v for ttlMs; with fencing (horizonMs not
// nil) it also raises the nodes' fencing counters to the lock's fence and
// keeps them for horizonMs more.
func extendOp(l *Lock, v script.Value, ttlMs any, fence uint64, horizonMs any) engine.Op {
	switch {
	case l.shared:
		op := engine.Op{Script: extendSharedScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
		l.address(&op, false)
		return op
	case l.permits > 0:
		op := engine.Op{Script: extendPermitScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 5}
		op.Args[4] = l.slotArg
		l.address(&op, false)
		return op
	}
	fenced := horizonMs != nil
	op := engine.Op{Script: extendScript, Read: script.ReadExtend, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
	l.address(&op, fenced)
	if l.keys != nil {
		op.Script = extendAllScript
		op.Args[op.NArgs] = len(l.keys)
		op.NArgs++
	}
	if fenced {
		op.Args[op.NArgs], op.Args[op.NArgs+1] = strconv.FormatUint(fence, 10), horizonMs
		op.NArgs += 2
	}
	return op
}

func restoreOp(l *Lock, v script.Value, ttlMs any) engine.Op {
	op := engine.Op{Script: restoreScript, Read: script.ReadRestore, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
	switch {
	case l.shared:
		op.Script = restoreSharedScript
	case l.permits > 0:
		op.Script = restorePermitScript
		op.Args[4], op.Args[5], op.NArgs = l.slotArg, l.permitArg, 6
	}
	l.address(&op, false)
	return op
}

// deleteOp deletes l's keys up to generation upTo (0: any of ours).
func deleteOp(l *Lock, v script.Value, upTo uint64) engine.Op {
	op := engine.Op{Script: releaseScript, Read: script.ReadDelete, Args: [engine.MaxArgs]any{v.Prefix, upTo}, NArgs: 2}
	l.address(&op, false)
	switch {
	case l.keys != nil:
		op.Script = releaseAllScript
	case l.shared:
		op.Script = releaseSharedScript
	case l.permits > 0:
		op.Script = releasePermitScript
	}
	return op
}

// handoverOp takes the key from the holder whose prefix is leaving and gives
// it to the waiter's value v, unless a client other than the waiter's waits
// for it and streak is false; subscribed tells whether the waiter's client
// subscribes to the key's release channel. Only a Lock of one key hands
// over or is handed over.
func handoverOp(key string, v script.Value, ttlMs, leaving any, subscribed, streak bool) engine.Op {
	mine := 0
	if subscribed {
		mine = 1
	}
	if streak {
		mine = -1 - mine
	}
	op := engine.Op{Script: handoverScript, Read: script.ReadHandover,
		Keys: [engine.MaxKeys]string{key}, NKeys: 1, Args: script.WriteArgs(v, ttlMs, true), NArgs: 6}
	op.Args[4], op.Args[5] = leaving, mine
	return op
}

// restartMarker is the key of a node's boot marker (scripts/restart_guard.lua).
// No Client locks a key of that name (reservedKey).
const restartMarker = "redlock:boot"

// reservedKey reports why key cannot be a lock's key: the library keeps
// its own values under that name (the restart guard's marker, a fencing
// counter), which a lock's value would collide with.
func reservedKey(key string) string {
	switch {
	case key == restartMarker:
		return "the restart guard's marker"
	case strings.Contains(key, script.FenceSuffix):
		return "a fencing counter's name"
	}
	return ""
}

// guarded turns an acquire op into its restart-guarded form: the marker as
// the last key, the guard in milliseconds as the last argument.
func guarded(o engine.Op, guardMs any) engine.Op {
	o.Script = guardedForm[o.Script]
	if o.Many != nil {
		o.Many = append(o.Many[:len(o.Many):len(o.Many)], restartMarker)
	} else {
		o.Keys[o.NKeys] = restartMarker
		o.NKeys++
	}
	o.Args[o.NArgs] = guardMs
	o.NArgs++
	return o
}
