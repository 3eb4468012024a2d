// Package benchkit holds the measurements that the benchmarks
// (bench_test.go) and the peer comparison (compare/) share, so that a figure
// in one means what it means in the other: many goroutines contending for
// one lock, many goroutines each working on its own key, and the
// percentiles drawn from them.
package benchkit

import (
	"context"
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
	// Failures counts the acquires and releases that failed, apart from
	// acquires cut short by the end of a timed run.
	Failures int
	// Overlaps counts acquisitions made while another holder held the lock:
	// a broken lock, not a slow one.
	Overlaps int
	FirstErr error
}

// Contend has r.Goroutines take one lock and release it at once, over and
// over. lock waits and retries the library's way; in a timed run its
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
		wg         sync.WaitGroup
	)
	for range r.Goroutines {
		wg.Go(func() {
			handoffs := r.samples()
			var acquired, failures, overlaps int
			var firstErr error
			fail := func(err error) {
				failures++
				if firstErr == nil {
					firstErr = err
				}
			}
			for lctx.Err() == nil && b.take() {
				h, err := lock(lctx)
				if err != nil {
					if lctx.Err() == nil {
						fail(err)
					}
					continue
				}
				now := time.Since(base)
				if holders.Add(1) != 1 {
					overlaps++
				}
				if b.within(base.Add(now)) {
					acquired++
					if prev := releasedAt.Load(); prev != 0 {
						handoffs = append(handoffs, now-time.Duration(prev))
					}
				}
				holders.Add(-1)
				releasedAt.Store(int64(time.Since(base)))
				if err := unlock(uctx, h); err != nil {
					fail(err)
				}
			}
			all.add(handoffs, acquired, failures, overlaps, firstErr)
		})
	}
	wg.Wait()
	return Contention{Acquired: all.ops, Handoffs: all.samples, Failures: all.failures, Overlaps: all.overlaps, FirstErr: all.firstErr}
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
