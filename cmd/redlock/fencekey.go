package main

import "strings"

// fenceKeyFor names the fence counter the library keeps beside a lock's key.
// It is a copy of the library's unexported rule (slot.go), kept in step by
// TestFenceKeyMatchesLibrary against a real fenced lock's counter.
func fenceKeyFor(key string) string {
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

// slotSuffix returns prefix plus the first four characters from [0-9a-z]
// that make it hash to key's Redis Cluster slot.
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
	return prefix
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
