package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestResidue feeds the residue rule hand-made sightings: each bad one is a
// value that outlived its writers past the bound, which the rule must
// report as leftovers; each clean one must pass.
func TestResidue(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const bound = 1000 * time.Millisecond
	seen := func(v string, atMs, quietMs int) Sighting {
		return Sighting{Node: 2, Key: "k", Value: v, TTL: 19 * time.Second, At: at(atMs), Quiet: at(quietMs)}
	}
	ended := func(id int, token string, ms int) Writer { return Writer{ID: id, Token: token, Ended: at(ms)} }
	live := func(id int, token string) Writer { return Writer{ID: id, Token: token} }
	owned := func(w Writer) Writer { w.Owner = true; return w }
	none := time.Time{}

	tests := []struct {
		name      string
		s         Sighting
		writers   []Writer
		acquiring time.Time
		bad       bool
	}{
		{"released Lock's value, quiet node", seen("TOKA.1", 5000, 0), []Writer{ended(1, "TOKA", 2000)}, none, true},
		{"released Lock's value within the bound", seen("TOKA.1", 2900, 0), []Writer{ended(1, "TOKA", 2000)}, none, false},
		{"released Lock's value, node quiet too recently", seen("TOKA.1", 5000, 4500), []Writer{ended(1, "TOKA", 2000)}, none, false},
		{"released Lock's value, quiet long enough since", seen("TOKA.1", 5600, 4500), []Writer{ended(1, "TOKA", 2000)}, none, true},
		// The simulator's hold-quick: a copy of the acquire landed 30 ms
		// after the Release returned (too soon for the late-write rule),
		// the link quiet from 200 ms after it; the value holds metadata.
		{"released Lock's copy landed after its delete", seen("TOKAmOF2WSY3LEBZGK3DFMFZWK.1", 3300, 2230), []Writer{ended(1, "TOKA", 2000)}, none, true},
		{"released Lock's copy landed after its delete, within the bound", seen("TOKAmOF2WSY3LEBZGK3DFMFZWK.1", 3200, 2230), []Writer{ended(1, "TOKA", 2000)}, none, false},
		{"live Lock's value", seen("TOKA.1", 5000, 0), []Writer{live(1, "TOKA")}, none, false},
		{"an owner's token, one of its Locks live", seen("oOWN~2.1", 9000, 0), []Writer{ended(1, "oOWN", 100), live(2, "oOWN")}, none, false},
		{"an owner's token, all its Locks ended", seen("oOWN~2.1", 9000, 0), []Writer{ended(1, "oOWN", 100), ended(2, "oOWN", 3000)}, none, true},
		{"an owner's token, an acquire just ended", seen("oOWN~3.1", 9000, 0), []Writer{owned(ended(1, "oOWN", 100))}, at(8500), false},
		{"an owner's token, no acquire since", seen("oOWN~3.1", 9000, 0), []Writer{owned(ended(1, "oOWN", 100))}, at(5000), true},
		{"a plain token, an acquire just ended", seen("TOKA.1", 9000, 0), []Writer{ended(1, "TOKA", 100)}, at(8500), true},
		{"tombstone", seen("!0123456789abcdef:3", 9000, 0), []Writer{ended(1, "TOKA", 100)}, none, false},
		{"shared value of two, one live", seen("^99=TOKA.1,99=TOKB.1", 9000, 0), []Writer{ended(1, "TOKA", 100), live(2, "TOKB")}, none, false},
		{"shared value of two, both ended", seen("^99=TOKA.1,99=TOKB.1", 9000, 0), []Writer{ended(1, "TOKA", 100), ended(2, "TOKB", 200)}, none, true},
		{"a failed attempt's value, no acquire since", seen("TOKX.1", 9000, 0), []Writer{ended(1, "TOKA", 100)}, at(3000), true},
		{"a failed attempt's value, an acquire just ended", seen("TOKX.1", 9000, 0), nil, at(8500), false},
		{"a value while an acquire is under way", seen("TOKX.1", 9000, 0), nil, at(9000), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, bad := Residue(tt.s, tt.writers, tt.acquiring, bound)
			assert.Equal(t, tt.bad, bad, "%s", v.Detail)
			if bad {
				assert.Equal(t, "leftovers", v.Kind)
				assert.Equal(t, "k", v.Key)
				assert.Contains(t, v.Detail, tt.s.Value)
			}
		})
	}
	assert.False(t, IsHolder("!a:1"))
	assert.True(t, IsHolder("TOKA.1"))
}

// TestLiveValue: a shared or permits value holds only its entries whose
// deadline has not passed on its node's clock.
func TestLiveValue(t *testing.T) {
	now := time.UnixMilli(1000)
	for v, want := range map[string]string{
		"TOK.1":                             "TOK.1",
		"!ab:1":                             "!ab:1",
		"^999=R.1,2000=S.1":                 "^2000=S.1",
		"^999=R.1,2000=!ab:1":               "",
		"#3,999=0/A.1,2000=!ab:2":           "",
		"#3,999=0/A.1,2000=1/B.1":           "#3,2000=1/B.1",
		"#3,1500=0/A.1,2000=!ab:2,50=2/C.1": "#3,1500=0/A.1,2000=!ab:2",
	} {
		if got := LiveValue(v, now); got != want {
			t.Errorf("LiveValue(%q) = %q, want %q", v, got, want)
		}
	}
}
