package redlock

import (
	"log/slog"
	"math"
	"time"

	"github.com/redlock-go/redlock/internal/retry"
	"github.com/redlock-go/redlock/internal/script"
)

// Option configures a Client. Options are applied in order by New and
// validated once there.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is a Client's settings, as New's options left them; validate
// checks them once. Its methods are here; the validity arithmetic is
// timing's, in clock.go.
type config struct {
	fencing        bool
	fenceHorizon   time.Duration
	horizonArg     any // fenceHorizon in milliseconds, boxed once
	restartGuard   time.Duration
	hooks          Hooks
	logger         *slog.Logger
	guardArg       any // restartGuard in milliseconds, boxed once
	retry          RetryStrategy
	timing         // the drift allowance and the per-node deadline (clock.go)
	cleanupTimeout time.Duration
	clock          Clock
	renewInterval  time.Duration // KeepAlive's period; 0 for a third of the TTL
	renewFailed    func(*Lock, error)
	unavailable    time.Duration // Acquire's bound while ErrUnavailable
	// bad is the first option value that means nothing (a zero duration
	// that would read as "off" or "default", a nil function): validate
	// reports it.
	bad error
}

func defaultConfig() config {
	return config{
		retry:          ExponentialBackoff(DefaultRetryMin, DefaultRetryMax),
		fenceHorizon:   DefaultFenceHorizon,
		cleanupTimeout: DefaultCleanupTimeout,
		unavailable:    DefaultUnavailableTimeout,
		timing:         timing{driftFactor: DefaultDriftFactor, driftConst: DefaultDriftConst},
		clock:          systemClock{},
	}
}

func (c *config) validate() error {
	if c.bad == nil {
		if why := retry.Check(c.retry); why != "" {
			return invalid("%s", why)
		}
	}
	switch {
	case c.bad != nil:
		return c.bad
	case c.clock == nil:
		return invalid("WithClock: nil clock")
	case c.nodeTimeoutFixed < 0:
		return invalid("WithNodeTimeout: negative timeout %v", c.nodeTimeoutFixed)
	case c.cleanupTimeout <= 0:
		return invalid("WithCleanupTimeout: timeout %v is not positive", c.cleanupTimeout)
	case math.IsNaN(c.driftFactor) || c.driftFactor < 0 || c.driftFactor >= 1:
		return invalid("WithDrift: factor %v is outside [0, 1)", c.driftFactor)
	case c.driftConst < 0:
		return invalid("WithDrift: negative constant %v", c.driftConst)
	case c.fenceHorizon < minDuration:
		return invalid("WithFenceHorizon: horizon %v is under a millisecond", c.fenceHorizon)
	case c.unavailable <= 0:
		return invalid("WithUnavailableTimeout: timeout %v is not positive", c.unavailable)
	case c.renewInterval < 0:
		return invalid("WithRenewInterval: negative interval %v", c.renewInterval)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"WithNodeTimeout", c.nodeTimeoutFixed}, {"WithCleanupTimeout", c.cleanupTimeout}, {"WithDrift", c.driftConst},
		{"WithFenceHorizon", c.fenceHorizon}, {"WithRenewInterval", c.renewInterval}, {"WithRestartGuard", c.restartGuard}} {
		if d.v > MaxTTL {
			return invalid("%s: %v is over MaxTTL (%v)", d.name, d.v, MaxTTL)
		}
	}
	if c.restartGuard < 0 || (c.restartGuard > 0 && c.restartGuard < minDuration) {
		return invalid("WithRestartGuard: guard %v is negative or under a millisecond", c.restartGuard)
	}
	c.horizonArg = c.fenceHorizon.Milliseconds()
	c.guardArg = c.restartGuard.Milliseconds()
	return nil
}

// WithFencing makes every acquisition also issue a fencing token (Lock.Fence)
// that strictly increases across successive holders of a key, also when a
// minority of nodes lost its counters, while the nodes' clocks agree
// (docs/fencing.md). It costs a second round trip per acquisition, and one
// counter key per lock key, kept for the fence horizon after its last use.
func WithFencing() Option {
	return optionFunc(func(c *config) { c.fencing = true })
}

// WithFenceHorizon sets how long a fencing counter is kept after the last
// acquire, extend or commit of its key; the default is DefaultFenceHorizon.
// Past it the next fence comes from the nodes' clocks, so it must be far
// longer than they may disagree or step back. Under a millisecond is refused.
func WithFenceHorizon(d time.Duration) Option {
	return optionFunc(func(c *config) { c.fenceHorizon = d })
}

// WithRestartGuard keeps a node that may have lost lock keys (it restarted,
// failed over or lost its data) out of every acquire's quorum for d, timed on
// the node's own clock: the Redlock spec's delayed restart, enforced by the
// clients. Set d to at least the longest TTL in use. It costs availability:
// each node counts only d after the first guarded acquire reached it, at
// deployment too (docs/algorithm.md). Redis Cluster clients and a zero d are
// refused.
func WithRestartGuard(d time.Duration) Option {
	return optionFunc(func(c *config) {
		c.restartGuard = d
		c.refuseZero(d, "WithRestartGuard: a zero guard; leave the option out for none")
	})
}

// WithRetry sets how Acquire waits between attempts. The default is
// ExponentialBackoff(DefaultRetryMin, DefaultRetryMax) with no attempt limit:
// Acquire then waits until it gets the lock or ctx ends.
func WithRetry(s RetryStrategy) Option {
	return optionFunc(func(c *config) { c.retry = s })
}

// WithNodeTimeout fixes the per-node deadline of every operation instead of
// deriving it from the TTL. A node that has not answered by then counts as
// unknown: never as success. A zero d is refused: leave the option out for
// the derived deadline.
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		c.nodeTimeoutFixed = d
		c.refuseZero(d, "WithNodeTimeout: a zero timeout; leave the option out for the derived one")
	})
}

// WithUnavailableTimeout sets how long Acquire keeps trying while its
// attempts fail with ErrUnavailable, from the first of the Client's attempts
// that failed that way in a row, whatever ctx's deadline; the default is
// DefaultUnavailableTimeout. It never shortens the wait for a key another
// holder keeps (docs/operations.md).
func WithUnavailableTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.unavailable = d })
}

// WithCleanupTimeout sets the per-node deadline of deletes (the rollback of
// a failed acquire, each node's part of a release), and how long Release
// waits for a quorum of them when the nodes do not answer within the node
// timeout; the default is DefaultCleanupTimeout.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.cleanupTimeout = d })
}

// WithDrift sets the clock drift allowance to ttl×factor + constant.
func WithDrift(factor float64, constant time.Duration) Option {
	return optionFunc(func(c *config) { c.driftFactor, c.driftConst = factor, constant })
}

// WithClock sets the clock used for validity. Meant for tests.
func WithClock(clock Clock) Option {
	return optionFunc(func(c *config) { c.clock = clock })
}

// WithRenewInterval sets how often KeepAlive renews a lock: every d instead
// of every third of the lock's TTL, and never less often than every half of
// it, so that a failed renewal leaves time for retries before Until. A zero
// d is refused: leave the option out for the default.
func WithRenewInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		c.renewInterval = d
		c.refuseZero(d, "WithRenewInterval: a zero interval; leave the option out for the default")
	})
}

// WithRenewErrorHandler sets a function that KeepAlive calls with the error of
// each renewal that failed, whether it is retried or the lock is lost: for
// logs and metrics. It runs on the renewal's goroutine, which is one of the
// Client's few renewal slots, so it must return quickly. A nil f is refused.
func WithRenewErrorHandler(f func(l *Lock, err error)) Option {
	return optionFunc(func(c *config) {
		c.renewFailed = f
		if f == nil && c.bad == nil {
			c.bad = invalid("WithRenewErrorHandler: nil function")
		}
	})
}

// refuseZero records msg as the config's error when an option was given a
// zero d, unless an earlier option was bad already.
func (c *config) refuseZero(d time.Duration, msg string) {
	if d == 0 && c.bad == nil {
		c.bad = invalid("%s", msg)
	}
}

// AcquireOption configures one Acquire, TryAcquire or Do call.
type AcquireOption interface {
	applyAcquire(*acquireConfig)
}

type acquireOptionFunc func(*acquireConfig)

func (f acquireOptionFunc) applyAcquire(c *acquireConfig) { f(c) }

// acquireConfig is what the AcquireOptions of one call set.
type acquireConfig struct {
	owner      string
	ownerSet   bool
	shared     bool
	permits    int
	permitsSet bool
	kind       kind   // the primitive the options chose; nil: exclusive
	metadata   string // WithMetadata's
	fenced     bool   // fenced whatever the Client's WithFencing (an Election's)
}

// WithMetadata stores md with the Lock on every node it writes, for
// operators: Inspect shows it per node (NodeKeyState.Metadata) and so does
// redlock status. Say who holds the lock: a host, a pid, a request id. It
// takes MaxMetadataLen bytes of UTF-8 without control characters at most,
// else ErrInvalidArgument; "" stores none. No hook or log line carries it.
func WithMetadata(md string) AcquireOption {
	return acquireOptionFunc(func(c *acquireConfig) { c.metadata = md })
}

func (ac *acquireConfig) validate() error {
	if why := script.CheckMetadata(ac.metadata, MaxMetadataLen); why != "" {
		return invalid("WithMetadata: %s", why)
	}
	if ac.ownerSet && (ac.owner == "" || len(ac.owner) > MaxOwnerLen) {
		return invalid("WithOwner: id must be 1 to %d bytes, got %d", MaxOwnerLen, len(ac.owner))
	}
	if ac.ownerSet && ac.shared {
		return invalid("WithOwner with Shared: a shared Lock has no owner")
	}
	if !ac.permitsSet {
		return nil
	}
	switch {
	case ac.permits < 1 || ac.permits > MaxPermits:
		return invalid("Permits: n must be 1 to %d, got %d", MaxPermits, ac.permits)
	case ac.ownerSet:
		return invalid("WithOwner with Permits: a permit has no owner")
	case ac.shared:
		return invalid("Shared with Permits: a permit is taken alongside the others already")
	}
	return nil
}

// RetryStrategy decides how long Acquire waits before its next attempt.
// Implementations must be safe for concurrent use; they keep no per-call state.
type RetryStrategy interface {
	// Backoff returns the wait after the given number of failed attempts
	// (1 after the first), or false to give up.
	Backoff(failed int) (time.Duration, bool)
}

// ExponentialBackoff waits min·2^(failed-1), capped at max, with full jitter
// in its upper half, so contenders that collided once spread out. min must
// be positive and max at least min: New refuses it otherwise.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	return retry.Exponential{Min: min, Max: max}
}

// LimitRetry gives up after attempts attempts in all; New refuses fewer than
// one.
func LimitRetry(s RetryStrategy, attempts int) RetryStrategy {
	return retry.Limit{S: s, Attempts: attempts}
}

// NoRetry makes Acquire give up after one attempt on the nodes, as
// TryAcquire does, though it still waits its turn behind this Client's
// earlier Acquire calls for the key.
func NoRetry() RetryStrategy { return retry.None{} }
