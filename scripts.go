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
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/acquire_fenced.lua
	acquireFencedSrc string
	//go:embed scripts/fence_commit.lua
	fenceCommitSrc string
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/restore.lua
	restoreSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/restart_guard.lua
	restartGuardSrc string
	//go:embed scripts/handover.lua
	handoverSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string

	// The scripts that write a lock key share lib.lua, prepended; the
	// acquire scripts take.lua too.
	acquireScript       = redis.NewScript(libSrc + takeSrc + acquireSrc)
	acquireFencedScript = redis.NewScript(libSrc + takeSrc + acquireFencedSrc)
	fenceCommitScript   = redis.NewScript(fenceCommitSrc)
	extendScript        = redis.NewScript(extendSrc)
	restoreScript       = redis.NewScript(libSrc + restoreSrc)
	releaseScript       = redis.NewScript(libSrc + releaseSrc)
	handoverScript      = redis.NewScript(libSrc + takeSrc + handoverSrc)
	inspectScript       = redis.NewScript(inspectSrc)

	// The guarded acquires run the restart guard's prologue first.
	acquireGuardedScript       = redis.NewScript(restartGuardSrc + libSrc + takeSrc + acquireSrc)
	acquireFencedGuardedScript = redis.NewScript(restartGuardSrc + libSrc + takeSrc + acquireFencedSrc)

	allScripts = []*redis.Script{acquireScript, acquireFencedScript, fenceCommitScript, extendScript, restoreScript, releaseScript,
		handoverScript, acquireGuardedScript, acquireFencedGuardedScript, inspectScript}
)

// name says what the op does, for the hooks and the log.
func opName(o *engine.Op) string {
	switch o.Script {
	case fenceCommitScript:
		return "commit"
	case extendScript:
		return "extend"
	case restoreScript:
		return "restore"
	case releaseScript:
		return "delete"
	case handoverScript:
		return "handover"
	case inspectScript:
		return "inspect"
	}
	return "acquire"
}

func acquireOp(key string, v script.Value, ttlMs any) engine.Op {
	return engine.Op{Script: acquireScript, Read: script.ReadAcquire,
		Keys: [engine.MaxKeys]string{key}, NKeys: 1, Args: script.WriteArgs(v, ttlMs, true), NArgs: 4}
}

// acquireFencedOp is acquireOp that also reads the node's fencing counter
// and clock; horizonMs is how long the counter is kept once idle.
func acquireFencedOp(key, fenceKey string, v script.Value, ttlMs, horizonMs any) engine.Op {
	op := engine.Op{Script: acquireFencedScript, Read: script.ReadAcquireFenced,
		Keys: [engine.MaxKeys]string{key, fenceKey}, NKeys: 2, Args: script.WriteArgs(v, ttlMs, true), NArgs: 5}
	op.Args[4] = horizonMs
	return op
}

func fenceCommitOp(key, fenceKey string, v script.Value, fence uint64, horizonMs any) engine.Op {
	return engine.Op{Script: fenceCommitScript, Read: script.ReadFenceCommit,
		Keys: [engine.MaxKeys]string{key, fenceKey}, NKeys: 2,
		Args: [engine.MaxArgs]any{v.Prefix, strconv.FormatUint(fence, 10), horizonMs}, NArgs: 3}
}

func extendOp(key string, v script.Value, ttlMs any) engine.Op {
	return engine.Op{Script: extendScript, Read: script.ReadExtend,
		Keys: [engine.MaxKeys]string{key}, NKeys: 1, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
}

// extendFencedOp is extendOp that also raises the node's fencing counter to
// the lock's fence and keeps it for horizonMs more.
func extendFencedOp(key, fenceKey string, v script.Value, ttlMs any, fence uint64, horizonMs any) engine.Op {
	op := engine.Op{Script: extendScript, Read: script.ReadExtend,
		Keys: [engine.MaxKeys]string{key, fenceKey}, NKeys: 2, Args: script.WriteArgs(v, ttlMs, false), NArgs: 6}
	op.Args[4], op.Args[5] = strconv.FormatUint(fence, 10), horizonMs
	return op
}

func restoreOp(key string, v script.Value, ttlMs any) engine.Op {
	return engine.Op{Script: restoreScript, Read: script.ReadRestore,
		Keys: [engine.MaxKeys]string{key}, NKeys: 1, Args: script.WriteArgs(v, ttlMs, false), NArgs: 4}
}

// deleteOp deletes our key up to generation upTo (0: any of ours).
func deleteOp(key string, v script.Value, upTo uint64) engine.Op {
	return engine.Op{Script: releaseScript, Read: script.ReadDelete,
		Keys: [engine.MaxKeys]string{key}, NKeys: 1, Args: [engine.MaxArgs]any{v.Prefix, upTo}, NArgs: 2}
}

// handoverOp takes the key from the holder whose prefix is leaving and gives
// it to the waiter's value v, unless a client other than the waiter's waits
// for it and streak is false; subscribed tells whether the waiter's client
// subscribes to the key's release channel.
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
	if o.Script == acquireFencedScript {
		o.Script = acquireFencedGuardedScript
	} else {
		o.Script = acquireGuardedScript
	}
	o.Keys[o.NKeys] = restartMarker
	o.NKeys++
	o.Args[o.NArgs] = guardMs
	o.NArgs++
	return o
}
