package redlock

import (
	"strings"
	"testing"
)

// slot is Redis Cluster's key slot: the CRC16 of the key's hash tag, or of
// the whole key when it has none, modulo 16384. crc16 itself is checked
// against the standard check value in the test.
func slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return crc16(0, key) % 16384
}

// TestFenceKeySameSlot: the fencing scripts touch the lock key and its
// counter together, so on a Redis Cluster node both must hash to one slot.
// This cannot be seen from outside without a cluster.
func TestFenceKeySameSlot(t *testing.T) {
	if got := crc16(0, "123456789"); got != 0x31C3 {
		t.Fatalf("crc16 is not CRC-16/XMODEM: check value %#x", got)
	}
	if got := slot("{user1000}.following"); got != slot("{user1000}.followers") || got != crc16(0, "user1000")%16384 {
		t.Fatalf("hash tags: slot %d", got)
	}
	keys := []string{
		"orders:42", "{user:7}:lock", "a{b}c", "a{b", "{", "x{}", "{{a}}", "a{{b}c}",
		"ünïcödé", strings.Repeat("k", 1000), "{}", "{}{a}", "a}b", "}", "a}{b", "}{}{",
	}
	for _, k := range keys {
		fk := fenceKeyFor(k)
		if fk == k {
			t.Errorf("fenceKeyFor(%q) is the key itself", k)
		}
		if slot(fk) != slot(k) {
			t.Errorf("fenceKeyFor(%q) = %q: slot %d, key's slot %d", k, fk, slot(fk), slot(k))
		}
		if fenceKeyFor(k) != fk {
			t.Errorf("fenceKeyFor(%q) is not deterministic", k)
		}
	}
}

func FuzzFenceKeySameSlot(f *testing.F) {
	for _, k := range []string{"orders:42", "{u}x", "a}b", "x{}"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if k == "" {
			return
		}
		if fk := fenceKeyFor(k); slot(fk) != slot(k) {
			t.Errorf("fenceKeyFor(%q) = %q: slot %d, key's slot %d", k, fk, slot(fk), slot(k))
		}
	})
}
