package redlock

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run atomically on each node. redis.Script.Run sends EVALSHA and
// falls back to EVAL when the node does not know the script yet (NOSCRIPT, as
// after a restart). User input only ever travels as KEYS and ARGV.
var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/acquire_fenced.lua
	acquireFencedSrc string
	//go:embed scripts/fence_commit.lua
	fenceCommitSrc string
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/release.lua
	releaseSrc string

	acquireScript       = redis.NewScript(acquireSrc)
	acquireFencedScript = redis.NewScript(acquireFencedSrc)
	fenceCommitScript   = redis.NewScript(fenceCommitSrc)
	extendScript        = redis.NewScript(extendSrc)
	releaseScript       = redis.NewScript(releaseSrc)
)

// fenceKey names the counter kept beside key. It must hash to the same Redis
// Cluster slot as key, because both are touched by one script. Appending to a
// key that has a hash tag keeps the tag; a key without one becomes the tag.
// A key with a '}' but no valid tag is hashed whole and cannot be a tag: its
// counter gets a short suffix chosen to land in the same slot.
func fenceKey(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key + ":redlock:fence"
		}
	}
	if strings.IndexByte(key, '}') < 0 {
		return "{" + key + "}:redlock:fence"
	}
	return slotSuffix(key, key+":redlock:fence:")
}

// slotSuffix returns prefix plus four characters from [0-9a-z] such that the
// whole hashes to key's slot, key having no valid hash tag (nor can the
// suffix make one: it has no braces). 36^4 candidates cover the 16384 slots
// many times over; the search is deterministic, so every client names the
// same counter.
func slotSuffix(key, prefix string) string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	want := crc16(0, key) % 16384
	base := crc16(0, prefix)
	var b [4]byte
	for i := range len(alphabet) * len(alphabet) * len(alphabet) * len(alphabet) {
		for j, n := 0, i; j < len(b); j, n = j+1, n/len(alphabet) {
			b[j] = alphabet[n%len(alphabet)]
		}
		if crc16(base, string(b[:]))%16384 == want {
			return prefix + string(b[:])
		}
	}
	return prefix // not reached in practice; a cluster node would answer CROSSSLOT
}

// crc16 continues the CRC-16/XMODEM of Redis Cluster's key slots from crc.
func crc16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// nodeOp is one script with its keys and arguments, run on each node of a
// round. It is built once per round and kept by value inside the round, its
// keys and arguments in its own arrays, so that a round costs no allocation
// per node. read turns a node's reply into a status; anything unexpected,
// including a Redis error reply, is statusUnknown: we cannot tell what the
// node did.
type nodeOp struct {
	script *redis.Script
	read   func(*redis.Cmd) reply
	keyBuf [2]string
	argBuf [2]any
	nkeys  int
	nargs  int
}

func (o *nodeOp) run(ctx context.Context, n *node) reply {
	return o.read(o.script.Run(ctx, n.client, o.keyBuf[:o.nkeys], o.argBuf[:o.nargs]...))
}

// token and ttl arrive boxed (as any): the Lock boxes its token once, not
// once per node call.

func acquireOp(key string, token, ttlMs any) nodeOp {
	return nodeOp{script: acquireScript, read: readAcquire,
		keyBuf: [2]string{key}, nkeys: 1, argBuf: [2]any{token, ttlMs}, nargs: 2}
}

func readAcquire(cmd *redis.Cmd) reply {
	return readCode(cmd, func(v int64) reply {
		if v == 1 {
			return reply{status: statusOK}
		}
		return reply{status: statusRefused, err: ErrHeldByOther}
	})
}

// readCode reads a script's integer reply; an error is an unknown outcome.
func readCode(cmd *redis.Cmd, classify func(int64) reply) reply {
	v, err := cmd.Int64()
	if err != nil {
		return reply{err: err}
	}
	return classify(v)
}

func acquireFencedOp(key string, token, ttlMs any) nodeOp {
	return nodeOp{script: acquireFencedScript, read: readAcquireFenced,
		keyBuf: [2]string{key, fenceKey(key)}, nkeys: 2, argBuf: [2]any{token, ttlMs}, nargs: 2}
}

func readAcquireFenced(cmd *redis.Cmd) reply {
	v, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return reply{err: err}
	case len(v) != 2 || v[1] < 0:
		return reply{err: errUnexpected(v)}
	case v[0] == 1:
		return reply{status: statusOK, val: v[1]}
	default:
		return reply{status: statusRefused, val: v[1], err: ErrHeldByOther}
	}
}

func fenceCommitOp(key string, token any, fence uint64) nodeOp {
	return nodeOp{script: fenceCommitScript, read: readFenceCommit,
		keyBuf: [2]string{key, fenceKey(key)}, nkeys: 2, argBuf: [2]any{token, strconv.FormatUint(fence, 10)}, nargs: 2}
}

func readFenceCommit(cmd *redis.Cmd) reply {
	return readCode(cmd, func(v int64) reply {
		if v == 1 {
			return reply{status: statusOK}
		}
		return reply{status: statusRefused, err: ErrNotHeld}
	})
}

func extendOp(key string, token, ttlMs any) nodeOp {
	return nodeOp{script: extendScript, read: readExtend,
		keyBuf: [2]string{key}, nkeys: 1, argBuf: [2]any{token, ttlMs}, nargs: 2}
}

func readExtend(cmd *redis.Cmd) reply {
	return readCode(cmd, func(v int64) reply {
		if v == 1 || v == 2 { // extended, or re-seeded where the key was lost
			return reply{status: statusOK}
		}
		return reply{status: statusRefused, err: ErrHeldByOther}
	})
}

func releaseOp(key string, token any) nodeOp {
	return nodeOp{script: releaseScript, read: readRelease,
		keyBuf: [2]string{key}, nkeys: 1, argBuf: [2]any{token}, nargs: 1}
}

func readRelease(cmd *redis.Cmd) reply {
	return readCode(cmd, func(v int64) reply {
		switch v {
		case 1:
			return reply{status: statusOK}
		case 0:
			return reply{status: statusRefused, err: ErrKeyAbsent}
		default:
			return reply{status: statusRefused, err: ErrHeldByOther}
		}
	})
}

func errUnexpected(v any) error {
	return fmt.Errorf("redlock: unexpected script reply %v", v)
}
