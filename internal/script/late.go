package script

import (
	"crypto/sha1"
	"encoding/hex"
)

// LateSuffix is in every refusals key's name, and in no lock's key
// (reservedKey).
const LateSuffix = ":redlock:late:"

// RefusalsKey names a Lock's refusals key beside key (scripts/late.lua):
// what a delete of the Lock leaves, until the latest deadline of its
// writes sent to the node, to refuse a copy of one that lands after it.
// Each Lock has its own, named after a hash of its prefix (16 hex digits
// of its SHA-1): no other Lock reads or writes it. It starts with key, so
// that an ACL pattern that covers key covers it; on a Redis Cluster, where
// a script's keys must share a slot, it is named as a fencing counter is
// (CounterKey) when key has no hash tag of its own.
func RefusalsKey(key string, p *Prefixes, cluster bool) string {
	return RefusalsKeyOf(key, p.own, cluster)
}

// RefusalsKeyOf is RefusalsKey for the Lock whose own prefix is prefix.
func RefusalsKeyOf(key, prefix string, cluster bool) string {
	sum := sha1.Sum([]byte(prefix))
	suffix := LateSuffix + hex.EncodeToString(sum[:8])
	if cluster {
		return beside(key, suffix)
	}
	return key + suffix
}
