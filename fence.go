package redlock

import (
	"context"
	"strings"
	"time"
)

// A fence is a hybrid of a per-key counter and the nodes' clocks, both read
// by the acquire script in one atomic step with taking the key. Each node
// contributes its reading, the larger of its counter and its clock in
// microseconds since the Unix epoch, and the fence is one more than the
// highest reading of the quorum that confirmed. The counter alone makes
// fences increase while counters survive (docs/fencing.md has the
// argument); the clock part is what a node whose counter was lost (a
// restart without persistence, FLUSHALL, eviction, a failover to a replica
// that lacked it, or the counter's own expiry after the horizon) still
// contributes: a value above every fence issued before the loss, as long as
// the clocks of the nodes agree to within the time since. The clock only
// ever raises a fence.
//
// Fences are near 1.8e15 today (microseconds since 1970) and grow by about
// 3.2e13 a year: far inside a signed 64-bit column, and below 2^53, so the
// scripts compare them exactly as Lua numbers until the year 2255.

// fenceReading is one node's contribution to a fence: the larger of its
// counter and its clock (seconds and microseconds, as TIME gives them).
func fenceReading(counter, sec, usec int64) int64 {
	return max(counter, sec*1_000_000+usec)
}

// fenceAbove returns the fence for a quorum whose readings are given: one
// more than the highest.
func fenceAbove(readings ...int64) uint64 {
	var highest int64
	for _, r := range readings {
		highest = max(highest, r)
	}
	return uint64(highest) + 1
}

// commitFence is the second round of a fenced acquire. The fence is above
// every reading (counter or clock) of the nodes that confirmed the acquire,
// and it is recorded on a quorum of nodes that still hold our key before
// anyone may use it; docs/fencing.md argues why that makes fences strictly
// increase across holders. The nodes whose commit was not confirmed in time
// (and whose acquire was not refused: our key may be there) get it again in
// the background, so that lagging counters catch up.
func (c *Client) commitFence(ctx context.Context, l *Lock, v value, acq *tally, timeout, ttl time.Duration) (uint64, *tally, error) {
	var highest int64
	for _, r := range acq.replies {
		if r.status == statusOK {
			highest = max(highest, r.val)
		}
	}
	fence := fenceAbove(highest)
	op := fenceCommitOp(l.key, l.fenceKey, v, fence, c.cfg.horizonArg)
	t, err := c.nodes.sendAndCount(ctx, l.seq, writeRound(op, timeout, ttl))
	if err == nil && t.reached() && t.ok < len(t.replies) {
		late := t.where(func(r reply) bool {
			return r.status == statusUnknown && acq.replies[r.node].status != statusRefused
		})
		c.nodes.launch(context.Background(), l.seq, roundSpec{kind: opWrite, op: op,
			wait: c.cfg.cleanupTimeout, ttl: ttl, only: late})
	}
	return fence, t, err
}

// FenceKey returns the name of the fencing counter WithFencing keeps beside
// key on every node: for an ACL's key patterns, or to inspect a node (the
// redlock command's status does). It expires a fence horizon after the key's
// last use.
func FenceKey(key string) string { return fenceKeyFor(key) }

// fenceKeyFor names the counter kept beside key. It must hash to the same
// Redis Cluster slot as key, because both are touched by one script. Appending
// to a key that has a hash tag keeps the tag; a key without one becomes the
// tag. A key with a '}' but no valid tag is hashed whole and cannot be a tag:
// its counter gets a short suffix chosen to land in the same slot. A Lock
// computes it once.
func fenceKeyFor(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key + fenceSuffix
		}
	}
	if strings.IndexByte(key, '}') < 0 {
		return "{" + key + "}" + fenceSuffix
	}
	return slotSuffix(key, key+fenceSuffix+":")
}

// fenceSuffix is in every fencing counter's name, and in no lock's key
// (reservedKey).
const fenceSuffix = ":redlock:fence"

// slotSuffix returns prefix plus four characters from [0-9a-z] such that the
// whole hashes to key's slot, key having no valid hash tag (nor can the
// suffix make one: it has no braces). The CRC of prefix is computed once and
// continued per candidate; 36^4 candidates cover the 16384 slots many times
// over, and the search is deterministic, so every client names the same
// counter.
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
