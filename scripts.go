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
// refusal, a chain, the restart guard's marker and a call past its
// deadline.
var (
	//go:embed scripts/late.lua
	lateSrc string
	//go:embed scripts/late_write.lua
	lateWriteSrc string
	//go:embed scripts/lib.lua
	libSrc string
	//go:embed scripts/take.lua
	takeSrc string
	//go:embed scripts/take_all.lua
	takeAllSrc string
	//go:embed scripts/wait.lua
	waitSrc string
	//go:embed scripts/take_fair.lua
	takeFairSrc string
	//go:embed scripts/announce.lua
	announceSrc string
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
	//go:embed scripts/settle.lua
	settleSrc string
	//go:embed scripts/leader.lua
	leaderSrc string
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
)

// The scripts' table: for each primitive, its scripts, the op each does
// (opName: the hooks and the log) and the parts each is assembled from, in
// order. Every script by which a Lock writes or deletes starts with
// late.lua, which takes off the pair the engine sends first (the Lock's
// refusals key and a node-clock millisecond, engine.Op.Refusals), and
// every write then with late_write.lua, which refuses it past its
// deadline (docs/late-writes.md). The scripts that write a lock key share
// lib.lua next; the exclusive acquire scripts take.lua too, and wait.lua
// and take_fair.lua (takeFair). A plain acquire and a one-key release
// first try their fast path (acquire_fast.lua, release_fast.lua), which
// returns before lib.lua's functions are defined: their definition is most
// of what an uncontended call costs the node. An acquire named with a guard
// also has a restart-guarded form (guardedForm): the guard's prologue,
// told whether the acquire that follows is fenced (the shape of its
// reply), after its write's deadline is checked and before the rest.
var (
	writing     = lateSrc + lateWriteSrc // how every write starts
	deleting    = lateSrc                // how every delete starts
	takeFair    = libSrc + takeSrc + waitSrc + takeFairSrc
	guardPlain  = "local guard_fenced = false\n" + restartGuardSrc
	guardFenced = "local guard_fenced = true\n" + restartGuardSrc

	// One key, one holder (kind.go), and what every Lock shares.
	acquireScript       = def("acquire", writing, guardPlain, acquireFastSrc, takeFair, acquireSrc)
	acquireFencedScript = def("acquire", writing, guardFenced, takeFair, acquireFencedSrc)
	extendScript        = def("extend", writing, "", counterSrc, extendSrc, extendOneSrc)
	restoreScript       = def("restore", writing, "", libSrc, restoreSrc)
	releaseScript       = def("delete", deleting, "", releaseFastSrc, libSrc, releaseSrc, releaseOneSrc)
	fenceCommitScript   = def("commit", writing, "", counterSrc, fenceCommitSrc)
	handoverScript      = def("handover", writing, "", takeFair, handoverSrc)
	inspectScript       = def("inspect", "", "", inspectSrc)
	settleScript        = def("settle", writing, "", settleSrc)                      // an elected leadership's term (election.go)
	leaderScript        = def("leader", "", "", leaderSrc)                           // an observer's read (election.go)
	announceScript      = def("announce", writing, "", libSrc, waitSrc, announceSrc) // a waiting Lock (announce.go)

	// Several keys, all or none (multikey.go).
	acquireAllScript       = def("acquire", writing, guardPlain, takeFair, takeAllSrc, acquireAllSrc)
	acquireAllFencedScript = def("acquire", writing, guardFenced, takeFair, takeAllSrc, acquireAllFencedSrc)
	extendAllScript        = def("extend", writing, "", counterSrc, extendSrc, extendAllSrc)
	releaseAllScript       = def("delete", deleting, "", libSrc, releaseSrc, releaseAllSrc)

	// Shared (shared.go): shared.lua after lib.lua; the acquire reads the
	// waiting room (wait.lua).
	acquireSharedScript = def("acquire", writing, guardPlain, libSrc, sharedSrc, waitSrc, acquireSharedSrc)
	extendSharedScript  = def("extend", writing, "", libSrc, sharedSrc, extendSharedSrc)
	restoreSharedScript = def("restore", writing, "", libSrc, sharedSrc, restoreSharedSrc)
	releaseSharedScript = def("delete", deleting, "", libSrc, sharedSrc, releaseSharedSrc)

	// Permits (permits.go): permits.lua after shared.lua.
	acquirePermitScript = def("acquire", writing, guardPlain, libSrc, sharedSrc, permitsSrc, acquirePermitSrc)
	extendPermitScript  = def("extend", writing, "", libSrc, sharedSrc, permitsSrc, extendPermitSrc)
	restorePermitScript = def("restore", writing, "", libSrc, sharedSrc, permitsSrc, restorePermitSrc)
	releasePermitScript = def("delete", deleting, "", libSrc, sharedSrc, permitsSrc, releasePermitSrc)
)

// What def fills in: every script, in the order of the table (Warm loads
// them), its text, the op it does and its restart-guarded form.
var (
	allScripts  []*redis.Script
	sources     = make(map[*redis.Script]string) // for the engine to send one with EVAL to a node that does not know it (engine.Config.Sources)
	opNames     = make(map[*redis.Script]string)
	guardedForm = make(map[*redis.Script]*redis.Script)
)

// def makes the script that does op, assembled from head (how a write or
// a delete starts, or nothing for a read) and parts, and, with a guard,
// its restart-guarded form: the guard between head and parts.
func def(op, head, guard string, parts ...string) *redis.Script {
	src := strings.Join(parts, "")
	s := newScript(op, head+src)
	if guard != "" {
		guardedForm[s] = newScript(op, head+guard+src)
	}
	return s
}

func newScript(op, src string) *redis.Script {
	s := redis.NewScript(src)
	allScripts = append(allScripts, s)
	sources[s], opNames[s] = src, op
	return s
}

// opName says what the op does, for the hooks and the log.
func opName(o *engine.Op) string { return opNames[o.Script] }

func fenceCommitOp(l *Lock, v script.Value, fence uint64, horizonMs any) engine.Op {
	op := engine.Op{Script: fenceCommitScript, Read: script.ReadFenceCommit,
		Args: [engine.MaxArgs]any{v.Prefix, strconv.FormatUint(fence, 10), horizonMs}, NArgs: 3}
	address(l, &op, true)
	return op
}

// handoverOp takes the key from the leaving Lock l and gives it to the
// waiter w's value v, unless a client other than the waiter's waits for
// it and streak is false; subscribed tells whether the waiter's client
// subscribes to the key's release channel. It is w's write, under w's
// refusals key; what stays refuses l's writes up to generation gone until
// their latest deadline, as l's Release would (engine.Op.Leaving). Only a
// Lock of one key hands over or is handed over.
func handoverOp(w, l *Lock, v script.Value, ttlMs any, gone uint64, subscribed, streak bool) engine.Op {
	mine := 0
	if subscribed {
		mine = 1
	}
	if streak {
		mine = -1 - mine
	}
	op := engine.Op{Script: handoverScript, Read: script.ReadHandover, Refusals: w.late, Leaving: l.seq, LeavingRefusals: l.late,
		Keys: [engine.MaxKeys]string{l.key}, NKeys: 1, Args: script.WriteArgs(v, ttlMs, true), NArgs: 7}
	op.Args[4], op.Args[5], op.Args[6] = l.vals.Own(), mine, gone
	return op
}

// announceOp enters l, waiting as what says (announce.lua: "w", "W" or
// "r"), in its keys' waiting rooms for ms milliseconds, or with end takes
// it out (leaving x for ms).
func announceOp(l *Lock, what string, ms int64, end bool) engine.Op {
	op := engine.Op{Script: announceScript, Read: script.ReadAnnounce,
		Args: [engine.MaxArgs]any{l.vals.Own(), what, ms}, NArgs: 3}
	if end {
		op.Args[3], op.NArgs = "x", 4
	}
	address(l, &op, false)
	return op
}

// restartMarker is the key of a node's boot marker (scripts/restart_guard.lua).
// No Client locks a key of that name (reservedKey).
const restartMarker = "redlock:boot"

// reservedKey reports why key cannot be a lock's key: the library keeps
// its own values under that name (the restart guard's marker, a fencing
// counter, a waiting room), which a lock's value would collide with.
func reservedKey(key string) string {
	switch {
	case key == restartMarker:
		return "the restart guard's marker"
	case strings.Contains(key, script.FenceSuffix):
		return "a fencing counter's name"
	case strings.Contains(key, waitSuffix):
		return "a waiting room's name"
	case strings.Contains(key, strings.TrimSuffix(script.LateSuffix, ":")):
		return "a Lock's refusals key's name"
	case strings.Contains(key, script.LeadersSuffix):
		return "an election's record of terms"
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
