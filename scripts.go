package redlock

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts run atomically on each node. A round sends EVALSHA with a
// command line it builds once for all its nodes (nodeSet.evalArgs), through
// the node client's Process (node.eval); only a node that does not know the
// script (NOSCRIPT, as after a restart) gets it through redis.Script.Run,
// which sends EVALSHA again and then EVAL with the source
// (nodeOp.evalOrLoad). Warm loads every script ahead of time (SCRIPT LOAD).
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

// scriptHashes are the scripts' SHA1 digests, boxed once.
var scriptHashes = func() map[*redis.Script]any {
	m := make(map[*redis.Script]any, len(allScripts))
	for _, s := range allScripts {
		m[s] = s.Hash()
	}
	return m
}()

// nodeOp is one script with its keys and arguments, run on each node of a
// round. It is built once per round and kept by value inside the round, its
// keys and arguments in its own arrays, so that a round costs no allocation
// per node. read turns a node's reply into a status; anything unexpected,
// including a Redis error reply or a code the script does not return, is
// statusUnknown: we cannot tell what the node did.
type nodeOp struct {
	script *redis.Script
	read   func(*redis.Cmd) reply
	keyBuf [maxKeys]string
	argBuf [maxArgs]any
	nkeys  int
	nargs  int
}

// The most keys and arguments an op has: the lock's key, its fence counter
// and the restart marker; a handover's six arguments, a guarded fenced
// acquire's.
const (
	maxKeys = 3
	maxArgs = 6
)

// name says what the op does, for the hooks and the log.
func (o *nodeOp) name() string {
	switch o.script {
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

func (o *nodeOp) evalOrLoad(ctx context.Context, n *node) reply {
	return o.read(o.script.Run(ctx, n.client, o.keyBuf[:o.nkeys], o.argBuf[:o.nargs]...))
}

// writeArgs are the arguments every writing script takes: the value, the
// TTL in milliseconds, a prefix and the generation. The acquire scripts take
// the holder's prefix (takeHolder), the others the Lock's own.
func writeArgs(v value, ttlMs any, takeHolder bool) [maxArgs]any {
	prefix := v.prefixArg
	if takeHolder {
		prefix = v.holderArg
	}
	return [maxArgs]any{v.s, ttlMs, prefix, v.gen}
}

func acquireOp(key string, v value, ttlMs any) nodeOp {
	return nodeOp{script: acquireScript, read: readAcquire,
		keyBuf: [maxKeys]string{key}, nkeys: 1, argBuf: writeArgs(v, ttlMs, true), nargs: 4}
}

// tookOver is the acquire scripts' confirmation whose value keeps what it
// took over: the chain of a pending owner's takeover (take.lua).
const tookOver = 6

// readAcquire reads acquire.lua's reply: a refusal carries the other
// holder's remaining TTL in milliseconds in val (-1 when unknown).
func readAcquire(cmd *redis.Cmd) reply {
	v, r, done := readInt(cmd)
	switch {
	case done:
		return r
	case v == tookOver:
		return reply{status: statusOK, chained: true}
	case v <= 0:
		return reply{status: statusRefused, val: -v - 1, err: ErrHeldByOther}
	case v == 2:
		return reply{status: statusRefused, val: -1, err: errLaterAttempt}
	case v == 3:
		return reply{status: statusRefused, val: -1, err: ErrRestartGuard}
	}
	return reply{err: errUnexpected(v)}
}

// readCode reads a script's integer reply: 1 is a confirmation, a code in
// refusals a definite refusal with its cause; an error, or any other code,
// is an unknown outcome.
func readCode(cmd *redis.Cmd, refusals map[int64]error) reply {
	v, r, done := readInt(cmd)
	switch {
	case done:
		return r
	case refusals[v] != nil:
		return reply{status: statusRefused, err: refusals[v]}
	}
	return reply{err: errUnexpected(v)}
}

// readInt reads a script's integer reply. An error, or a confirmation (1),
// is the whole reply (done); any other code v is the caller's to read.
func readInt(cmd *redis.Cmd) (v int64, r reply, done bool) {
	v, err := cmd.Int64()
	switch {
	case err != nil:
		return v, reply{err: err}, true
	case v == 1:
		return v, reply{status: statusOK}, true
	}
	return v, reply{}, false
}

// The refusals each script's reply can carry. A stale call (2: a later
// generation of the Lock is there) is a definite refusal: the node changed
// nothing. It is never expected in its own round, except by a delete, which
// must then leave the later value alone.
var (
	commitRefusals  = map[int64]error{0: ErrNotHeld}
	extendRefusals  = map[int64]error{0: ErrKeyAbsent, -1: ErrHeldByOther}
	restoreRefusals = map[int64]error{0: ErrHeldByOther, 2: errLaterAttempt}
	deleteRefusals  = map[int64]error{0: ErrKeyAbsent, -1: ErrHeldByOther, 2: errLaterAttempt}
)

// acquireFencedOp is acquireOp that also reads the node's fencing counter
// and clock; horizonMs is how long the counter is kept once idle.
func acquireFencedOp(key, fenceKey string, v value, ttlMs, horizonMs any) nodeOp {
	op := nodeOp{script: acquireFencedScript, read: readAcquireFenced,
		keyBuf: [maxKeys]string{key, fenceKey}, nkeys: 2, argBuf: writeArgs(v, ttlMs, true), nargs: 5}
	op.argBuf[4] = horizonMs
	return op
}

// readAcquireFenced reads {code, counter, seconds, microseconds[, pttl]}: a
// confirmation's val is the node's fence reading (see fenceReading), a
// refusal's the other holder's remaining TTL as for readAcquire.
func readAcquireFenced(cmd *redis.Cmd) reply {
	v, err := cmd.Slice()
	if err != nil {
		return reply{err: err}
	}
	if len(v) != 4 && len(v) != 5 {
		return reply{err: errUnexpected(v)}
	}
	code, ok := v[0].(int64)
	counter, err1 := parseReplyInt(v[1])
	sec, err2 := parseReplyInt(v[2])
	usec, err3 := parseReplyInt(v[3])
	if !ok || err1 != nil || err2 != nil || err3 != nil || usec >= 1e6 {
		return reply{err: errUnexpected(v)}
	}
	r := fenceReading(counter, sec, usec)
	switch code {
	case 1, tookOver:
		return reply{status: statusOK, val: r, chained: code == tookOver}
	case 0:
		pttl := int64(-1)
		if len(v) == 5 {
			if p, ok := v[4].(int64); ok {
				pttl = p
			}
		}
		return reply{status: statusRefused, val: pttl, err: ErrHeldByOther}
	case 2:
		return reply{status: statusRefused, val: -1, err: errLaterAttempt}
	case 3:
		return reply{status: statusRefused, val: -1, err: ErrRestartGuard}
	}
	return reply{err: errUnexpected(v)}
}

// parseReplyInt reads a non-negative integer that a script returned as a
// string (a stored counter, TIME's fields) or as an integer.
func parseReplyInt(x any) (int64, error) {
	switch x := x.(type) {
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err == nil && n < 0 {
			err = errUnexpected(x)
		}
		return n, err
	case int64:
		if x < 0 {
			return 0, errUnexpected(x)
		}
		return x, nil
	}
	return 0, errUnexpected(x)
}

func fenceCommitOp(key, fenceKey string, v value, fence uint64, horizonMs any) nodeOp {
	return nodeOp{script: fenceCommitScript, read: readFenceCommit,
		keyBuf: [maxKeys]string{key, fenceKey}, nkeys: 2,
		argBuf: [maxArgs]any{v.prefixArg, strconv.FormatUint(fence, 10), horizonMs}, nargs: 3}
}

func readFenceCommit(cmd *redis.Cmd) reply { return readCode(cmd, commitRefusals) }

func extendOp(key string, v value, ttlMs any) nodeOp {
	return nodeOp{script: extendScript, read: readExtend,
		keyBuf: [maxKeys]string{key}, nkeys: 1, argBuf: writeArgs(v, ttlMs, false), nargs: 4}
}

// extendFencedOp is extendOp that also raises the node's fencing counter to
// the lock's fence and keeps it for horizonMs more.
func extendFencedOp(key, fenceKey string, v value, ttlMs any, fence uint64, horizonMs any) nodeOp {
	op := nodeOp{script: extendScript, read: readExtend,
		keyBuf: [maxKeys]string{key, fenceKey}, nkeys: 2, argBuf: writeArgs(v, ttlMs, false), nargs: 6}
	op.argBuf[4], op.argBuf[5] = strconv.FormatUint(fence, 10), horizonMs
	return op
}

func readExtend(cmd *redis.Cmd) reply { return readCode(cmd, extendRefusals) }

func restoreOp(key string, v value, ttlMs any) nodeOp {
	return nodeOp{script: restoreScript, read: readRestore,
		keyBuf: [maxKeys]string{key}, nkeys: 1, argBuf: writeArgs(v, ttlMs, false), nargs: 4}
}

func readRestore(cmd *redis.Cmd) reply { return readCode(cmd, restoreRefusals) }

// deleteOp deletes our key up to generation upTo (0: any of ours).
func deleteOp(key string, v value, upTo uint64) nodeOp {
	return nodeOp{script: releaseScript, read: readDelete,
		keyBuf: [maxKeys]string{key}, nkeys: 1, argBuf: [maxArgs]any{v.prefixArg, upTo}, nargs: 2}
}

func readDelete(cmd *redis.Cmd) reply { return readCode(cmd, deleteRefusals) }

// withTombstone is delete op o that, where the key is absent, leaves a
// tombstone against the Lock's writes up to generation gen for ttlMs
// (scripts/release.lua).
func (o nodeOp) withTombstone(gen uint64, ttlMs int64) nodeOp {
	o.argBuf[2], o.argBuf[3] = gen, ttlMs
	o.nargs = 4
	return o
}

// tombstoneTTL is the longest a tombstone lives: how long a write of ours
// whose reply never came is kept from landing after a delete found the key
// absent. A TCP segment retransmitted three times is late by about 1.4s. A
// tombstone that refused the write it was left against lives one more
// second, for a copy that go-redis sent again.
const tombstoneTTL = 2 * time.Second

// The codes of handover.lua that say the leaving holder's value was there.
const (
	handedOver       = 3 // and the key is the waiter's now
	releasedHandover = 4 // and it was deleted: the waiter contends as usual
	handedInStreak   = 5 // as handedOver, while other clients wait
)

// handedAway reports whether a handover reply says the leaving holder's
// value was there: it is gone now.
func handedAway(r reply) bool {
	return r.val == handedOver || r.val == releasedHandover || r.val == handedInStreak
}

// handoverOp takes the key from the holder whose prefix is leaving and gives
// it to the waiter's value v, unless a client other than the waiter's waits
// for it and streak is false; subscribed tells whether the waiter's client
// subscribes to the key's release channel.
func handoverOp(key string, v value, ttlMs, leaving any, subscribed, streak bool) nodeOp {
	mine := 0
	if subscribed {
		mine = 1
	}
	if streak {
		mine = -1 - mine
	}
	op := nodeOp{script: handoverScript, read: readHandover,
		keyBuf: [maxKeys]string{key}, nkeys: 1, argBuf: writeArgs(v, ttlMs, true), nargs: 6}
	op.argBuf[4], op.argBuf[5] = leaving, mine
	return op
}

// readHandover reads handover.lua's reply as the waiter's acquire: the key
// is the waiter's on a node whose reply is OK. val keeps the code, which
// tells the leaving holder where its value is gone (handedOver and
// releasedHandover).
func readHandover(cmd *redis.Cmd) reply {
	v, err := cmd.Int64()
	switch {
	case err != nil:
		return reply{err: err}
	case v == 1 || v == handedOver || v == handedInStreak:
		return reply{status: statusOK, val: v}
	case v == tookOver:
		return reply{status: statusOK, val: 1, chained: true}
	case v == releasedHandover:
		return reply{status: statusRefused, val: v, err: ErrHeldByOther}
	case v == 2:
		return reply{status: statusRefused, val: v, err: errLaterAttempt}
	case v <= 0:
		return reply{status: statusRefused, val: v, err: ErrHeldByOther}
	}
	return reply{err: errUnexpected(v)}
}

func errUnexpected(v any) error {
	return fmt.Errorf("unexpected script reply %v", v)
}

// value is what one call writes under the key: the Lock's prefix and a
// generation. Values and TTLs travel to the scripts boxed (as any); the
// Lock boxes its prefixes once, not once per call.
type value struct {
	prefixArg any // the Lock's prefix, boxed
	holderArg any // the holder's prefix, boxed: the same but for an owner's Lock
	gen       uint64
	s         string // prefix + gen
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
	case strings.Contains(key, fenceSuffix):
		return "a fencing counter's name"
	}
	return ""
}

// guarded turns an acquire op into its restart-guarded form: the marker as
// the last key, the guard in milliseconds as the last argument.
func (o nodeOp) guarded(guardMs any) nodeOp {
	if o.script == acquireFencedScript {
		o.script = acquireFencedGuardedScript
	} else {
		o.script = acquireGuardedScript
	}
	o.keyBuf[o.nkeys] = restartMarker
	o.nkeys++
	o.argBuf[o.nargs] = guardMs
	o.nargs++
	return o
}
