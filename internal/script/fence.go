package script

import "strings"

// FenceReading is one node's contribution to a fence: the larger of its
// counter and its clock (seconds and microseconds, as TIME gives them).
func FenceReading(counter, sec, usec int64) int64 {
	return max(counter, sec*1_000_000+usec)
}

// FenceAbove returns the fence for a quorum whose readings are given: one
// more than the highest.
func FenceAbove(readings ...int64) uint64 {
	var highest int64
	for _, r := range readings {
		highest = max(highest, r)
	}
	return uint64(highest) + 1
}

// CounterKey names the counter kept beside key. It must hash to the same
// Redis Cluster slot as key, because both are touched by one script. Appending
// to a key that has a hash tag keeps the tag; a key without one becomes the
// tag. A key with a '}' but no valid tag is hashed whole and cannot be a tag:
// its counter gets a short suffix chosen to land in the same slot. A Lock
// computes it once.
func CounterKey(key string) string { return beside(key, FenceSuffix) }

// FenceSuffix is in every fencing counter's name, and in no lock's key
// (reservedKey).
const FenceSuffix = ":redlock:fence"

// LeadersKey names an election key's record of elected terms (settle.lua),
// in key's slot as CounterKey's counter is.
func LeadersKey(key string) string { return beside(key, LeadersSuffix) }

// LeadersSuffix is in every record of elected terms' name, and in no lock's
// key (reservedKey).
const LeadersSuffix = ":redlock:leaders"

// beside names a key in key's Redis Cluster slot with suffix, for a script
// that touches both: appending to a key that has a hash tag keeps the tag,
// a key without one becomes the tag, and a key with a '}' but no valid tag,
// which is hashed whole, gets a short suffix more chosen to land in its
// slot.
func beside(key, suffix string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key + suffix
		}
	}
	if strings.IndexByte(key, '}') < 0 {
		return "{" + key + "}" + suffix
	}
	return slotSuffix(key, key+suffix+":")
}

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

// Slot is key's Redis Cluster hash slot: of its hash tag, the part between
// the first '{' and the first '}' after it when that part is not empty, or
// of the whole key.
func Slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return crc16(0, key) % 16384
}
