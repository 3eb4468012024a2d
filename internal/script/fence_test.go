package script

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFenceReading(t *testing.T) {
	const sec = 1_795_000_000 // 2026
	assert.Equal(t, int64(sec*1_000_000+5), FenceReading(0, sec, 5), "no counter: the clock")
	assert.Equal(t, int64(sec*1_000_000+999_999), FenceReading(42, sec, 999_999), "a counter below the clock")
	assert.Equal(t, int64(5e15), FenceReading(5e15, sec, 5), "a counter above the clock: a clock that stepped back")
	assert.Equal(t, uint64(11), FenceAbove(3, 10, 7))
	assert.Equal(t, uint64(1), FenceAbove(0))
}

// simNodes models what the acquire and commit scripts do with injected
// readings: each node has a counter (lost when wiped) and a clock that is
// the true time plus its own offset, in microseconds.
type simNodes struct {
	now     int64 // true time, µs
	counter []int64
	offset  []int64
}

func newSimNodes(n int) *simNodes {
	return &simNodes{now: 1_795_000_000_000_000, counter: make([]int64, n), offset: make([]int64, n)}
}

// acquire is a holder's two rounds: the fence from the readings of the
// acquire quorum, committed on the commit quorum.
func (s *simNodes) acquire(quorum, commit []int) uint64 {
	readings := make([]int64, 0, len(quorum))
	for _, i := range quorum {
		clock := s.now + s.offset[i]
		readings = append(readings, FenceReading(s.counter[i], clock/1_000_000, clock%1_000_000))
	}
	f := FenceAbove(readings...)
	for _, i := range commit {
		s.counter[i] = max(s.counter[i], int64(f))
	}
	s.now += 50 // a round trip
	return f
}

// TestFenceArithmeticCases replays, with injected readings, the failures
// docs/fencing.md says fences survive, and the one it says they do not.
func TestFenceArithmeticCases(t *testing.T) {
	const ms = 1000 // µs
	t.Run("counter lost on a minority", func(t *testing.T) {
		s := newSimNodes(3)
		s.acquire([]int{0, 1, 2}, []int{0, 1, 2})
		a := s.acquire([]int{0, 1}, []int{0, 1})
		s.counter[0] = 0 // FLUSHALL
		s.now += 10 * ms
		b := s.acquire([]int{0, 2}, []int{0, 2})
		assert.Greater(t, b, a)
	})
	t.Run("a clock stepped back, counters kept", func(t *testing.T) {
		s := newSimNodes(3)
		a := s.acquire([]int{0, 1, 2}, []int{0, 1, 2})
		for i := range s.offset {
			s.offset[i] = -3600 * 1000 * ms // every clock an hour back
		}
		b := s.acquire([]int{0, 1}, []int{0, 1})
		assert.Equal(t, a+1, b, "the counters carry the fence")
	})
	t.Run("every counter lost after the horizon", func(t *testing.T) {
		s := newSimNodes(3)
		a := s.acquire([]int{0, 1, 2}, []int{0, 1, 2})
		s.now += 7 * 24 * 3600 * 1000 * ms
		clear(s.counter)
		b := s.acquire([]int{0, 1}, []int{0, 1})
		assert.Greater(t, b, a)
	})
	t.Run("counter lost and clocks stepped back by more than the time since: not survived", func(t *testing.T) {
		s := newSimNodes(3)
		s.acquire([]int{0, 1, 2}, []int{0, 1, 2})
		a := s.acquire([]int{0, 1}, []int{0, 1})
		s.counter[0] = 0
		s.offset[0], s.offset[2] = -20*ms, -20*ms // B's quorum's clocks step back 20 ms
		s.now += 10 * ms                          // and B comes 10 ms after A
		b := s.acquire([]int{0, 2}, []int{0, 2})
		assert.LessOrEqual(t, b, a, "the documented limit: the fence may go back")
	})
}

// TestFenceArithmeticRandom runs many holders over five nodes with random
// quorums, counters wiped on random minorities, and clocks that disagree by
// up to a millisecond; successive holders are at least 2 ms apart, more than
// twice the disagreement. Every fence must exceed the previous one.
func TestFenceArithmeticRandom(t *testing.T) {
	const (
		n        = 5
		quorum   = n/2 + 1
		skew     = 1000 // µs, each way
		minSpace = 2*skew + 1
	)
	rng := rand.New(rand.NewPCG(7, 11))
	s := newSimNodes(n)
	var last uint64
	wipes := 0
	for step := range 100_000 {
		for i := range s.offset {
			s.offset[i] = rng.Int64N(2*skew+1) - skew
		}
		if rng.IntN(10) == 0 {
			for _, i := range rng.Perm(n)[:1+rng.IntN(n-quorum)] {
				s.counter[i] = 0
				wipes++
			}
		}
		acq := rng.Perm(n)[:quorum+rng.IntN(n-quorum+1)]
		commit := append([]int(nil), acq[:quorum]...) // a quorum of the nodes that hold our key
		f := s.acquire(acq, commit)
		require.Greater(t, f, last, "step %d", step)
		last = f
		s.now += minSpace + rng.Int64N(5000)
	}
	t.Logf("100000 holders, %d counters wiped, last fence %d", wipes, last)
}

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
		if lk := LeadersKey(k); slot(lk) != slot(k) || lk == k || lk == CounterKey(k) {
			t.Errorf("LeadersKey(%q) = %q: slot %d, key's slot %d", k, lk, slot(lk), slot(k))
		}
		fk := CounterKey(k)
		if fk == k {
			t.Errorf("fenceKeyFor(%q) is the key itself", k)
		}
		if slot(fk) != slot(k) {
			t.Errorf("fenceKeyFor(%q) = %q: slot %d, key's slot %d", k, fk, slot(fk), slot(k))
		}
		if CounterKey(k) != fk {
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
		if fk := CounterKey(k); slot(fk) != slot(k) {
			t.Errorf("fenceKeyFor(%q) = %q: slot %d, key's slot %d", k, fk, slot(fk), slot(k))
		}
	})
}

// TestSlot: the slots CLUSTER KEYSLOT gives on a Redis 7.0 Cluster node,
// hash tags included.
func TestSlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"foo":                  12182,
		"bar":                  5061,
		"123456789":            12739,
		"{user1000}.following": 3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key
		"foo{{bar}}zap":        4015, // the tag is "{bar"
		"foo{bar}{zap}":        5061, // the first tag: "bar"
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
