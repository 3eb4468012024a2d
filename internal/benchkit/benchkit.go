// Package benchkit holds the measurements that the benchmarks
// (bench_test.go) and the peer comparison (compare/) share, so that a figure
// in one means what it means in the other: many goroutines contending for
// one lock, many goroutines each working on its own key, and the
// percentiles drawn from them.
package benchkit

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Percentile returns the nearest-rank percentile p (1 to 100) of d, which
// must not be empty. It sorts d in place.
func Percentile(d []time.Duration, p int) time.Duration {
	slices.Sort(d)
	i := (len(d)*p+99)/100 - 1
	return d[max(i, 0)]
}

// Run says how many goroutines a measurement runs and for how long: until
// Ops attempts, all goroutines together, have started, or until Duration has
// passed. One of the two is set.
type Run struct {
	Goroutines int
	Ops        int
	Duration   time.Duration
	// Hold is Contend's critical section: how long a holder keeps the lock
	// before it releases, spinning (it yields to the scheduler while it
	// spins, so a sub-millisecond hold is not rounded up to a timer tick).
	Hold time.Duration
	// Spans makes Contend record when each acquisition returned and its
	// release started, in wall-clock time, so that runs in several
	// processes can be merged.
	Spans bool
}

// budget hands out the attempts of a Run.
type budget struct {
	counted bool
	left    atomic.Int64
	until   time.Time // zero: no time limit
}

func (r Run) budget(start time.Time) *budget {
	b := &budget{counted: r.Ops > 0}
	b.left.Store(int64(r.Ops))
	if r.Duration > 0 {
		b.until = start.Add(r.Duration)
	}
	return b
}

// take reports whether one more attempt may start.
func (b *budget) take() bool {
	if !b.until.IsZero() && !time.Now().Before(b.until) {
		return false
	}
	return !b.counted || b.left.Add(-1) >= 0
}

// within reports whether t falls inside the run's time, if it has one.
func (b *budget) within(t time.Time) bool { return b.until.IsZero() || t.Before(b.until) }

// samples returns a slice for one goroutine's samples, preallocated when the
// number of attempts is known so that recording allocates nothing while the
// run is timed.
func (r Run) samples() []time.Duration {
	if r.Ops > 0 {
		return make([]time.Duration, 0, r.Ops/r.Goroutines+1)
	}
	return make([]time.Duration, 0, 256)
}

// tally gathers what the goroutines of a run counted.
type tally struct {
	mu       sync.Mutex
	samples  []time.Duration
	ops      int
	failures int
	overlaps int
	firstErr error
}

func (t *tally) add(samples []time.Duration, ops, failures, overlaps int, firstErr error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.samples = append(t.samples, samples...)
	t.ops += ops
	t.failures += failures
	t.overlaps += overlaps
	if t.firstErr == nil {
		t.firstErr = firstErr
	}
}

// Contention is what Contend measured.
type Contention struct {
	// Acquired counts the acquisitions that returned within the run.
	Acquired int
	// Handoffs are the waits from a holder starting its release to the next
	// holder's acquire returning, within the run.
	Handoffs []time.Duration
	// Waits are the acquirers' waits: from calling lock to its return, for
	// the acquisitions counted in Acquired.
	Waits []time.Duration
	// OpenWaits are the waits that a timed run's end cut off (lock ended by
	// it, or returning after it): from calling lock to the run's end, as
	// long as they had lasted. A percentile of waits that leaves them out
	// misses the acquirers starved the longest.
	OpenWaits []time.Duration
	// Spans, with Run.Spans, are the counted acquisitions' holds.
	Spans []Span
	// Failures counts the acquires and releases that failed, apart from
	// acquires cut short by the end of a timed run.
	Failures int
	// Overlaps counts acquisitions made while another holder held the lock:
	// a broken lock, not a slow one.
	Overlaps int
	FirstErr error
}

// Span is one hold of a contended lock in Unix nanoseconds: from the
// acquire's return to the start of the release.
type Span struct {
	Acquired int64 `json:"a"`
	Released int64 `json:"r"`
}

// spin holds the lock for d, yielding while it waits.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for start := time.Now(); time.Since(start) < d; {
		runtime.Gosched()
	}
}

// Contend has r.Goroutines take one lock, hold it for r.Hold and release it,
// over and over. lock waits and retries the library's way; in a timed run its
// context ends with the run, so that a waiting goroutine stops, while
// unlock's never does: a lock left behind would hold the next run up for a
// whole TTL.
func Contend[H any](ctx context.Context, r Run, lock func(context.Context) (H, error), unlock func(context.Context, H) error) Contention {
	lctx := ctx
	if r.Duration > 0 {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, r.Duration)
		defer cancel()
	}
	uctx := context.WithoutCancel(ctx)
	base := time.Now()
	b := r.budget(base)
	var (
		holders    atomic.Int32
		releasedAt atomic.Int64 // since base; 0 before the first release
		all        tally
		mu         sync.Mutex // guards waits, open and spans
		waits      []time.Duration
		open       []time.Duration
		spans      []Span
		wg         sync.WaitGroup
	)
	for range r.Goroutines {
		wg.Go(func() {
			handoffs, myWaits := r.samples(), r.samples()
			var mySpans []Span
			var myOpen []time.Duration
			var acquired, failures, overlaps int
			var firstErr error
			fail := func(err error) {
				failures++
				if firstErr == nil {
					firstErr = err
				}
			}
			for lctx.Err() == nil && b.take() {
				called := time.Now()
				h, err := lock(lctx)
				if err != nil {
					if lctx.Err() == nil {
						fail(err)
					} else if !b.until.IsZero() {
						myOpen = append(myOpen, b.until.Sub(called))
					}
					continue
				}
				got := time.Now()
				now := got.Sub(base)
				if holders.Add(1) != 1 {
					overlaps++
				}
				counted := b.within(got)
				if !counted {
					myOpen = append(myOpen, b.until.Sub(called))
				}
				if counted {
					acquired++
					myWaits = append(myWaits, got.Sub(called))
					if prev := releasedAt.Load(); prev != 0 {
						handoffs = append(handoffs, now-time.Duration(prev))
					}
				}
				spin(r.Hold)
				holders.Add(-1)
				rel := time.Now()
				releasedAt.Store(int64(rel.Sub(base)))
				if counted && r.Spans {
					mySpans = append(mySpans, Span{got.UnixNano(), rel.UnixNano()})
				}
				if err := unlock(uctx, h); err != nil {
					fail(err)
				}
			}
			all.add(handoffs, acquired, failures, overlaps, firstErr)
			mu.Lock()
			waits = append(waits, myWaits...)
			open = append(open, myOpen...)
			spans = append(spans, mySpans...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return Contention{Acquired: all.ops, Handoffs: all.samples, Waits: waits, OpenWaits: open, Spans: spans,
		Failures: all.failures, Overlaps: all.overlaps, FirstErr: all.firstErr}
}

// Parallel is what ManyKeys measured.
type Parallel struct {
	Latencies []time.Duration // of the operations that succeeded
	Failures  int
	FirstErr  error
}

// ManyKeys has r.Goroutines run op over and over, each with its own number g
// (0 to r.Goroutines-1), say to take and release a key of its own. An op
// started within the run goes on to its end with ctx.
func ManyKeys(ctx context.Context, r Run, op func(ctx context.Context, g int) error) Parallel {
	b := r.budget(time.Now())
	var (
		all tally
		wg  sync.WaitGroup
	)
	for g := range r.Goroutines {
		wg.Go(func() {
			lat := r.samples()
			var failures int
			var firstErr error
			for b.take() {
				start := time.Now()
				if err := op(ctx, g); err != nil {
					failures++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				lat = append(lat, time.Since(start))
			}
			all.add(lat, len(lat), failures, 0, firstErr)
		})
	}
	wg.Wait()
	return Parallel{Latencies: all.samples, Failures: all.failures, FirstErr: all.firstErr}
}
