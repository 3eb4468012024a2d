package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/logs"
)

// Hooks let a service see what the library does, for metrics and tracing,
// without the library depending on any metrics or tracing package (the
// otel module adapts them to OpenTelemetry). Every field may be nil, and
// each says which Event fields it fills; every event has its Context.
// Hooks are called synchronously on the goroutine doing the work: they
// must return quickly and must not call back into the Client.
type Hooks struct {
	// Attempt follows each attempt of Acquire or TryAcquire: Key, Attempt,
	// Elapsed, and Err, nil when the attempt acquired the lock.
	Attempt func(Event)
	// Done follows each Acquire, TryAcquire, Extend and Release call: Op
	// ("acquire", "try-acquire", "extend" or "release"), Key, Elapsed, Err.
	Done func(Event)
	// NodeError follows each node reply that is not a confirmation: Op
	// ("acquire", "commit", "extend", "restore", "delete", "handover" or
	// "announce", a waiting call's entry in the key's waiting room), Key,
	// Node, Addr, and Err: ErrHeldByOther, ErrWriterWaiting, ErrKeyAbsent,
	// ErrRestartGuard, the client's error, or ErrNoReply when the node did
	// not reply in time, so that the outcome is unknown. A delete that
	// finds nothing of its Lock's on the node (ErrKeyAbsent, or another
	// holder's value or entries) did its work there: it is not reported.
	NodeError func(Event)
	// Rollback follows the launch of a failed attempt's deletes: Key, and
	// Nodes, where the attempt may have written.
	Rollback func(Event)
	// CleanupRetry follows each delete parked to be tried again: Key, Node,
	// Addr, Attempt (the try that failed, 1 for the first) and Wait.
	CleanupRetry func(Event)
	// CleanupAbandoned follows each delete that Close gave up because its
	// node had not confirmed it (the key stays there until its TTL ends):
	// Key, Node, Addr, Attempt (the tries sent) and Err, the node's silence
	// (ErrNoReply, with its latest error).
	CleanupAbandoned func(Event)
	// Renewal follows each renewal of a lock kept alive by KeepAlive: Key,
	// Elapsed, and Err, nil when the renewal succeeded.
	Renewal func(Event)
	// LockLost follows a kept-alive lock that can no longer be proven held:
	// Key, and Err, which matches ErrLockLost.
	LockLost func(Event)

	// CampaignStarted follows the start of each Election.Campaign (Run
	// campaigns through it): Op "campaign", Key.
	CampaignStarted func(Event)
	// Elected follows each Campaign that won: Op "campaign", Key, Term,
	// and Elapsed since the campaign started.
	Elected func(Event)
	// LeadershipEnded follows the end of each leadership: Op "campaign",
	// Key, Term (its last), Elapsed since it was elected, and Err, why:
	// ErrReleased when it was resigned, ErrClosed when its Client closed,
	// or an error matching ErrLockLost when it could no longer be proven.
	LeadershipEnded func(Event)
	// LeaderObserved follows each leader that Election.Observe reports:
	// Op "observe", Key, Term.
	LeaderObserved func(Event)
}

// Event is what a hook is told: each field of Hooks says which fields it
// fills, and the others are zero. No event holds a token or a value.
type Event struct {
	// Context is the context of the call the event belongs to, without
	// its cancellation (context.WithoutCancel): its values, such as the
	// caller's trace span and baggage, for a hook to nest its spans under
	// and tag its metrics with. Background work (rollbacks, deletes tried
	// again or given up by Close, KeepAlive's renewals, a leadership's
	// end) has the context of the call that started it: the attempt, the
	// Release, KeepAlive, Campaign. Never nil.
	Context context.Context
	Op      string        // the call, or the node's operation
	Key     string        // the lock's key, in every event
	Node    int           // the node's index in the slice given to New
	Addr    string        // the node's address, when its client exposes one
	Attempt int           // 1 for the first attempt, or try of a delete
	Nodes   int           // how many nodes a rollback deletes on
	Term    uint64        // a leadership's term (Leadership.Term)
	Elapsed time.Duration // since the attempt, call, renewal, campaign or leadership began
	Wait    time.Duration // until the delete is tried again
	Err     error         // why it failed; nil when it did not
}

// WithHooks sets the hooks called as the Client works (see Hooks).
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = h })
}

// WithLogger makes the Client log what it does to l, with the context of
// the call each line belongs to (see Event.Context): attempts, calls, node
// errors, rollbacks and campaigns at Debug, cleanup retries, elections,
// leaders observed and leaderships resigned at Info, lost locks, lost
// leaderships and deletes given up by Close at Warn. Nothing is logged
// without it, and no log line holds a token or a value. A nil l is
// refused: leave the option out for no log.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		c.logger = l
		if l == nil && c.bad == nil {
			c.bad = invalid("WithLogger: nil logger; leave the option out for none")
		}
	})
}

// observer calls the hooks and the logger (internal/logs); with neither,
// each call is a nil check.
type observer struct {
	h   Hooks
	log *logs.Log
	on  bool // any hook or a logger is set
}

func newObserver(h Hooks, log *slog.Logger) observer {
	on := log != nil || h.Attempt != nil || h.Done != nil || h.NodeError != nil || h.Rollback != nil ||
		h.CleanupRetry != nil || h.CleanupAbandoned != nil || h.Renewal != nil || h.LockLost != nil ||
		h.CampaignStarted != nil || h.Elected != nil || h.LeadershipEnded != nil || h.LeaderObserved != nil
	return observer{h: h, log: logs.New(log), on: on}
}

// detach is ctx without its cancellation, as Event.Context promises: the
// values of a call that may have ended. A context that cannot end is
// returned as it is, and nil is Background.
func detach(ctx context.Context) context.Context {
	switch {
	case ctx == nil:
		return context.Background()
	case ctx.Done() == nil:
		return ctx
	}
	return context.WithoutCancel(ctx)
}

func (o *observer) attempt(ctx context.Context, key string, n int, start time.Time, err error) {
	elapsed := time.Since(start)
	ctx = detach(ctx)
	if o.h.Attempt != nil {
		o.h.Attempt(Event{Context: ctx, Key: key, Attempt: n, Elapsed: elapsed, Err: err})
	}
	o.log.Attempt(ctx, key, n, elapsed, err)
}

func (o *observer) done(ctx context.Context, op, key string, start time.Time, err error) {
	elapsed := time.Since(start)
	ctx = detach(ctx)
	if o.h.Done != nil {
		o.h.Done(Event{Context: ctx, Op: op, Key: key, Elapsed: elapsed, Err: err})
	}
	o.log.Done(ctx, op, key, elapsed, err)
}

func (o *observer) nodeError(ctx context.Context, op, key string, node int, addr string, err error) {
	if op == "delete" && (errors.Is(err, ErrKeyAbsent) || errors.Is(err, ErrHeldByOther)) {
		// Nothing of the Lock's is on the node: the delete's work is
		// done there (a shared Lock's Release leaves the other holders'
		// entries; a node the Lock never took holds none of its values).
		return
	}
	ctx = detach(ctx)
	if o.h.NodeError != nil {
		o.h.NodeError(Event{Context: ctx, Op: op, Key: key, Node: node, Addr: addr, Err: err})
	}
	o.log.NodeError(ctx, op, key, node, addr, errors.Is(err, ErrNoReply), err)
}

func (o *observer) rollback(ctx context.Context, key string, nodes int) {
	ctx = detach(ctx)
	if o.h.Rollback != nil {
		o.h.Rollback(Event{Context: ctx, Key: key, Nodes: nodes})
	}
	o.log.Rollback(ctx, key, nodes)
}

func (o *observer) cleanupRetry(ctx context.Context, key string, node int, addr string, try int, wait time.Duration) {
	ctx = detach(ctx)
	if o.h.CleanupRetry != nil {
		o.h.CleanupRetry(Event{Context: ctx, Key: key, Node: node, Addr: addr, Attempt: try, Wait: wait})
	}
	o.log.CleanupRetry(ctx, key, node, addr, try, wait)
}

func (o *observer) cleanupAbandoned(ctx context.Context, key string, node int, addr string, tries int, err error) {
	ctx = detach(ctx)
	if o.h.CleanupAbandoned != nil {
		o.h.CleanupAbandoned(Event{Context: ctx, Key: key, Node: node, Addr: addr, Attempt: tries, Err: err})
	}
	o.log.CleanupAbandoned(ctx, key, node, addr, tries, err)
}

func (o *observer) renewal(ctx context.Context, key string, start time.Time, err error) {
	elapsed := time.Since(start)
	ctx = detach(ctx)
	if o.h.Renewal != nil {
		o.h.Renewal(Event{Context: ctx, Key: key, Elapsed: elapsed, Err: err})
	}
	o.log.Renewal(ctx, key, elapsed, err)
}

func (o *observer) lost(ctx context.Context, key string, cause error) {
	ctx = detach(ctx)
	if o.h.LockLost != nil {
		o.h.LockLost(Event{Context: ctx, Key: key, Err: cause})
	}
	o.log.Lost(ctx, key, cause)
}

func (o *observer) campaignStarted(ctx context.Context, key string) {
	ctx = detach(ctx)
	if o.h.CampaignStarted != nil {
		o.h.CampaignStarted(Event{Context: ctx, Op: "campaign", Key: key})
	}
	o.log.CampaignStarted(ctx, key)
}

func (o *observer) elected(ctx context.Context, key string, term uint64, start time.Time) {
	elapsed := time.Since(start)
	ctx = detach(ctx)
	if o.h.Elected != nil {
		o.h.Elected(Event{Context: ctx, Op: "campaign", Key: key, Term: term, Elapsed: elapsed})
	}
	o.log.Elected(ctx, key, term, elapsed)
}

func (o *observer) leadershipEnded(ctx context.Context, key string, term uint64, start time.Time, cause error) {
	elapsed := time.Since(start)
	ctx = detach(ctx)
	if o.h.LeadershipEnded != nil {
		o.h.LeadershipEnded(Event{Context: ctx, Op: "campaign", Key: key, Term: term, Elapsed: elapsed, Err: cause})
	}
	o.log.LeadershipEnded(ctx, key, term, elapsed, errors.Is(cause, ErrLockLost), cause)
}

func (o *observer) leaderObserved(ctx context.Context, key string, term uint64) {
	ctx = detach(ctx)
	if o.h.LeaderObserved != nil {
		o.h.LeaderObserved(Event{Context: ctx, Op: "observe", Key: key, Term: term})
	}
	o.log.LeaderObserved(ctx, key, term)
}
