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

// The node operations below turn one script's reply into a reply status.
// Anything unexpected, including a Redis error reply, is statusUnknown: we
// cannot tell what the node did.

func acquireOp(key, token string, ttlMs int64) nodeOp {
	keys, args := []string{key}, []any{token, ttlMs}
	return func(ctx context.Context, n *node) reply {
		v, err := acquireScript.Run(ctx, n.client, keys, args...).Int64()
		switch {
		case err != nil:
			return reply{err: err}
		case v == 1:
			return reply{status: statusOK}
		default:
			return reply{status: statusRefused, err: ErrHeldByOther}
		}
	}
}

func acquireFencedOp(key, token string, ttlMs int64) nodeOp {
	keys, args := []string{key, fenceKey(key)}, []any{token, ttlMs}
	return func(ctx context.Context, n *node) reply {
		v, err := acquireFencedScript.Run(ctx, n.client, keys, args...).Int64Slice()
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
}

func fenceCommitOp(key, token string, fence uint64) nodeOp {
	keys, args := []string{key, fenceKey(key)}, []any{token, strconv.FormatUint(fence, 10)}
	return func(ctx context.Context, n *node) reply {
		v, err := fenceCommitScript.Run(ctx, n.client, keys, args...).Int64()
		switch {
		case err != nil:
			return reply{err: err}
		case v == 1:
			return reply{status: statusOK}
		default:
			return reply{status: statusRefused, err: ErrNotHeld}
		}
	}
}

func extendOp(key, token string, ttlMs int64) nodeOp {
	keys, args := []string{key}, []any{token, ttlMs}
	return func(ctx context.Context, n *node) reply {
		v, err := extendScript.Run(ctx, n.client, keys, args...).Int64()
		switch {
		case err != nil:
			return reply{err: err}
		case v == 1 || v == 2:
			return reply{status: statusOK}
		default:
			return reply{status: statusRefused, err: ErrHeldByOther}
		}
	}
}

func releaseOp(key, token string) nodeOp {
	keys, args := []string{key}, []any{token}
	return func(ctx context.Context, n *node) reply {
		v, err := releaseScript.Run(ctx, n.client, keys, args...).Int64()
		switch {
		case err != nil:
			return reply{err: err}
		case v == 1:
			return reply{status: statusOK}
		case v == 0:
			return reply{status: statusRefused, err: ErrKeyAbsent}
		default:
			return reply{status: statusRefused, err: ErrHeldByOther}
		}
	}
}

func errUnexpected(v any) error {
	return fmt.Errorf("redlock: unexpected script reply %v", v)
}
