// Package retry holds the retry strategies the root package's
// ExponentialBackoff, LimitRetry and NoRetry return, and the check New makes
// of a strategy before it takes it.
package retry

import (
	"math/rand/v2"
	"time"
)

// Strategy is the root package's RetryStrategy: the wait after so many
// failed attempts, or false to give up.
type Strategy interface {
	Backoff(failed int) (time.Duration, bool)
}

// Exponential waits Min·2^(failed-1), capped at Max, with full jitter in its
// upper half.
type Exponential struct{ Min, Max time.Duration }

// Backoff implements Strategy.
func (e Exponential) Backoff(failed int) (time.Duration, bool) {
	d := e.Min
	for i := 1; i < failed && d < e.Max; i++ {
		if d > e.Max/2 {
			d = e.Max // doubling would pass Max, or overflow
			break
		}
		d *= 2
	}
	d = min(d, e.Max)
	if d <= 0 {
		return 0, true
	}
	return d/2 + rand.N(d/2+1), true
}

// Limit gives up after Attempts attempts in all, and otherwise waits as S.
type Limit struct {
	S        Strategy
	Attempts int
}

// Backoff implements Strategy.
func (l Limit) Backoff(failed int) (time.Duration, bool) {
	if failed >= l.Attempts {
		return 0, false
	}
	return l.S.Backoff(failed)
}

// None gives up after the first attempt.
type None struct{}

// Backoff implements Strategy.
func (None) Backoff(int) (time.Duration, bool) { return 0, false }

// Check says what is wrong with s, the strategy WithRetry was given, naming
// the call that made it; "" if nothing is. It catches a nil strategy, a
// Limit of none or of fewer than one attempt (which reads as "never try"
// while Acquire always makes its first), and an Exponential that would
// retry with no wait, a busy loop against the nodes.
func Check(s Strategy) string {
	if s == nil {
		return "WithRetry: nil strategy"
	}
	l, limited := s.(Limit)
	switch {
	case limited && l.S == nil:
		return "LimitRetry: nil strategy"
	case limited && l.Attempts < 1:
		return "LimitRetry: fewer than one attempt"
	case limited:
		s = l.S
	}
	if e, ok := s.(Exponential); ok && (e.Min <= 0 || e.Max < e.Min) {
		return "ExponentialBackoff: min must be positive and max at least min"
	}
	return ""
}
