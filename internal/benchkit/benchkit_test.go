package benchkit

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[len(d)-1-i] = time.Duration(i + 1) // unsorted
	}
	for _, tc := range []struct {
		p    int
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}} {
		if got := Percentile(d, tc.p); got != tc.want {
			t.Errorf("Percentile(1..100, %d) = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := Percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("Percentile of one sample = %d, want 7", got)
	}
}

// chanLock is a lock that waits for its turn until ctx ends.
type chanLock chan struct{}

func (l chanLock) lock(ctx context.Context) (struct{}, error) {
	select {
	case l <- struct{}{}:
		return struct{}{}, nil
	case <-ctx.Done():
		return struct{}{}, ctx.Err()
	}
}

func (l chanLock) unlock(context.Context, struct{}) error {
	<-l
	return nil
}

func TestContendCounted(t *testing.T) {
	l := make(chanLock, 1)
	c := Contend(t.Context(), Run{Goroutines: 4, Ops: 100}, l.lock, l.unlock)
	if c.Acquired != 100 || len(c.Handoffs) != 99 || c.Failures != 0 || c.Overlaps != 0 {
		t.Fatalf("acquired %d, handoffs %d, failures %d, overlaps %d; want 100, 99, 0, 0",
			c.Acquired, len(c.Handoffs), c.Failures, c.Overlaps)
	}
}

// A timed run ends waiting acquires without counting them as failures, and
// a release never sees the run's end.
func TestContendTimed(t *testing.T) {
	l := make(chanLock, 1)
	var unlockErrs atomic.Int32
	unlock := func(ctx context.Context, h struct{}) error {
		time.Sleep(time.Millisecond) // others queue up
		if ctx.Err() != nil {
			unlockErrs.Add(1)
		}
		return l.unlock(ctx, h)
	}
	start := time.Now()
	c := Contend(t.Context(), Run{Goroutines: 8, Duration: 50 * time.Millisecond}, l.lock, unlock)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the run took %v", took)
	}
	if c.Acquired == 0 || c.Failures != 0 || unlockErrs.Load() != 0 {
		t.Fatalf("acquired %d, failures %d (%v), releases with an ended context %d; want > 0, 0, 0",
			c.Acquired, c.Failures, c.FirstErr, unlockErrs.Load())
	}
}

// A goroutine starved for the whole of a timed run adds no wait to Waits,
// but its wait, cut off by the run's end, is in OpenWaits, up to the run's
// end.
func TestContendOpenWaits(t *testing.T) {
	l := make(chanLock, 1)
	const run = 100 * time.Millisecond
	var calls atomic.Int32
	lock := func(ctx context.Context) (struct{}, error) {
		calls.Add(1)
		return l.lock(ctx)
	}
	// The first holder keeps the lock past the run's end: every other
	// acquirer waits until the run ends.
	var first atomic.Bool
	unlock := func(ctx context.Context, h struct{}) error {
		if first.CompareAndSwap(false, true) {
			time.Sleep(2 * run)
		}
		return l.unlock(ctx, h)
	}
	c := Contend(t.Context(), Run{Goroutines: 4, Duration: run}, lock, unlock)
	if c.Acquired != 1 || len(c.Waits) != 1 || len(c.OpenWaits) != int(calls.Load())-1 || len(c.OpenWaits) == 0 {
		t.Fatalf("acquired %d, waits %d, open waits %d of %d calls; want 1, 1, all but one", c.Acquired, len(c.Waits),
			len(c.OpenWaits), calls.Load())
	}
	for _, w := range c.OpenWaits {
		if w <= 0 || w > run {
			t.Errorf("open wait %v, want within the run (%v)", w, run)
		}
	}
}

func TestManyKeys(t *testing.T) {
	errOdd := errors.New("odd")
	var seen [5]atomic.Int32
	p := ManyKeys(t.Context(), Run{Goroutines: 5, Ops: 100}, func(_ context.Context, g int) error {
		if seen[g].Add(1)%2 == 1 {
			return errOdd
		}
		return nil
	})
	var total int32
	for i := range seen {
		total += seen[i].Load()
	}
	if total != 100 || len(p.Latencies)+p.Failures != 100 || p.Failures < 40 || !errors.Is(p.FirstErr, errOdd) {
		t.Fatalf("ops %d, latencies %d, failures %d, first error %v", total, len(p.Latencies), p.Failures, p.FirstErr)
	}
}

// Each counted acquisition has a wait and, with Spans, a span of at least
// the hold; the spans of one lock never overlap.
func TestContendHoldWaitsSpans(t *testing.T) {
	l := make(chanLock, 1)
	const hold = 200 * time.Microsecond
	c := Contend(t.Context(), Run{Goroutines: 4, Ops: 50, Hold: hold, Spans: true}, l.lock, l.unlock)
	if c.Acquired != 50 || len(c.Waits) != 50 || len(c.Spans) != 50 || c.Overlaps != 0 {
		t.Fatalf("acquired %d, waits %d, spans %d, overlaps %d; want 50, 50, 50, 0",
			c.Acquired, len(c.Waits), len(c.Spans), c.Overlaps)
	}
	slices.SortFunc(c.Spans, func(a, b Span) int { return cmp.Compare(a.Acquired, b.Acquired) })
	for i, s := range c.Spans {
		if time.Duration(s.Released-s.Acquired) < hold {
			t.Errorf("span %d held %v, want at least %v", i, time.Duration(s.Released-s.Acquired), hold)
		}
		if i > 0 && s.Acquired < c.Spans[i-1].Released {
			t.Errorf("span %d starts before span %d ended", i, i-1)
		}
	}
	// Someone waited behind a holder.
	if p := Percentile(c.Waits, 100); p < hold {
		t.Errorf("longest wait %v, want at least one hold (%v)", p, hold)
	}
}
