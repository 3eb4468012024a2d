package history

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/internal/script"
)

// TestCheckLate feeds checkLate hand-made histories: a released Lock's
// write that landed after the Release and stayed is a leftover; a value
// seen before its delete came, one that expired soon enough, one written
// before the Release, and values of other kinds are not.
func TestCheckLate(t *testing.T) {
	released := func(ttls ...time.Duration) *Lock {
		l := &Lock{ID: 1, Client: "w1", Key: "k", Token: "TOK", TTLs: ttls,
			Acquires: []Span{{at(0), at(10)}}, Releases: []Span{{at(100), at(110)}}}
		return l
	}
	seen := func(v string, atMs int, ttl time.Duration) NodeKey {
		return NodeKey{Node: 2, Key: "k", Value: v, At: at(atMs), TTL: ttl}
	}
	s := 2 * time.Second
	tests := []struct {
		name  string
		lock  *Lock
		seen  NodeKey
		found bool
	}{
		// Written at 2000+800-2000 = 800, 690 ms after the Release; seen
		// 1.2 s after that.
		{"landed after the release and stayed", released(s), seen("TOK.1", 2000, 800*time.Millisecond), true},
		{"an extension's value landed late", released(s, s), seen("TOK.2", 2000, 800*time.Millisecond), true},
		{"the same, seen too soon after it landed", released(s), seen("TOK.1", 1500, 1300*time.Millisecond), false},
		{"written before the release, its delete still on its way", released(s), seen("TOK.1", 1500, 300*time.Millisecond), false},
		{"written within the margin of the release", released(s), seen("TOK.1", 1500, 640*time.Millisecond), false},
		{"a longer TTL asked once: written maybe earlier", released(s, 3*time.Second), seen("TOK.1", 2000, 800*time.Millisecond), false},
		{"a tombstone", released(s), seen("!abc:1", 2000, 800*time.Millisecond), false},
		{"another Lock's value", released(s), seen("OTHER.1", 2000, 800*time.Millisecond), false},
		{"carrying tombstone entries", released(s), seen("TOK.1,!abc:1", 2000, 800*time.Millisecond), true},
		{"never released", func() *Lock { l := released(s); l.Releases = nil; return l }(), seen("TOK.1", 2000, 800*time.Millisecond), false},
		{"an owner's Lock", func() *Lock { l := released(s); l.Owner = "o"; return l }(), seen("TOK~x.1", 2000, 800*time.Millisecond), false},
		// A TTL of 1.5 s, seen with 400 ms left at 1500: written at 400,
		// after the Release at 110 (a value lives no longer than the TTL
		// it was written with).
		{"a short TTL's value written after the release", released(1500 * time.Millisecond), seen("TOK.1", 1500, 400*time.Millisecond), true},
		{"a short TTL's value written after the release in any case", released(1500 * time.Millisecond), seen("TOK.1", 3000, 400*time.Millisecond), true},
	}
	// Node 2 cut off over [900, 1300) (killed, restarted), then in its
	// restart guard until 3000: the value stayed 800 ms of node time.
	cut := []NodeDown{{Node: 2, Interval: Interval{at(900), at(3000)}, Healed: at(1300)}}
	downTests := []struct {
		name  string
		down  []NodeDown
		found bool
	}{
		{"its node cut off for a while since", cut, false},
		{"another node cut off", []NodeDown{{Node: 1, Interval: cut[0].Interval, Healed: cut[0].Healed}}, true},
		{"its node in its restart guard only", []NodeDown{{Node: 2, Interval: Interval{at(500), at(3000)}, Healed: at(700)}}, true},
		{"its node cut off, no heal noted", []NodeDown{{Node: 2, Interval: Interval{at(900), at(1300)}}}, false},
		// The simulator's seed 831417: the Lock's process partitioned from
		// the node, its delete held back until the heal.
		{"its process alone cut from its node", []NodeDown{{Node: 2, Proc: "p1", Interval: Interval{at(900), at(1300)}}}, false},
		{"another process cut from its node", []NodeDown{{Node: 2, Proc: "p2", Interval: Interval{at(900), at(1300)}}}, true},
	}
	for _, tc := range downTests {
		t.Run(tc.name, func(t *testing.T) {
			// As in the first case: written at 800, seen at 2000.
			l := released(s)
			l.Proc = "p1"
			v := Check(&Record{Locks: []*Lock{l}, Seen: []NodeKey{seen("TOK.1", 2000, 800*time.Millisecond)}, Down: tc.down})
			assert.Equal(t, tc.found, v.Count("leftovers") == 1, "%v", v.Found)
		})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Check(&Record{Locks: []*Lock{tc.lock}, Seen: []NodeKey{tc.seen}})
			if tc.found {
				assert.Equal(t, 1, v.Count("leftovers"), "%v", v.Found)
			} else {
				assert.Empty(t, v.Found)
			}
		})
	}
}

func TestValueToken(t *testing.T) {
	for v, want := range map[string]string{
		"TOK.1": "TOK", "TOK.12|1700:OTHER.3": "TOK", "OWN~abc.2": "OWN", "TOK.3,!ab:1": "TOK",
		"!ab:1": "", "^1700=TOK.1": "", "#2,1700=0/TOK.1": "", "": "", "nodot": "",
	} {
		assert.Equal(t, want, valueToken(v), v)
	}
}

// TestLinkCutIsNoNodeDown: a process cut from a node (NodeDown.Proc) leaves
// the node up for the quorum: two of three nodes cut from one process each
// are no quorum down; the same nodes down for everyone are.
func TestLinkCutIsNoNodeDown(t *testing.T) {
	iv := Interval{at(0), at(1000)}
	links := &Record{Nodes: 3, Down: []NodeDown{{Node: 0, Proc: "p1", Interval: iv}, {Node: 1, Proc: "p1", Interval: iv}}}
	assert.Empty(t, links.quorumDown())
	nodes := &Record{Nodes: 3, Down: []NodeDown{{Node: 0, Interval: iv}, {Node: 1, Interval: iv}}}
	assert.NotEmpty(t, nodes.quorumDown())
}

// TestCheckMetadata feeds checkMetadata hand-made histories: a node's value
// of a Lock must carry that Lock's metadata; one with other metadata, or
// none where the Lock stored some, is a finding.
func TestCheckMetadata(t *testing.T) {
	p := script.NewPrefixes("", false, "w1@p0")
	other := script.NewPrefixes("", false, "w2@p1")
	bare := script.NewPrefixes("", false, "")
	lock := func(token, md string) *Lock {
		return &Lock{ID: 1, Client: "w1", Key: "k", Token: token, Metadata: md, Acquires: []Span{{at(0), at(10)}}}
	}
	v := func(pr script.Prefixes, gen uint64) string { return pr.At(gen).S }
	swapped := p.Token + strings.TrimPrefix(v(other, 2), other.Token) // p's token, other's metadata
	tests := []struct {
		name  string
		lock  *Lock
		value string
		found bool
	}{
		{"its own metadata", lock(p.Token, "w1@p0"), v(p, 1), false},
		{"carrying tombstone entries", lock(p.Token, "w1@p0"), v(p, 3) + ",1700000000000!0123456789abcdef:3", false},
		{"no metadata stored, none carried", lock(bare.Token, ""), v(bare, 1), false},
		{"another Lock's value", lock(p.Token, "w1@p0"), v(other, 1), false},
		{"a tombstone", lock(p.Token, "w1@p0"), "!0123456789abcdef:3", false},
		{"another Lock's metadata under its token", lock(p.Token, "w1@p0"), swapped, true},
		{"metadata lost", lock(p.Token, "w1@p0"), p.Token + ".1", true},
		{"metadata where it stored none", lock(p.Token, ""), v(p, 1), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var verdict Verdict
			checkMetadata(&verdict, &Record{Locks: []*Lock{tc.lock}, Seen: []NodeKey{{Node: 0, Key: "k", Value: tc.value, At: at(50)}}})
			assert.Equal(t, tc.found, verdict.Count("metadata") > 0, "%s: %v", tc.value, verdict.Found)
		})
	}
}

// TestCheckTerms: hand-made histories of one key's leaderships. A term no
// higher than an earlier leader's is found; one of a campaign that ran
// beside the earlier one's is not judged.
func TestCheckTerms(t *testing.T) {
	lead := func(id int, from, to int, term uint64) *Lock {
		return &Lock{ID: id, Client: "w", Key: "k", Election: true, Fenced: true, Fence: term, Acquires: []Span{{at(from), at(to)}}}
	}
	tests := []struct {
		name  string
		locks []*Lock
		found int
	}{
		{"increasing", []*Lock{lead(1, 0, 10, 5), lead(2, 20, 30, 7), lead(3, 40, 50, 9)}, 0},
		{"a lower term after", []*Lock{lead(1, 0, 10, 5), lead(2, 20, 30, 4)}, 1},
		{"an equal term after", []*Lock{lead(1, 0, 10, 5), lead(2, 20, 30, 5)}, 1},
		{"lower than an earlier one's, not the last's", []*Lock{lead(1, 0, 10, 9), lead(2, 20, 30, 12), lead(3, 40, 50, 10)}, 1},
		{"campaigns at once", []*Lock{lead(1, 0, 30, 5), lead(2, 20, 40, 4)}, 0},
		{"no term", []*Lock{lead(1, 0, 10, 0)}, 1},
		{"other keys apart", []*Lock{lead(1, 0, 10, 5), {ID: 2, Client: "w", Key: "j", Election: true, Fence: 3, Acquires: []Span{{at(20), at(30)}}}}, 0},
		{"not leaderships", []*Lock{{ID: 1, Key: "k", Fence: 5, Acquires: []Span{{at(0), at(10)}}}, {ID: 2, Key: "k", Fence: 4, Acquires: []Span{{at(20), at(30)}}}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var verdict Verdict
			checkTerms(&verdict, &Record{Locks: tc.locks})
			assert.Equal(t, tc.found, verdict.Count("terms"), "%v", verdict.Found)
		})
	}
}

// TestCheckObserved: hand-made observations of one leadership, elected in
// [10, 20] ms, valid until 100 ms. A report of another term, another value,
// before the campaign, or after the end is found; one of no leader is not
// judged.
func TestCheckObserved(t *testing.T) {
	lead := &Lock{ID: 1, Client: "w", Key: "k", Election: true, Fenced: true, Fence: 7, Metadata: "host-a",
		Acquires: []Span{{at(10), at(20)}}, Proofs: []Proof{{at(20), at(100)}}}
	tests := []struct {
		name  string
		obs   Observation
		found int
	}{
		{"while it led", Observation{Key: "k", Span: Span{at(30), at(40)}, Term: 7, Value: "host-a"}, 0},
		{"beside its campaign", Observation{Key: "k", Span: Span{at(5), at(15)}, Term: 7, Value: "host-a"}, 0},
		{"just after its validity", Observation{Key: "k", Span: Span{at(110), at(120)}, Term: 7, Value: "host-a"}, 0},
		{"a term nobody had", Observation{Key: "k", Span: Span{at(30), at(40)}, Term: 8, Value: "host-a"}, 1},
		{"another value", Observation{Key: "k", Span: Span{at(30), at(40)}, Term: 7, Value: "host-b"}, 1},
		{"before its campaign", Observation{Key: "k", Span: Span{at(1), at(5)}, Term: 7, Value: "host-a"}, 1},
		{"long after its end", Observation{Key: "k", Span: Span{at(300), at(310)}, Term: 7, Value: "host-a"}, 1},
		{"another key's term", Observation{Key: "j", Span: Span{at(30), at(40)}, Term: 7, Value: "host-a"}, 1},
		{"no leader", Observation{Key: "k", Span: Span{at(300), at(310)}, None: true}, 0},
		{"a killed campaign's, within its TTL", Observation{Key: "k", Span: Span{at(60), at(70)}, Term: 9, Value: "host-c"}, 0},
		{"a killed campaign's, past its TTL", Observation{Key: "k", Span: Span{at(400), at(410)}, Term: 9, Value: "host-c"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var verdict Verdict
			checkObserved(&verdict, &Record{Locks: []*Lock{lead}, Observations: []Observation{tc.obs},
				Waits: []Wait{{Proc: "p1", Keys: []string{"k"}, TTL: 100 * time.Millisecond, Span: Span{Start: at(40)}}}, Kills: []Kill{{Proc: "p1", At: at(50)}}})
			assert.Equal(t, tc.found, verdict.Count("observers"), "%v", verdict.Found)
		})
	}
}

// TestCheckObservedAfterLoss: a leadership of TTL 80 ms whose last claim
// ended at 100 ms. Its values stand on a quorum past the claim only by an
// unconfirmed renewal: up to its TTL past the claim when no Release
// returned nil (a Release that failed, as of a closed Client, or none, as
// of a killed process), and not past a Release that did.
func TestCheckObservedAfterLoss(t *testing.T) {
	lead := func(released bool, releases ...Span) *Lock {
		return &Lock{ID: 1, Client: "w", Key: "k", Election: true, Fenced: true, Fence: 7, Metadata: "host-a", TTLs: []time.Duration{80 * time.Millisecond},
			Acquires: []Span{{at(10), at(20)}}, Proofs: []Proof{{at(20), at(100)}}, Releases: releases, Released: released}
	}
	obs := func(from int) Observation {
		return Observation{Key: "k", Span: Span{at(from), at(from + 10)}, Term: 7, Value: "host-a"}
	}
	tests := []struct {
		name  string
		lead  *Lock
		obs   Observation
		found int
	}{
		{"a Release that failed, within the TTL", lead(false, Span{at(90), at(95)}), obs(170), 0},
		{"a Release that failed, past the TTL", lead(false, Span{at(90), at(95)}), obs(260), 1},
		{"no Release, within the TTL", lead(false), obs(170), 0},
		{"no Release, past the TTL", lead(false), obs(260), 1},
		{"after a Release that returned nil", lead(true, Span{at(90), at(95)}), obs(170), 1},
		{"during a Release that returned nil", lead(true, Span{at(90), at(200)}), obs(170), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var verdict Verdict
			checkObserved(&verdict, &Record{Locks: []*Lock{tc.lead}, Observations: []Observation{tc.obs}})
			assert.Equal(t, tc.found, verdict.Count("observers"), "%v", verdict.Found)
		})
	}
}
