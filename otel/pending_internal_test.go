package redlockotel

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPendingBounds: however many keys and events pass through, pending
// holds at most maxKeys keys and maxEvents events per key, evicting the key
// least recently touched and the oldest event of a key. This is internal:
// from outside, an eviction only shows as a span without some events.
func TestPendingBounds(t *testing.T) {
	p := newPending(3, 4)
	t0 := time.Now()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	for i := range 1000 {
		p.add(fmt.Sprintf("k%d", i), event{name: "e", at: at(i)})
		require.LessOrEqual(t, p.size(), 3)
	}
	p.add("k997", event{name: "e", at: at(1000)}) // k997 is now the most recent
	p.add("new", event{name: "e", at: at(1001)})  // evicts k998, the least recent
	ev, _ := p.take("k998", t0, at(2000))
	assert.Empty(t, ev, "k998 was evicted")
	ev, _ = p.take("k997", t0, at(2000))
	assert.Len(t, ev, 2, "k997 was kept")

	for i := range 10 {
		p.add("busy", event{name: fmt.Sprint(i), at: at(i)})
	}
	ev, dropped := p.take("busy", t0, at(2000))
	require.Len(t, ev, 4)
	assert.Equal(t, 6, dropped)
	assert.Equal(t, "6", ev[0].name, "the newest are kept")
	ev, _ = p.take("busy", t0, at(2000))
	assert.Empty(t, ev, "take removes the key")
}

// TestPendingWindow: take returns only the events from the operation's
// start to its end, even when they were held out of order; the later ones
// stay held for the next operation of the key.
func TestPendingWindow(t *testing.T) {
	p := newPending(8, 8)
	start := time.Now()
	end := start.Add(10 * time.Millisecond)
	p.add("k", event{name: "late reply of an earlier call", at: start.Add(-time.Millisecond)})
	p.add("k", event{name: "b", at: start.Add(2 * time.Millisecond)})
	p.add("k", event{name: "a", at: start.Add(time.Millisecond)}) // added after b by another goroutine
	p.add("k", event{name: "after the end", at: end.Add(time.Millisecond)})
	p.add("k", event{name: "earlier still", at: start.Add(-time.Second)})
	ev, dropped := p.take("k", start, end)
	require.Len(t, ev, 2)
	assert.Equal(t, []string{"b", "a"}, []string{ev[0].name, ev[1].name})
	assert.Zero(t, dropped)
	assert.Equal(t, 1, p.size(), "the later event stays held")
	ev, _ = p.take("k", end, end.Add(time.Second))
	require.Len(t, ev, 1)
	assert.Equal(t, "after the end", ev[0].name)
	assert.Zero(t, p.size())
}
