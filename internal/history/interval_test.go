package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Now()

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func iv(from, to int) Interval { return Interval{at(from), at(to)} }

func TestInterval(t *testing.T) {
	assert.True(t, iv(5, 5).Empty())
	assert.True(t, iv(6, 5).Empty())
	assert.False(t, iv(5, 6).Empty())
	assert.True(t, iv(5, 10).Contains(at(5)), "From is in")
	assert.False(t, iv(5, 10).Contains(at(10)), "To is out")
	assert.False(t, iv(5, 10).Contains(at(4)))
	assert.Equal(t, 5*time.Millisecond, iv(5, 10).Len())
	assert.Equal(t, iv(7, 10), Intersect(iv(5, 10), iv(7, 20)))
	assert.True(t, Intersect(iv(5, 10), iv(10, 20)).Empty(), "touching intervals share nothing")
	assert.Equal(t, at(1), Earliest(at(1), at(2)))
	assert.Equal(t, at(2), Latest(at(1), at(2)))
}

func TestUnion(t *testing.T) {
	got := Union([]Interval{iv(30, 40), iv(0, 10), iv(5, 15), iv(15, 20), iv(50, 50), iv(25, 26)})
	assert.Equal(t, []Interval{iv(0, 20), iv(25, 26), iv(30, 40)}, got)
	assert.Empty(t, Union([]Interval{iv(3, 3), iv(4, 2)}))
}

func TestMostAtOnce(t *testing.T) {
	assert.Equal(t, 0, MostAtOnce(nil))
	assert.Equal(t, 1, MostAtOnce([]Interval{iv(0, 10), iv(10, 20)}), "one ends as the other starts")
	assert.Equal(t, 3, MostAtOnce([]Interval{iv(0, 10), iv(5, 20), iv(9, 12), iv(11, 30)}))
	assert.Equal(t, 1, MostAtOnce([]Interval{iv(0, 10), iv(20, 5)}), "an empty interval holds nothing")
}

// TestOverlaps: every pair of different holders' windows on one key that
// share an instant is found once; touching, empty, same-holder and
// other-key windows are not pairs.
func TestOverlaps(t *testing.T) {
	w := func(key, holder string, from, to int) Window[string] {
		return Window[string]{Key: key, Holder: holder, Interval: iv(from, to)}
	}
	ws := []Window[string]{
		w("k", "A", 0, 800),
		w("k", "B", 500, 900),   // starts inside A: a pair
		w("k", "C", 900, 1200),  // starts as B ends: none
		w("k", "D", 1300, 1250), // empty
		w("other", "E", 100, 2000),
		w("k", "F", 1200, 3000),
		w("k", "G", 2999, 4000), // inside F: a pair
		w("k", "G", 4000, 5000), // G again, no one else: none
		w("k", "F", 4500, 4600), // F again, inside G's second window: a pair
		w("j", "H", 0, 100),
		w("j", "I", 50, 60), // inside H: a pair, sorted before k's
	}
	for _, o := range Overlaps(ws) {
		assert.False(t, o.Both.Empty())
		assert.Equal(t, Intersect(o.A.Interval, o.B.Interval), o.Both)
	}
	assert.Equal(t, []string{"HI", "AB", "FG", "GF"}, pairs(ws))
	assert.Empty(t, pairs([]Window[string]{w("k", "A", 0, 10), w("k", "A", 5, 15)}), "a holder's own windows")
	assert.Equal(t, []string{"AB"}, pairs([]Window[string]{w("k", "B", 5, 15), w("k", "A", 0, 10)}), "A starts first")
}

// pairs names each overlap of ws by its holders, A's first.
func pairs(ws []Window[string]) []string {
	var out []string
	for _, o := range Overlaps(ws) {
		out = append(out, o.A.Holder+o.B.Holder)
	}
	return out
}
