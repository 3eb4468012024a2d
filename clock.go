package redlock

// Timing rules: every duration and fraction that drives behaviour is named
// here, once (docs/internals.md). The first block is public: the options'
// defaults. The second is fixed.

import (
	"fmt"
	"slices"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
)

// The options' defaults, and the limits on what New and Acquire take.
const (
	// DefaultDriftFactor is the fraction of the TTL allowed for clock drift
	// between this process and the nodes (the Redlock paper's 1%).
	DefaultDriftFactor = 0.01
	// DefaultDriftConst is added to the drift for Redis's expiry precision.
	DefaultDriftConst = 2 * time.Millisecond

	// Each node's deadline is learned from its latency (its round trip's
	// smoothed value and variation, as TCP sets its retransmission
	// timeout; docs/algorithm.md), within a floor and the TTL's budget.
	// The floor is ttl/DefaultNodeTimeoutDivisor, 50ms for a 10s TTL,
	// clamped to [DefaultNodeTimeoutMin, DefaultNodeTimeoutMax]: a near
	// node's deadline, as tight as on a LAN.
	DefaultNodeTimeoutDivisor = 200
	// DefaultNodeTimeoutMin is the lowest floor of a per-node deadline.
	DefaultNodeTimeoutMin = 10 * time.Millisecond
	// DefaultNodeTimeoutMax is the highest floor of a per-node deadline: a
	// node that answers slower gets a longer one, up to the TTL's budget
	// (DefaultNodeBudgetOf).
	DefaultNodeTimeoutMax = 50 * time.Millisecond
	// DefaultNodeBudgetOf caps a per-node deadline at the validity the TTL
	// leaves (ttl less the drift allowance) divided by it, and never below
	// the floor: a node waited for that long leaves half the validity. A
	// node not heard from yet gets that cap (its first contact's deadline:
	// three round trips; a node 150ms away is waited for with a TTL of 1s
	// or more).
	DefaultNodeBudgetOf = 2

	// DefaultCleanupTimeout bounds each node's delete (a rollback, a
	// release), which goes on after the caller has moved on, and how long
	// Release waits for a quorum of them. It can afford to be generous.
	DefaultCleanupTimeout = time.Second

	// MaxTTL is the longest TTL a lock takes, and the longest duration any
	// option takes: every deadline and expiry computed from one stays far
	// from overflowing. A longer one fails with ErrInvalidArgument.
	MaxTTL = 365 * 24 * time.Hour
	// MaxOwnerLen is the longest owner id WithOwner accepts, in bytes.
	MaxOwnerLen = 512
	// MaxMetadataLen is the longest holder metadata WithMetadata accepts, in bytes.
	MaxMetadataLen = 128
	// MaxKeys is the most distinct keys one Lock holds (AcquireAll).
	MaxKeys = 128
	// MaxShared is the most shared Locks that one key holds at once on a
	// node: a shared Acquire beyond it waits, and a TryAcquire fails, as
	// for a held key.
	MaxShared = 1000
	// MaxPermits is the largest n of Permits.
	MaxPermits = 1000

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

// The fixed timing rules.
const (
	// minDuration is the shortest fence horizon and restart guard New takes.
	minDuration = time.Millisecond

	// renewWait is the longest a KeepAlive renewal waits for each node at
	// the least, the TTL's budget permitting: as far as a learned
	// deadline's backoff reaches (a second), so that a node whose latency
	// jumped is reached, and the refusals a Release leaves for the
	// renewal's writes live no longer than a backed-off deadline's.
	renewWait = time.Second

	// inspectTimeout is the least that each node's read for Inspect is
	// waited for when WithNodeTimeout does not fix it: nothing is written,
	// so it can afford a cold connection's dial.
	inspectTimeout = time.Second
	// inspectTimeoutMax bounds it for a far node, whose learned deadline
	// (docs/algorithm.md) may be longer.
	inspectTimeoutMax = 10 * time.Second

	// holderTTLSlack is how long after the holder's remaining TTL, as a
	// refusing node reported it, a waiting Acquire tries again at the latest.
	holderTTLSlack = time.Millisecond

	// A waiting Lock renews its entry in its keys' waiting rooms every
	// announceEvery (announce.go); the entry lives announceLife from each
	// renewal.
	announceEvery = 250 * time.Millisecond

	// A lease renews every ttl/renewEvery (WithRenewInterval: at most
	// ttl/renewAtMost), never more often than renewMin.
	renewEvery  = 3
	renewAtMost = 2
	renewMin    = time.Millisecond
	// A lease is given up as lost renewMargin before Until: ttl/renewMarginOf,
	// within [renewMarginMin, renewMarginMax], for the latency of the timer
	// and of the cancellation.
	renewMarginOf  = 20
	renewMarginMin = time.Millisecond
	renewMarginMax = 50 * time.Millisecond
	// A failed renewal is retried after interval/renewBackoffOf, within
	// [renewBackoffMin, renewBackoffMax], doubling with each failure in a
	// row up to renewBackoffCap.
	renewBackoffOf  = 10
	renewBackoffMin = 5 * time.Millisecond
	renewBackoffMax = 100 * time.Millisecond
	renewBackoffCap = time.Second
	// Renewals fall due up to interval/renewJitterOf early, at random, so
	// that locks kept alive together do not all renew in one instant.
	renewJitterOf = 10
)

// engineTiming is the engine's share of the timing rules.
var engineTiming = engine.Timing{
	// Delete retries back off from 20 to 400 ms, so a key left on a node
	// that was unreachable is gone within about a second of the node
	// answering again; they end at the key's expiry bound (keyLife).
	CleanupRetryMin: 20 * time.Millisecond,
	CleanupRetryMax: 400 * time.Millisecond,
	// An idle worker waits this long for more work before it exits.
	WorkerIdle: time.Second,
	// The first contact with a node (dial, handshake, INFO) is bounded by
	// IdentifyTimeout; a node that has not answered is asked again at most
	// every IdentifyRetry.
	IdentifyTimeout: time.Second,
	IdentifyRetry:   100 * time.Millisecond,
	// A node's pub/sub connection that failed waits SubRetryMin before
	// reading again, doubling up to SubRetryMax.
	SubRetryMin: 50 * time.Millisecond,
	SubRetryMax: 2 * time.Second,
	// A node's clock is read again once its reading is ClockRefresh old,
	// in the background: a write's deadline on the node allows the
	// reading's error, which grows with its age at the drift factor
	// (Client.New sets ClockDrift from WithDriftFactor), so that with the
	// default 1% a deadline is at most 20 ms, and the reading's half round
	// trip, later than it need be. LateSlack adds a millisecond for the
	// node's rounding.
	ClockRefresh: 2 * time.Second,
	LateSlack:    time.Millisecond,
}

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

// keyLife is the longest a key written with ttl may live once written, by
// our clock: the node's clock may run slow by the drift allowance, counted
// twice for margin. Delete retries end there: past it nothing is left to
// remove. With the default drift it is ttl + ttl/50 + 4ms.
func (c *timing) keyLife(ttl time.Duration) time.Duration {
	return ttl + 2*c.drift(ttl)
}

// validUntil is the end of the window in which the lock is held, for keys
// written no earlier than start: every node that took the key keeps it until
// at least start+ttl by its clock, which may run ahead of ours by the drift.
// Until() is never later than this.
func (c *timing) validUntil(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - c.drift(ttl))
}

// nodeFloor is the shortest per-node deadline for ttl: ttl/200 within
// 10–50 ms, what keeps a near node's deadline tight.
func (c *timing) nodeFloor(ttl time.Duration) time.Duration {
	return min(max(ttl/DefaultNodeTimeoutDivisor, DefaultNodeTimeoutMin), DefaultNodeTimeoutMax)
}

// nodeBudget is the longest per-node deadline for ttl: half the validity
// the TTL leaves once the drift is taken off, and never below the floor. A
// node waited for that long leaves half the validity; a node not heard
// from yet is waited for that long.
func (c *timing) nodeBudget(ttl time.Duration) time.Duration {
	return max(c.nodeFloor(ttl), (ttl-c.drift(ttl))/DefaultNodeBudgetOf)
}

// waits is how long each node is waited for under ttl: WithNodeTimeout's,
// or each node's learned deadline within [nodeFloor, nodeBudget]
// (engine.Waits).
func (c *timing) waits(ttl time.Duration) engine.Waits {
	if c.nodeTimeoutFixed > 0 {
		return engine.Waits{Fixed: c.nodeTimeoutFixed}
	}
	return engine.Waits{Floor: c.nodeFloor(ttl), Cap: c.nodeBudget(ttl)}
}

// nodeTimeout is how long one operation that needs every node waits for
// them: the longest of their deadlines (waits). A dead or stalled node
// costs at most its own deadline where a quorum of others answers; it is
// small next to the TTL, so that most of the TTL is left as validity.
func (c *Client) nodeTimeout(ttl time.Duration) time.Duration {
	return c.nodes.MaxWait(c.cfg.waits(ttl))
}

// checkLatency refuses ttl when the nodes' latency, as last learned,
// leaves it no validity: fewer than a quorum of nodes answer, as they
// usually do, within the TTL less the drift allowance. The error matches
// ErrNotAcquired, not ErrInvalidArgument: the TTL is valid, the network is
// what it is too slow for, and may not be for long (a node that was far or
// stalled a minute ago). It names the latency, the TTL, the shortest TTL
// that works and WithNodeTimeout. The slow nodes are asked for their clock
// in the background, whose reply is a sample of their latency: nothing of
// the refused attempt is sent, and the estimate must still come down once
// the network does, for a later attempt to find out. A node not heard from
// yet counts as fitting. It costs one atomic load per node.
func (c *Client) checkLatency(ttl time.Duration) error {
	budget := ttl - c.cfg.drift(ttl)
	n := c.nodes.Len()
	slow := 0
	for i := range n {
		if srtt, _, ok := c.nodes.Latency(i); ok && srtt >= budget {
			slow++
		}
	}
	if slow <= n-c.nodes.Quorum {
		return nil
	}
	// The quorum-th shortest latency: what the fastest quorum answers in.
	lat := make([]time.Duration, n)
	for i := range n {
		lat[i], _, _ = c.nodes.Latency(i)
		if lat[i] >= budget {
			c.nodes.Probe(i)
		}
	}
	slices.Sort(lat)
	q := lat[c.nodes.Quorum-1]
	return &latencyError{ttl: ttl, quorum: c.nodes.Quorum, n: n, lat: q, budget: budget}
}

// latencyError is a TTL refused because the nodes' latency, as learned,
// leaves it no validity (checkLatency).
type latencyError struct {
	ttl, lat, budget time.Duration
	quorum, n        int
}

func (e *latencyError) Error() string {
	return fmt.Sprintf("ttl %v is too short for the nodes' latency: a quorum of them (%d of %d) answers in %v at best, "+
		"past the %v of validity the TTL leaves once the drift allowance is taken off; use a TTL of at least %v "+
		"(WithNodeTimeout sets how long each node is waited for, not how long its replies take)",
		e.ttl, e.quorum, e.n, e.lat.Round(100*time.Microsecond), e.budget, minTTLFor(e.lat))
}

// minTTLFor is the shortest TTL, in whole milliseconds, that leaves a
// quorum answering in lat half its validity: four times lat, rounded up.
func minTTLFor(lat time.Duration) time.Duration {
	return (4*lat + time.Millisecond - 1).Truncate(time.Millisecond)
}

// announceLife is how long a waiting Lock's entry in a waiting room lives
// from each renewal, sent every announceEvery with node deadline wait: two
// intervals and two deadlines, so that one lost renewal costs nothing. It
// bounds how long a waiter that was stopped, cut off or killed still
// counts as waiting (docs/shared.md): 600 ms with the default node
// timeouts.
func (c *timing) announceLife(wait time.Duration) time.Duration {
	return 2*announceEvery + 2*wait
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
