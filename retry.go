package redlock

import (
	"math/rand/v2"
	"time"
)

// RetryStrategy decides how long Acquire waits before its next attempt.
// Implementations must be safe for concurrent use; they keep no per-call state.
type RetryStrategy interface {
	// Backoff returns the wait after the given number of failed attempts
	// (1 after the first), or false to give up.
	Backoff(failed int) (time.Duration, bool)
}

type expBackoff struct{ min, max time.Duration }

// ExponentialBackoff waits min·2^(failed-1), capped at max, with full jitter
// in its upper half, so contenders that collided once spread out. min must
// be positive and max at least min: New refuses it otherwise.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	return expBackoff{min: min, max: max}
}

func (e expBackoff) Backoff(failed int) (time.Duration, bool) {
	d := e.min
	for i := 1; i < failed && d < e.max; i++ {
		if d > e.max/2 {
			d = e.max // doubling would pass max, or overflow
			break
		}
		d *= 2
	}
	d = min(d, e.max)
	if d <= 0 {
		return 0, true
	}
	return d/2 + rand.N(d/2+1), true
}

type limitRetry struct {
	s   RetryStrategy
	max int
}

// LimitRetry gives up after attempts attempts in all; New refuses fewer than
// one.
func LimitRetry(s RetryStrategy, attempts int) RetryStrategy {
	return limitRetry{s: s, max: attempts}
}

func (l limitRetry) Backoff(failed int) (time.Duration, bool) {
	if failed >= l.max {
		return 0, false
	}
	return l.s.Backoff(failed)
}

type noRetry struct{}

// NoRetry makes Acquire behave like TryAcquire.
func NoRetry() RetryStrategy { return noRetry{} }

func (noRetry) Backoff(int) (time.Duration, bool) { return 0, false }

func isNilLimit(s RetryStrategy) bool {
	l, ok := s.(limitRetry)
	return ok && l.s == nil
}

// badLimit catches a LimitRetry of no attempts, which reads as "never try"
// while Acquire always makes its first.
func badLimit(s RetryStrategy) bool {
	l, ok := s.(limitRetry)
	return ok && l.max < 1
}

// badBackoff catches an ExponentialBackoff that would retry with no wait, a
// busy loop against the nodes.
func badBackoff(s RetryStrategy) bool {
	if l, ok := s.(limitRetry); ok {
		s = l.s
	}
	e, ok := s.(expBackoff)
	return ok && (e.min <= 0 || e.max < e.min)
}
