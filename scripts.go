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
// A key with '}' but no valid tag cannot be expressed either way; on a Redis
// Cluster node its scripts fail with CROSSSLOT (an error, never a silent
// mistake), and on every other node it works.
func fenceKey(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key + ":redlock:fence"
		}
	}
	if strings.IndexByte(key, '}') < 0 {
		return "{" + key + "}:redlock:fence"
	}
	return key + ":redlock:fence"
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
