package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// drift is redlock's default allowance: 1 % of the TTL and 2 ms.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// TestCheckClaims: hand-made claims of one Lock, of a 1 s TTL from a round
// begun at 10 ms, so valid until 998 ms at most (1 s less 12 ms, from 10).
// A validity without the drift allowance, or counted from the round's end
// (its replies at 11 ms), is found; the exact bound and an earlier Until
// are not; without Record.Drift nothing is judged.
func TestCheckClaims(t *testing.T) {
	ttl := time.Second
	claim := func(until time.Time) Claim { return Claim{Start: at(10), TTL: ttl, Until: until} }
	tests := []struct {
		name   string
		claims []Claim
		noRule bool
		found  int
	}{
		{"the bound", []Claim{claim(at(998))}, false, 0},
		{"before it", []Claim{claim(at(500))}, false, 0},
		{"no drift allowance", []Claim{claim(at(1010))}, false, 1},
		{"from the round's end", []Claim{claim(at(11).Add(ttl - drift(ttl)))}, false, 1},
		{"a nanosecond past", []Claim{claim(at(998).Add(time.Nanosecond))}, false, 1},
		{"each claim judged", []Claim{claim(at(998)), {Start: at(2000), TTL: ttl, Until: at(3000)}}, false, 1},
		{"one finding a Lock", []Claim{claim(at(1010)), {Start: at(2000), TTL: ttl, Until: at(3000)}}, false, 1},
		{"not judged without the allowance", []Claim{claim(at(1010))}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &Lock{ID: 1, Client: "w", Key: "k", Acquires: []Span{{at(0), at(11)}}, Proofs: []Proof{{at(11), tc.claims[0].Until}},
				Releases: []Span{{at(20), at(21)}}, Claims: tc.claims}
			r := &Record{Locks: []*Lock{l}, Drift: drift}
			if tc.noRule {
				r.Drift = nil
			}
			v := Check(r)
			assert.Equal(t, tc.found, v.Count("validity"), "%v", v.Found)
			assert.Equal(t, tc.found, len(v.Found), "only validity findings: %v", v.Found)
		})
	}
}

// TestCheckSameFence: two holders of one key with one fence are found
// whatever the order of their acquires, as "fencing" for Locks and "terms"
// for leaderships, each Lock once (against the first with the fence); different keys, fences, shared Locks and
// permits (no fence) and one Lock's re-entries are not.
func TestCheckSameFence(t *testing.T) {
	lock := func(id, from, to int, fence uint64) *Lock {
		return &Lock{ID: id, Client: "w", Key: "k", Fenced: true, Fence: fence, Acquires: []Span{{at(from), at(to)}},
			Proofs: []Proof{{at(to), at(to + 5)}}, Releases: []Span{{at(to + 5), at(to + 6)}}}
	}
	lead := func(l *Lock) *Lock { l.Election = true; return l }
	multi := func(l *Lock, keys ...string) *Lock { l.Keys = keys; return l }
	tests := []struct {
		name  string
		locks []*Lock
		kind  string
		found int
	}{
		{"one after the other", []*Lock{lock(1, 0, 10, 5), lock(2, 20, 30, 5)}, "fencing", 1},
		// The second Acquire began before the first returned and
		// returned after its Release: no successive holder, the same
		// fence all the same.
		{"calls at once", []*Lock{lock(1, 0, 10, 5), lock(2, 5, 30, 5)}, "fencing", 1},
		{"calls at once, fences apart", []*Lock{lock(1, 0, 10, 5), lock(2, 5, 30, 6)}, "fencing", 0},
		{"three with one fence: each later one once", []*Lock{lock(1, 0, 10, 5), lock(2, 5, 30, 5), lock(3, 6, 50, 5)}, "fencing", 2},
		{"other keys", []*Lock{lock(1, 0, 10, 5), func() *Lock { l := lock(2, 5, 30, 5); l.Key = "j"; return l }()}, "fencing", 0},
		{"a multi-key Lock's other key", []*Lock{multi(lock(1, 0, 10, 5), "j", "k"), func() *Lock { l := lock(2, 5, 30, 5); l.Key = "j"; return l }()}, "fencing", 1},
		{"leaderships", []*Lock{lead(lock(1, 0, 10, 5)), lead(lock(2, 5, 30, 5))}, "terms", 1},
		{"one Lock re-entered", []*Lock{lock(1, 0, 10, 5), lock(1, 5, 30, 5)}, "fencing", 0},
		{"shared Locks (no fence)", []*Lock{{ID: 1, Key: "k", Shared: true, Acquires: []Span{{at(0), at(10)}}}, {ID: 2, Key: "k", Shared: true, Acquires: []Span{{at(5), at(30)}}}}, "fencing", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v Verdict
			checkSameFence(&v, &Record{Locks: tc.locks})
			assert.Equal(t, tc.found, v.Count(tc.kind), "%v", v.Found)
			assert.Equal(t, tc.found, len(v.Found), "%v", v.Found)
		})
	}
	// Through Check: the calls-at-once pair is found by this rule alone
	// (the successive-holder rule does not judge it, and the holds do not
	// overlap).
	v := Check(&Record{Locks: []*Lock{lock(1, 0, 10, 5), lock(2, 5, 30, 5)}})
	assert.Equal(t, 1, v.Count("fencing"), "%v", v.Found)
	assert.Equal(t, 1, len(v.Found), "%v", v.Found)
}
