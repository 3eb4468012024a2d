package redlock

import (
	"log/slog"
	"math"
	"time"
)

// Defaults used when no Option overrides them.
const (
	// DefaultDriftFactor is the fraction of the TTL allowed for clock drift
	// between this process and the nodes (the Redlock paper's 1%).
	DefaultDriftFactor = 0.01
	// DefaultDriftConst is added to the drift for Redis's expiry precision.
	DefaultDriftConst = 2 * time.Millisecond

	// DefaultNodeTimeoutDivisor derives the per-node deadline from the TTL:
	// ttl/200, 50ms for a 10s TTL, clamped to
	// [DefaultNodeTimeoutMin, DefaultNodeTimeoutMax].
	DefaultNodeTimeoutDivisor = 200
	// DefaultNodeTimeoutMin is the shortest derived per-node deadline.
	DefaultNodeTimeoutMin = 10 * time.Millisecond
	// DefaultNodeTimeoutMax is the longest derived per-node deadline.
	DefaultNodeTimeoutMax = 50 * time.Millisecond

	// DefaultCleanupTimeout bounds each node's part of work that runs after the
	// caller has moved on: the rollback of a failed acquire and the tail of a
	// release. Nobody waits for it, so it can afford to be generous.
	DefaultCleanupTimeout = time.Second

	// MaxTTL is the longest TTL a lock takes, and the longest duration any
	// option takes: every deadline and expiry computed from one stays far
	// from overflowing. A longer one fails with ErrInvalidArgument.
	MaxTTL = 365 * 24 * time.Hour

	// DefaultFenceHorizon is how long a fencing counter is kept after the
	// last acquire, extend or commit of its key (see WithFenceHorizon).
	DefaultFenceHorizon = 7 * 24 * time.Hour

	// DefaultUnavailableTimeout is how long Acquire keeps trying while a
	// quorum of nodes cannot be asked (ErrUnavailable), whatever ctx's
	// deadline: dead infrastructure fails the call instead of hanging it.
	DefaultUnavailableTimeout = 5 * time.Second

	// DefaultRetryMin and DefaultRetryMax bound Acquire's jittered exponential
	// backoff between attempts.
	DefaultRetryMin = 5 * time.Millisecond
	DefaultRetryMax = 200 * time.Millisecond
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
	switch {
	case c.bad != nil:
		return c.bad
	case c.retry == nil:
		return invalid("WithRetry: nil strategy")
	case isNilLimit(c.retry):
		return invalid("LimitRetry: nil strategy")
	case badLimit(c.retry):
		return invalid("LimitRetry: fewer than one attempt")
	case badBackoff(c.retry):
		return invalid("ExponentialBackoff: min must be positive and max at least min")
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
	case c.fenceHorizon < time.Millisecond:
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
	if c.restartGuard < 0 || (c.restartGuard > 0 && c.restartGuard < time.Millisecond) {
		return invalid("WithRestartGuard: guard %v is negative or under a millisecond", c.restartGuard)
	}
	c.horizonArg = c.fenceHorizon.Milliseconds()
	c.guardArg = c.restartGuard.Milliseconds()
	return nil
}

// WithFencing makes every acquisition also issue a fencing token (Lock.Fence)
// that strictly increases across successive holders of a key. Each fence is
// above the fencing counters and the clocks that the acquiring quorum read,
// and is committed to the counters of a quorum before it is handed out. It
// survives the loss of any minority's counters (a restart without
// persistence, FLUSHALL, eviction, failover to a replica that lacked them),
// and of all counters once the horizon has passed, as long as the nodes'
// clocks do not step back by more than the time since: docs/fencing.md
// states the argument, the limits and their counterexamples. It costs a
// second round trip per acquisition, and one counter key per lock key that
// lives until the horizon (WithFenceHorizon) after the key's last use.
func WithFencing() Option {
	return optionFunc(func(c *config) { c.fencing = true })
}

// WithFenceHorizon sets how long a fencing counter is kept after the last
// acquire, extend or commit of its key; the default is DefaultFenceHorizon.
// Past the horizon the counter expires, and the next fence comes from the
// nodes' clocks, which by then are above every fence issued before. It must
// be far longer than the nodes' clocks may disagree or step back; a
// horizon under a millisecond is refused.
func WithFenceHorizon(d time.Duration) Option {
	return optionFunc(func(c *config) { c.fenceHorizon = d })
}

// WithRestartGuard keeps a node that may have lost lock keys out of every
// acquire's quorum for d: the Redlock spec's delayed restart, enforced by the
// clients instead of the operator. Set d to at least the longest TTL any
// client of the nodes uses; then a lock held when the node lost its data has
// expired everywhere before the node votes again.
//
// The loss is detected in the acquire itself, atomically with it: each node
// keeps a boot marker (the key redlock:boot) with its server's run_id and
// the moment, on the node's own clock, it was first seen with its current
// data; no Client locks that key, and a value under it that is not a marker
// is never written over (the node stays within its guard while it is
// there). A marker that is missing (FLUSHALL, a restart without persistence,
// a failover to a replica that lacks it) or names another run_id (any
// restart or failover) starts the guard from that acquire; until it has
// passed, the node refuses with ErrRestartGuard and writes nothing. Every
// client reads the same marker, so they agree on when the node is back.
//
// What it costs: a node the guard has never seen is new too, so after
// deployment (and after every restart, FLUSHALL or failover) each node
// counts only d after the first guarded acquire that reached it; an
// acquire needs a quorum of nodes outside their guard. A restart of a
// node with appendfsync always is treated like any other. The acquire
// script also reads TIME and INFO server: a user limited by ACL needs +time,
// +info and the key pattern ~redlock:boot. Nodes that are Redis Cluster
// clients are refused (the marker would need one key per slot).
//
// A zero d is refused: leave the option out for no guard.
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
// attempts fail with ErrUnavailable (so many nodes refuse connections, time
// out or answer with errors that no quorum can be asked) before it returns
// that error; the default is DefaultUnavailableTimeout. The time counts from
// the first of the Client's attempts that failed that way in a row, whichever
// call made it, and applies whatever ctx's deadline: once the nodes have
// been unavailable for that long, each Acquire makes one attempt and
// returns. It
// never shortens the wait for a key another holder keeps: that wait ends
// only with ctx or the RetryStrategy.
func WithUnavailableTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.unavailable = d })
}

// WithCleanupTimeout sets the per-node deadline of deletes: the rollback of a
// failed acquire, and each node's part of a release (Release itself waits only
// for the node timeout; the delete goes on in the background until this
// deadline, so that it still frees a slow node).
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
	owner    string
	ownerSet bool
}

func (ac *acquireConfig) validate() error {
	if ac.ownerSet && (ac.owner == "" || len(ac.owner) > MaxOwnerLen) {
		return invalid("WithOwner: id must be 1 to %d bytes, got %d", MaxOwnerLen, len(ac.owner))
	}
	return nil
}
