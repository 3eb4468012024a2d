package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// KeepAlive renews l in the background and returns a context derived from
// ctx that ends when l is released (cause ErrReleased), its Client closed
// (ErrClosed), or l can no longer be proven held (a cause matching
// ErrLockLost), never later than l.Until() at that moment. When ctx ends,
// renewal stops and l stays held until its TTL: release it all the same.
// The context's end is a signal, not a barrier: see docs/lease.md, and
// fencing for writes that must not come late.
func (l *Lock) KeepAlive(ctx context.Context) context.Context {
	if ctx == nil {
		out, cancel := context.WithCancelCause(context.Background())
		cancel(invalid("keep-alive of %q: nil context", showKey(l.Key())))
		return out
	}
	out, cancel := context.WithCancelCause(ctx)
	if l == nil || l.client == nil {
		cancel(invalid("keep-alive of a nil lock"))
		return out
	}
	ls := l.leaseOf()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.contexts) == 0 {
		ls.values = detach(ctx) // this call starts the renewal
	}
	if ls.cause == nil && len(ls.contexts) == 0 {
		// Not renewing: the lock may have run out since it was acquired.
		if until := l.Until(); !ls.now().Before(until) {
			ls.endLocked(fmt.Errorf("%w: %q: validity ended at %v", ErrLockLost, showKey(l.key), until.Format(time.StampMicro)))
		}
	}
	if ls.cause != nil {
		cancel(ls.cause)
		return out
	}
	if out.Err() != nil { // ctx has ended already: nothing to renew for
		cancel(context.Cause(ctx)) // a no-op, out has ended with ctx's cause
		return out
	}
	ls.lastID++
	id := ls.lastID
	ls.contexts = append(ls.contexts, keepAliveCtx{id: id, cancel: cancel})
	if len(ls.contexts) == 1 {
		if !l.client.nodes.Life.AddLease(ls) {
			ls.endLocked(ErrClosed) // cancels out
			return out
		}
		ls.startLocked()
	}
	// Runs on a goroutine of its own once out ends, for whatever reason.
	context.AfterFunc(out, func() { ls.leave(id) })
	return out
}

// Do acquires key as Acquire does, runs fn with the Lock under its KeepAlive
// context, and releases the lock when fn returns or panics. fn must stop when
// its context ends, and must not Release the Lock. Do returns nil only when fn
// returned nil and the lock was held throughout; its error matches
// ErrLockLost when the lock was lost, and ErrNotAcquired, fn not called, when
// the acquire failed (docs/lease.md).
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lock) error, opts ...AcquireOption) error {
	if fn == nil {
		return invalid("do on %q: nil function", showKey(key))
	}
	return c.do(ctx, fn, func() (*Lock, error) { return c.Acquire(ctx, key, ttl, opts...) })
}

// do is Do and DoAll, with the Lock that acquire takes.
func (c *Client) do(ctx context.Context, fn func(ctx context.Context, l *Lock) error, acquire func() (*Lock, error)) error {
	l, err := acquire()
	if err != nil {
		return err
	}
	if err := c.nodes.Life.BeginCall(); err != nil {
		// Close began as the lock was acquired: fn does not run.
		closed := fmt.Errorf("%w: %q: %w", ErrNotAcquired, showKey(l.key), err)
		return errors.Join(closed, c.releaseAfterDo(ctx, l))
	}
	defer c.nodes.Life.EndCall() // last: Close waits for Do until it returns
	// Do's own KeepAlive context ends with Do: a reentrant Do (WithOwner)
	// whose Release sends nothing must not keep renewing for its caller.
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	kctx := l.KeepAlive(dctx)
	released := false
	defer func() {
		if !released { // fn panicked or called runtime.Goexit: the panic goes on after this
			_ = c.releaseAfterDo(ctx, l)
		}
	}()
	fnErr := fn(kctx, l)
	// Read before Release, which ends kctx with ErrReleased.
	cause := context.Cause(kctx)
	released = true
	relErr := c.releaseAfterDo(ctx, l)
	switch {
	case errors.Is(cause, ErrLockLost) && errors.Is(fnErr, cause):
		return fnErr // fn returned the cause, or wrapped it: said once
	case errors.Is(cause, ErrLockLost):
		return errors.Join(fnErr, cause)
	case fnErr == nil && relErr == nil:
		return nil
	case fnErr != nil && errors.Is(cause, ErrClosed) && !errors.Is(fnErr, ErrClosed):
		return errors.Join(fnErr, cause, relErr) // why fn's context ended
	}
	return errors.Join(fnErr, relErr)
}

// releaseAfterDo releases Do's lock with a deadline of its own: ctx may
// have ended, and the caller must not wait for long either way.
func (c *Client) releaseAfterDo(ctx context.Context, l *Lock) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanupTimeout)
	defer cancel()
	return l.Release(rctx)
}

// lease is the renewal shared by the KeepAlive calls of one Lock. It costs
// one timer and no goroutine between renewals: the timer fires at the next
// renewal, on a goroutine of the runtime's that runs the renewal and ends,
// and while a renewal runs it is set to the loss deadline instead, so that a
// stalled renewal cannot delay the loss signal.
type lease struct {
	l *Lock

	mu       sync.Mutex // lock order: first, before Lock.mu (docs/internals.md)
	timer    *time.Timer
	next     time.Time          // when the next renewal is due
	running  bool               // a renewal is waiting in the Client's queue or in progress
	paused   int                // pauseRenewals calls not resumed: no renewal starts
	idle     chan struct{}      // closed when running turns false, for pauseRenewals; nil when nobody waits
	stopRun  context.CancelFunc // ends the renewal in progress
	failed   int                // renewals failed in a row
	contexts []keepAliveCtx     // the live KeepAlive contexts; renewal runs while there is one
	lastID   uint64
	// cause is why the lease ended for good (ErrReleased or an error
	// matching ErrLockLost); nil while the lock may still be held.
	cause error
	// values are the values, not the cancellation, of the KeepAlive
	// context that started the renewal: its renewals and its loss are
	// that call's work, and the hooks are told so (Event.Context).
	values context.Context
}

// keepAliveCtx is one KeepAlive call's context, cancelled with the lease's cause.
type keepAliveCtx struct {
	id     uint64
	cancel context.CancelCauseFunc
}

// leaseOf returns the Lock's lease, made on first use. A lease made after
// Release started is over from the start.
func (l *Lock) leaseOf() *lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease == nil {
		l.lease = &lease{l: l}
		if l.releasing {
			l.lease.cause = ErrReleased
		}
	}
	return l.lease
}

// currentLease returns the Lock's lease, or nil when KeepAlive was never
// called.
func (l *Lock) currentLease() *lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

// stopLease ends the lease for good with cause, if there is one: Release
// calls it once it has marked the lock as releasing.
func (l *Lock) stopLease(cause error) {
	ls := l.currentLease()
	if ls == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.endLocked(cause)
}

// closeLeases ends the leases that were renewing when Close began, for
// good, with ErrClosed; a KeepAlive that starts one later finds the Client
// closed.
func closeLeases(leases []any) {
	for _, x := range leases {
		ls := x.(*lease)
		ls.mu.Lock()
		ls.endLocked(ErrClosed)
		ls.mu.Unlock()
	}
}

// untilMoved sets the timer to follow Until and the TTL, which an Extend may
// have just changed: a renewal's, or the holder's own, which can move Until
// earlier or shorten the TTL. Extend defers it, so it runs once Extend has
// let go of l.mu.
func (l *Lock) untilMoved() {
	ls := l.currentLease()
	if ls == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	switch {
	case ls.cause != nil || len(ls.contexts) == 0:
	case ls.running: // the renewal schedules the next one when it is done
		ls.armLocked(ls.now())
	default: // the holder's own Extend, which may have shortened the TTL
		ls.scheduleLocked(ls.now())
	}
}

func (ls *lease) now() time.Time { return ls.l.client.cfg.clock.Now() }

// window returns the lock's validity and TTL, as the latest extension set
// them.
func (ls *lease) window() (until time.Time, ttl time.Duration) {
	ls.l.mu.Lock()
	defer ls.l.mu.Unlock()
	return ls.l.until, ls.l.ttl
}

// deadline is when the lock is given up as lost unless a renewal succeeds
// first: a margin before Until, which absorbs the latency of the timer and
// of the cancellation.
func (ls *lease) deadline() time.Time {
	until, ttl := ls.window()
	return until.Add(-min(max(ttl/renewMarginOf, renewMarginMin), renewMarginMax))
}

// interval is the time between successful renewals.
func (ls *lease) interval() time.Duration {
	_, ttl := ls.window()
	d := ttl / renewEvery
	if fixed := ls.l.client.cfg.renewInterval; fixed > 0 {
		d = min(fixed, ttl/renewAtMost)
	}
	return max(d, renewMin)
}

// backoff is the wait before retrying a failed renewal: a tenth of the
// interval, 5 to 100 ms, doubling with each failure in a row. Retries that
// would fall after the deadline do not happen: the timer fires at the
// deadline first.
func (ls *lease) backoff() time.Duration {
	d := min(max(ls.interval()/renewBackoffOf, renewBackoffMin), renewBackoffMax)
	for i := 1; i < ls.failed && d < renewBackoffCap; i++ {
		d *= 2
	}
	return d
}

// startLocked schedules the first renewal of a lease that had no KeepAlive
// context.
func (ls *lease) startLocked() {
	ls.failed = 0
	ls.scheduleLocked(ls.now())
}

// scheduleLocked sets the next renewal about an interval from now, or sooner when
// less than an interval would be left before the deadline by then (a lock
// that was kept for a while before KeepAlive was called): a renewal then
// still has time to land.
func (ls *lease) scheduleLocked(now time.Time) {
	interval := ls.interval()
	// Up to a tenth earlier, at random: locks kept alive together (a
	// service starting up) do not all fall due in the same instant, each
	// timer starting a goroutine when it fires.
	ls.next = now.Add(interval - rand.N(interval/renewJitterOf+1))
	if latest := ls.deadline().Add(-interval); latest.Before(ls.next) {
		ls.next = latest
	}
	ls.armLocked(now)
}

// armLocked sets the timer to the next event: the next renewal, or the
// deadline if it comes first or a renewal is running.
func (ls *lease) armLocked(now time.Time) {
	at := ls.deadline()
	if !ls.running && ls.paused == 0 && ls.next.Before(at) {
		at = ls.next
	}
	d := at.Sub(now)
	if ls.timer == nil {
		ls.timer = time.AfterFunc(d, ls.fire)
	} else {
		ls.timer.Reset(d)
	}
}

// fire runs when the timer goes off: it declares the lock lost at the
// deadline, or hands a renewal that is due to the Client's renewal queue. A
// firing that finds neither sets the timer again.
func (ls *lease) fire() {
	ls.mu.Lock()
	if ls.cause != nil || len(ls.contexts) == 0 {
		ls.mu.Unlock()
		return
	}
	now := ls.now()
	if !now.Before(ls.deadline()) {
		ls.endLocked(fmt.Errorf("%w: %q: no renewal reached a quorum before the validity ran out (%d failed)",
			ErrLockLost, showKey(ls.l.key), ls.failed))
		ls.mu.Unlock()
		return
	}
	if ls.running || ls.paused > 0 || now.Before(ls.next) {
		ls.armLocked(now) // Until may have moved since the timer was set
		ls.mu.Unlock()
		return
	}
	ls.running = true
	ls.armLocked(now) // to the deadline while the renewal waits and runs
	ls.mu.Unlock()
	ls.l.client.renewals.Do(ls)
}

// renewalKey marks the context of a KeepAlive renewal, first try or
// retry: its round waits for each node the TTL's budget up to renewWait
// (extendOnNodes), not the holder's own Extend.
type renewalKey struct{}

// renew runs one renewal that fire found due, and schedules what comes
// next.
func (ls *lease) renew() {
	ls.mu.Lock()
	if ls.cause != nil || len(ls.contexts) == 0 {
		ls.stoppedLocked() // ended or stopped while it waited: the timer is off
		ls.mu.Unlock()
		return
	}
	deadline := ls.deadline()
	_, ttl := ls.window()
	values := ls.values
	ctx, cancel := context.WithDeadline(context.WithValue(values, renewalKey{}, true), deadline)
	ls.stopRun = cancel
	ls.mu.Unlock()

	start := time.Now()
	err := ls.l.Extend(ctx, ttl)
	cancel()
	if obs := &ls.l.client.obs; obs.on {
		obs.renewal(values, ls.l.key, start, err)
	}
	if ls.settle(err) {
		if hook := ls.l.client.cfg.renewFailed; hook != nil {
			hook(ls.l, err)
		}
	}
}

// settle takes in a renewal's outcome: it schedules the next renewal, a
// retry, or declares the lock lost. It reports whether err is a failure to
// tell the Client's hook about: not when the lease ended or stopped while
// the renewal ran, which cancelled it.
func (ls *lease) settle(err error) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.stoppedLocked()
	if ls.cause != nil || len(ls.contexts) == 0 {
		return false // the timer is off
	}
	now := ls.now()
	if err == nil {
		ls.failed = 0
		ls.scheduleLocked(now)
		return false
	}
	if ls.releasing() {
		ls.endLocked(ErrReleased) // Release's cause, whichever ends the lease first
		return false
	}
	if errors.Is(err, ErrClosed) {
		ls.endLocked(ErrClosed) // Close's cause, whichever ends the lease first: no loss
		return false
	}
	if lost := ls.lostBy(err); lost != nil {
		ls.endLocked(lost)
		return true
	}
	ls.failed++
	ls.next = now.Add(ls.backoff())
	ls.armLocked(now)
	return true
}

// stoppedLocked notes that no renewal runs any more, and wakes a
// pauseRenewals waiting for that.
func (ls *lease) stoppedLocked() {
	ls.running, ls.stopRun = false, nil
	if ls.idle != nil {
		close(ls.idle)
		ls.idle = nil
	}
}

// pauseRenewals holds off the Lock's KeepAlive renewals until resume is
// called, and returns once no renewal is running: a Proclaim's takeover
// replaces the Lock's value on the nodes, and a renewal that reached a
// node after it found another token there and, on a quorum, declared the
// leadership lost while the takeover that displaced it was still waiting
// for its own quorum. The lease's deadline still passes as it would: a
// pause that outlasts the validity ends the lease, as a renewal that
// never came back would. A renewal in progress ends by that deadline at
// the latest.
func (l *Lock) pauseRenewals() (resume func()) {
	ls := l.currentLease()
	if ls == nil {
		return func() {}
	}
	ls.mu.Lock()
	ls.paused++
	for ls.running {
		if ls.idle == nil {
			ls.idle = make(chan struct{})
		}
		idle := ls.idle
		ls.mu.Unlock()
		<-idle
		ls.mu.Lock()
	}
	ls.mu.Unlock()
	return func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		ls.paused--
		if ls.cause == nil && len(ls.contexts) > 0 {
			ls.armLocked(ls.now())
		}
	}
}

// maxConcurrentRenewals bounds the KeepAlive renewals of one Client that
// run at once (engine.Bounded); a lock whose renewal waits too long is
// still declared lost at its deadline.
const maxConcurrentRenewals = 64

// releasing reports whether Release has started: it marks the lock, then
// ends the lease, and a renewal can fail and settle in between. Its
// failure is then no loss and no failed renewal.
func (ls *lease) releasing() bool {
	ls.l.mu.Lock() // lease.mu, then Lock.mu
	defer ls.l.mu.Unlock()
	return ls.l.releasing
}

// lostBy returns the loss that a failed renewal proves, or nil when a retry
// may still succeed.
func (ls *lease) lostBy(err error) error {
	switch {
	case errors.Is(err, ErrInvalidArgument):
		return fmt.Errorf("%w: %q: %w", ErrLockLost, showKey(ls.l.key), err)
	}
	var qe *QuorumError
	if nodes := ls.l.client.nodes.Len(); errors.As(err, &qe) && qe.refusedQuorum(nodes) {
		return fmt.Errorf("%w: %q: %d of %d nodes no longer hold our value: %w", ErrLockLost, showKey(ls.l.key), qe.refused(), nodes, err)
	}
	return nil
}

// endLocked ends the lease for good: the timer stops, a renewal in progress
// is cancelled, and every KeepAlive context is cancelled with cause. Only
// the first cause counts.
func (ls *lease) endLocked(cause error) {
	if ls.cause != nil {
		return
	}
	ls.cause = cause
	if errors.Is(cause, ErrLockLost) {
		ls.l.mu.Lock() // lease.mu, then Lock.mu
		ls.l.lost = true
		ls.l.mu.Unlock()
		if obs := &ls.l.client.obs; obs.on {
			obs.lost(ls.values, ls.l.key, cause)
		}
	}
	ls.haltLocked()
	for _, w := range ls.contexts {
		w.cancel(cause)
	}
	ls.contexts = nil
}

// haltLocked stops renewing: the timer, and the renewal in progress.
func (ls *lease) haltLocked() {
	if ls.timer != nil {
		ls.timer.Stop()
	}
	if ls.stopRun != nil {
		ls.stopRun()
	}
	ls.l.client.nodes.Life.DropLease(ls) // lease.mu, then Life.mu
}

// leave drops the KeepAlive context id, whose context ended; renewal stops
// with the last one.
func (ls *lease) leave(id uint64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for i, w := range ls.contexts {
		if w.id == id {
			ls.contexts = slices.Delete(ls.contexts, i, i+1)
			if len(ls.contexts) == 0 {
				ls.haltLocked()
			}
			return
		}
	}
}
