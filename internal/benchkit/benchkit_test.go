package benchkit

import (
	"context"
	"errors"
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
