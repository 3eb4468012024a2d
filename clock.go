package redlock

import (
	"time"
)

// Clock is the single source of time for validity decisions. The default uses
// time.Now, whose readings carry Go's monotonic clock, so elapsed time is
// immune to wall-clock steps. Tests inject a Clock to move time without
// sleeping. Per-node deadlines and retry waits always use real timers.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// timing is what the validity arithmetic reads of a Client's config: the
// allowance for the nodes' clock drift and the per-node deadline. config
// embeds it; its methods are the arithmetic.
type timing struct {
	driftFactor      float64
	driftConst       time.Duration
	nodeTimeoutFixed time.Duration // WithNodeTimeout; 0 to derive it from the TTL
}

// drift is the allowance for the nodes' clocks running faster than ours over
// one TTL (Redis expires keys by its own clock), as in the Redlock paper:
// ttl×factor plus a constant for the expiry precision of Redis.
func (c *timing) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.driftFactor) + c.driftConst
}

// validUntil is the end of the window in which the lock is held, for keys
// written no earlier than start: every node that took the key keeps it until
// at least start+ttl by its clock, which may run ahead of ours by the drift.
// Until() is never later than this.
func (c *timing) validUntil(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - c.drift(ttl))
}

// nodeTimeout is how long one operation waits for one node. A dead or stalled
// node costs at most this much: it must be small next to the TTL, so that
// most of the TTL is left as validity.
func (c *timing) nodeTimeout(ttl time.Duration) time.Duration {
	if c.nodeTimeoutFixed > 0 {
		return c.nodeTimeoutFixed
	}
	d := ttl / DefaultNodeTimeoutDivisor
	return min(max(d, DefaultNodeTimeoutMin), DefaultNodeTimeoutMax)
}

// checkTTL returns ttl truncated to the milliseconds that PX can express (so
// validity is computed from the expiry the nodes really apply), or an error
// when nothing is left, no validity would be left once the drift is taken
// off, or it is over MaxTTL.
func (c *timing) checkTTL(ttl time.Duration) (time.Duration, error) {
	ms := ttl.Truncate(time.Millisecond)
	if ms <= 0 {
		return 0, invalid("ttl %v: must be at least 1ms", ttl)
	}
	if ms > MaxTTL {
		return 0, invalid("ttl %v: over MaxTTL (%v)", ttl, MaxTTL)
	}
	if d := c.drift(ms); ms <= d {
		return 0, invalid("ttl %v: leaves no validity after the clock drift allowance of %v", ttl, d)
	}
	return ms, nil
}
